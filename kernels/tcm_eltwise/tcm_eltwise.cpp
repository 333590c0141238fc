// Element-wise ops that stream their data through a TCM buffer in chunks
// (docs/kernel-api.md "Accessors and memory"): tensor_to_tcm, compute in TCM,
// tcm_to_tensor. Single-core.
#include <stdint.h>
#include <torch/torch.h>

namespace {

constexpr size_t kChunk = 1024;  // elements per TCM chunk (4 KiB of float)

// Apply `f` to every element of `t_in` into a new float32 tensor, chunk by chunk.
template <typename F>
torch::Tensor map_through_tcm(const torch::Tensor& t_in, F f) {
    const size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::empty({num_elem}, torch::kFloat);

    float* tcm_buffer = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (tcm_buffer == nullptr) {
        return t_out;
    }
    auto t_in_tcm_acc = t_in.tcm_accessor();
    auto t_out_tcm_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < num_elem; i += kChunk) {
        const size_t remaining = num_elem - i;
        const size_t copy_size = remaining > kChunk ? kChunk : remaining;
        t_in_tcm_acc.tensor_to_tcm<float>(tcm_buffer, i, copy_size);
        for (size_t j = 0; j < copy_size; j++) {
            tcm_buffer[j] = f(tcm_buffer[j]);
        }
        t_out_tcm_acc.tcm_to_tensor<float>(tcm_buffer, i, copy_size);
    }
    torch::neuron::tcm_free(tcm_buffer);
    return t_out;
}

}  // namespace

// y = x * scale + shift
torch::Tensor scale_shift(const torch::Tensor& t_in, float scale, float shift) {
    return map_through_tcm(t_in, [scale, shift](float v) { return v * scale + shift; });
}

// y = x if x > 0 else slope * x: the kernel of op leaky_relu (shape.cpp
// registers it under that op name)
torch::Tensor leaky_relu_compute(const torch::Tensor& t_in, float slope) {
    return map_through_tcm(t_in, [slope](float v) { return v > 0.0f ? v : v * slope; });
}
