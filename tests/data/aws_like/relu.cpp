// A kernel laid out like AWS's public relu sample: compute sources only.
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);

    auto t_in_acc = t_in.accessor<float, 1>();
    auto t_out_acc = t_out.accessor<float, 1>();
    for (size_t i = 0; i < num_elem; i++) {
        t_out_acc[i] = t_in_acc[i] > 0.0 ? t_in_acc[i] : 0.0;
    }
    return t_out;
}

torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
    size_t num_elem = t_in.numel();
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);

    auto t_grad_acc = t_grad.accessor<float, 1>();
    auto t_in_acc = t_in.accessor<float, 1>();
    auto t_out_acc = t_out.accessor<float, 1>();
    for (size_t i = 0; i < num_elem; i++) {
        t_out_acc[i] = t_in_acc[i] > 0.0 ? t_grad_acc[i] : 0.0;
    }
    return t_out;
}

// The kernel of op tensor_negate (shape.cpp registers it under that op
// name): through TCM, flat, so it takes inputs of any rank and returns a
// 1-D tensor, as the public samples do.
torch::Tensor tensor_negate_compute(const torch::Tensor& t_in) {
    const size_t num_elem = t_in.numel();
    const size_t chunk = 1024;
    torch::Tensor t_out = torch::zeros({num_elem}, torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * chunk);
    if (buf == nullptr) {
        return t_out;
    }
    auto in_acc = t_in.tcm_accessor();
    auto out_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < num_elem; i += chunk) {
        const size_t n = num_elem - i < chunk ? num_elem - i : chunk;
        in_acc.tensor_to_tcm<float>(buf, i, n);
        for (size_t j = 0; j < n; j++) {
            buf[j] = -buf[j];
        }
        out_acc.tcm_to_tensor<float>(buf, i, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}
