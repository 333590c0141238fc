// Deliberately broken SINGLE-CORE kernels: argument and result dtypes
// (ARCHITECTURE.md "The device's marshalling": the dtype is decided twice, and the
// device compares the two only when it writes the result back, utypes.hpp:65).
#include <stdint.h>
#include <torch/torch.h>

// The device's plain argument cursor, as a hand-written wrapper uses it.
#define GPSIMD_NO_ARG_POSITION_TAGS 1
#include <neuron/wrapper_api.h>

// Pulls its arguments again by hand and reads argument 1, a float in the
// schema, with customop_next_int: the device reinterprets the float's bytes.
torch::Tensor next_int_on_float(const torch::Tensor& x, float s) {
    customop_setup(true);
    at::Tensor x2 = customop_next_tensor();
    int k = customop_next_int();
    return torch::mul(x2, float(k) + s);
}

// Returns an int32 tensor for a float32 output: the writeback's dtype gate.
torch::Tensor writeback_dtype(const torch::Tensor& x) {
    return torch::zeros(x.sizes(), torch::kInt);
}
