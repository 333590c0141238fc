// y = (a + b) / 2, float32.
#include <stdint.h>
#include <torch/torch.h>

#if !defined(MONOREPO)
#error "the top manifest's defaults (cflags) were not inherited"
#endif

torch::Tensor mix(const torch::Tensor& t_a, const torch::Tensor& t_b) {
    const size_t n = t_a.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kFloat);
    auto a = t_a.accessor<float, 1>();
    auto b = t_b.accessor<float, 1>();
    auto out = t_out.accessor<float, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = 0.5f * (a[i] + b[i]);
    }
    return t_out;
}
