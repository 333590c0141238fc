// ReLU forward and backward, single-core, standard accessors: the shape of
// the public "Custom C++ Operators" example (docs/kernel-api.md "Accessors").
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);

    auto t_in_acc = t_in.accessor<float, 1>();
    auto t_out_acc = t_out.accessor<float, 1>();
    for (size_t i = 0; i < num_elem; i++) {
        t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;
    }
    return t_out;
}

// grad_in = grad_out where the forward input was positive, else 0.
torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);

    auto t_grad_acc = t_grad.accessor<float, 1>();
    auto t_in_acc = t_in.accessor<float, 1>();
    auto t_out_acc = t_out.accessor<float, 1>();
    for (size_t i = 0; i < num_elem; i++) {
        t_out_acc[i] = t_in_acc[i] > 0.0f ? t_grad_acc[i] : 0.0f;
    }
    return t_out;
}
