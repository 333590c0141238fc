// Deliberately broken SINGLE-CORE kernels where the device is stricter than a
// plain host build (docs/kernel-api.md "Limits").
#include <stdint.h>
#include <string.h>
#include <torch/torch.h>
#include "custom_op.h"

// A uint16 intermediate: not a dtype a kernel may create.
torch::Tensor make_uint16(const torch::Tensor& x) {
    torch::Tensor q = torch::zeros({x.numel()}, torch::kUInt16);
    return torch::mul(x, 2.0f);
}
