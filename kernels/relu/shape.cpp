// Shape functions of the relu library and its registration (the
// torch-neuronx flow, docs/shape-functions.md). The older two-name form:
// each op's kernel function has the op's name.
#include <torch/torch.h>
#include "torchneuron/register.h"

// The output has the input's sizes, in float32.
torch::Tensor relu_fwd_shape(torch::Tensor x) {
    return torch::zeros(x.sizes(), torch::kFloat);
}

torch::Tensor relu_bwd_shape(torch::Tensor grad, torch::Tensor x) {
    return torch::zeros(x.sizes(), torch::kFloat);
}

NEURON_LIBRARY(my_ops, m) {
    m.def("relu_forward", &relu_fwd_shape, "relu_forward");
    m.def("relu_backward", &relu_bwd_shape, "relu_backward");
}
