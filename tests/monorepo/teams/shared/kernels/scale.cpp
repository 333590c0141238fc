// y = x * s, float32.
#include <stdint.h>
#include <torch/torch.h>

#include "shared_math.h"

#if !defined(SHARED) || defined(MONOREPO)
#error "teams/shared/ops.yaml defaults (cflags) were not applied"
#endif

torch::Tensor scale(const torch::Tensor& t_x, float s) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kFloat);
    auto x = t_x.accessor<float, 1>();
    auto out = t_out.accessor<float, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = x[i] * s;
    }
    return t_out;
}
