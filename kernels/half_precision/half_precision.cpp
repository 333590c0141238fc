// 16-bit floating-point ops: compute in float32, store bfloat16 / float16.
#include <math.h>
#include <stdint.h>
#include <torch/torch.h>

// GELU, tanh approximation, bfloat16 in and out.
torch::Tensor gelu_bf16(const torch::Tensor& t_x) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kBFloat16);
    auto x = t_x.accessor<at::BFloat16, 1>();
    auto out = t_out.accessor<at::BFloat16, 1>();
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    for (size_t i = 0; i < n; i++) {
        const float v = static_cast<float>(x[i]);
        out[i] = at::BFloat16(0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v))));
    }
    return t_out;
}

// a * b, float16 in and out, product rounded once from float32.
torch::Tensor mul_f16(const torch::Tensor& t_a, const torch::Tensor& t_b) {
    const size_t n = t_a.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kHalf);
    auto a = t_a.accessor<at::Half, 1>();
    auto b = t_b.accessor<at::Half, 1>();
    auto out = t_out.accessor<at::Half, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = at::Half(static_cast<float>(a[i]) * static_cast<float>(b[i]));
    }
    return t_out;
}
