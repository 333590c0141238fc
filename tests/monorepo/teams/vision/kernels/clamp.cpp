// y = clamp(x, 0, 1), float32, with the shared team's helper.
#include <stdint.h>
#include <torch/torch.h>

#include "shared_math.h"

#if !defined(VISION) || defined(MONOREPO)
#error "teams/vision/ops.yaml defaults (cflags) were not applied"
#endif

torch::Tensor clamp01(const torch::Tensor& t_x) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kFloat);
    auto x = t_x.accessor<float, 1>();
    auto out = t_out.accessor<float, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = shared_clamp(x[i], 0.0f, 1.0f);
    }
    return t_out;
}
