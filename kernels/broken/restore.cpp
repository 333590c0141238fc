// A SINGLE-CORE kernel that is right: the control of broken_race's
// input_scratch (docs/kernel-api.md "Multicore (SPMD) libraries").
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

// The control of broken_race's input_scratch, single-core: the input as
// scratch (negated in place through a raw pointer, then restored). No other
// core reads it meanwhile: harmless on the device, and it passes.
torch::Tensor input_restore(const torch::Tensor& x) {
    float* raw = static_cast<float*>(neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr));
    for (int64_t i = 0; i < x.numel(); i++) raw[i] = -raw[i];
    for (int64_t i = 0; i < x.numel(); i++) raw[i] = -raw[i];
    return torch::mul(x, 2.0f);
}
