// Multicore (SPMD) ops: each of the eight cores writes its own, mutually
// exclusive slice of the output it claims with get_dst_tensor(), moving data
// only through TCM accessors (the one accessor allowed in multicore mode,
// docs/kernel-api.md). The split gives the first `numel % count` cores one extra
// element each, so every element is written exactly once for any numel.
#include <stdint.h>
#include <stdio.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

namespace {

constexpr size_t kChunk = 1024;  // elements per TCM chunk

struct Slice {
    size_t begin;
    size_t count;
};

Slice my_slice(size_t num_elem) {
    const size_t cpu_id = get_cpu_id();
    const size_t cpu_count = get_cpu_count();
    const size_t base = num_elem / cpu_count;
    const size_t rem = num_elem % cpu_count;
    Slice s;
    s.begin = cpu_id * base + (cpu_id < rem ? cpu_id : rem);
    s.count = base + (cpu_id < rem ? 1 : 0);
    return s;
}

}  // namespace

torch::Tensor spmd_relu(const torch::Tensor& t_in) {
    torch::Tensor t_out = get_dst_tensor();
    const Slice s = my_slice(t_in.numel());

    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (buf == nullptr) {
        return t_out;
    }
    auto in_acc = t_in.tcm_accessor();
    auto out_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < s.count; i += kChunk) {
        const size_t n = (s.count - i) > kChunk ? kChunk : (s.count - i);
        in_acc.tensor_to_tcm<float>(buf, s.begin + i, n);
        for (size_t j = 0; j < n; j++) {
            buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
        }
        out_acc.tcm_to_tensor<float>(buf, s.begin + i, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}

// out = x + alpha * y
torch::Tensor spmd_axpy(const torch::Tensor& t_x, const torch::Tensor& t_y,
                        const torch::Scalar& alpha) {
    torch::Tensor t_out = get_dst_tensor();
    const Slice s = my_slice(t_x.numel());
    const float a = alpha.to<float>();

    float* bx = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    float* by = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (bx == nullptr || by == nullptr) {
        torch::neuron::tcm_free(bx);
        torch::neuron::tcm_free(by);
        return t_out;
    }
    auto x_acc = t_x.tcm_accessor();
    auto y_acc = t_y.tcm_accessor();
    auto out_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < s.count; i += kChunk) {
        const size_t n = (s.count - i) > kChunk ? kChunk : (s.count - i);
        x_acc.tensor_to_tcm<float>(bx, s.begin + i, n);
        y_acc.tensor_to_tcm<float>(by, s.begin + i, n);
        for (size_t j = 0; j < n; j++) {
            bx[j] = bx[j] + a * by[j];
        }
        out_acc.tcm_to_tensor<float>(bx, s.begin + i, n);
    }
    torch::neuron::tcm_free(by);
    torch::neuron::tcm_free(bx);
    return t_out;
}

// out[i] = x[i] * cpu_count + cpu_id of the core that owns element i: shows
// which core wrote what. Each core prints its slice; only core 0's printf
// reaches the user (docs/kernel-api.md "printf").
torch::Tensor spmd_owner(const torch::Tensor& t_in) {
    torch::Tensor t_out = get_dst_tensor();
    const Slice s = my_slice(t_in.numel());
    const float id = static_cast<float>(get_cpu_id());
    const float count = static_cast<float>(get_cpu_count());
    printf("core %u of %u: elements [%zu, %zu)\n", get_cpu_id(), get_cpu_count(), s.begin, s.begin + s.count);

    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (buf == nullptr) {
        return t_out;
    }
    auto in_acc = t_in.tcm_accessor();
    auto out_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < s.count; i += kChunk) {
        const size_t n = (s.count - i) > kChunk ? kChunk : (s.count - i);
        in_acc.tensor_to_tcm<float>(buf, s.begin + i, n);
        for (size_t j = 0; j < n; j++) {
            buf[j] = buf[j] * count + id;
        }
        out_acc.tcm_to_tensor<float>(buf, s.begin + i, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}
