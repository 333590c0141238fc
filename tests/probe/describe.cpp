// Test kernels of the descriptor round trip (abi.h; ARCHITECTURE.md
// "The device's marshalling"): what the host runtime decoded from the
// 48-byte descriptor of its input, for every ISA dtype, both storage arms
// and all three shape forms.
//
// describe(Tensor x) -> Tensor: thirteen int64 values
//   [scalar_type, dim, numel, size0 .. size7 (0 past dim),
//    raw bits of element 0, raw bits of the last element]  (0 when empty)
// echo(Tensor x) -> Tensor: x itself, so the runtime's staged writeback
//   (UTensor::copy, dtype gate utypes.hpp:65) writes its bytes into the
//   output descriptor's storage: the C++ -> Python direction.
#include <stdint.h>
#include <string.h>
#include <torch/torch.h>

namespace {

// The raw bits of element i, moved through TCM (the tensor's own bytes,
// whatever the element type).
template <typename T>
int64_t bits_at(const torch::Tensor& x, void* tcm, size_t i) {
    x.tcm_accessor().tensor_to_tcm<T>(static_cast<T*>(tcm), i, 1);
    int64_t bits = 0;
    memcpy(&bits, tcm, sizeof(T));
    return bits;
}

int64_t element_bits(const torch::Tensor& x, void* tcm, size_t i) {
    switch (x.scalar_type()) {
        case torch::kFloat: return bits_at<float>(x, tcm, i);
        case torch::kHalf: return bits_at<at::Half>(x, tcm, i);
        case torch::kBFloat16: return bits_at<at::BFloat16>(x, tcm, i);
        case torch::kChar: return bits_at<int8_t>(x, tcm, i);
        case torch::kByte: return bits_at<uint8_t>(x, tcm, i);
        case torch::kShort: return bits_at<int16_t>(x, tcm, i);
        case torch::kUInt16: return bits_at<uint16_t>(x, tcm, i);
        case torch::kInt: return bits_at<int32_t>(x, tcm, i);
        case torch::kUInt32: return bits_at<uint32_t>(x, tcm, i);
        case torch::kLong: return bits_at<int64_t>(x, tcm, i);
        case torch::kUInt64: return bits_at<uint64_t>(x, tcm, i);
        case torch::kFloat8_e3m4: return bits_at<at::Float8_e3m4>(x, tcm, i);
        case torch::kFloat8_e4m3: return bits_at<at::Float8_e4m3>(x, tcm, i);
        case torch::kFloat8_e5m2: return bits_at<at::Float8_e5m2>(x, tcm, i);
        default: return -1;
    }
}

}  // namespace

torch::Tensor describe(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros({13}, torch::kLong);
    auto o = out.accessor<int64_t, 1>();
    o[0] = static_cast<int64_t>(x.scalar_type());
    o[1] = static_cast<int64_t>(x.dim());
    o[2] = static_cast<int64_t>(x.numel());
    for (int64_t d = 0; d < x.dim(); d++) {
        o[3 + d] = x.sizes()[d];
    }
    if (x.numel() > 0) {
        void* tcm = torch::neuron::tcm_malloc(8);
        o[11] = element_bits(x, tcm, 0);
        o[12] = element_bits(x, tcm, static_cast<size_t>(x.numel() - 1));
        torch::neuron::tcm_free(tcm);
    }
    return out;
}

torch::Tensor echo(const torch::Tensor& x) {
    return x;
}
