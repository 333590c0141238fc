// Shape functions of the tcm_eltwise library (docs/shape-functions.md).
// The manifest gives these ops no schema: each is derived from its shape
// function (parameter names and types). Op leaky_relu runs the kernel
// function leaky_relu_compute: the op name is what torch calls, the kernel
// name what the device loader registers.
#include <torch/torch.h>
#include "torchneuron/register.h"

// The kernels return 1-D tensors for inputs of any rank (the runtime copies
// by element count); the output has the input's sizes, as torch sees it.
torch::Tensor scale_shift_shape(torch::Tensor x, double scale, double shift) {
    return torch::zeros(x.sizes(), torch::kFloat);
}

torch::Tensor leaky_relu_shape(torch::Tensor x, double slope) {
    return torch::zeros(x.sizes(), torch::kFloat);
}

NEURON_LIBRARY(my_ops, m) {
    m.def("scale_shift", &scale_shift_shape, "scale_shift");
    m.def("leaky_relu", &leaky_relu_shape, "leaky_relu_compute");
}
