// out[i, j] = x[i, j] + b[j] for x [m, n] and b [n] (explore's test of
// named dimensions, tests/integration/test_explore.py). colbias_mod_bug
// reads b[(i*n + j) % m], which is b[j] only when m == n: a square vector
// cannot show it.
#include <torch/torch.h>

static torch::Tensor colbias(const torch::Tensor& t_x, const torch::Tensor& t_b, bool bug) {
    const int64_t m = t_x.sizes()[0], n = t_x.sizes()[1];
    torch::Tensor t_out = torch::empty({m, n}, torch::kFloat);
    auto x = t_x.accessor<float, 2>();
    auto b = t_b.accessor<float, 1>();
    auto out = t_out.accessor<float, 2>();
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            out[i][j] = x[i][j] + b[bug ? (i * n + j) % m : j];
    return t_out;
}

torch::Tensor colbias_ok(const torch::Tensor& x, const torch::Tensor& b) { return colbias(x, b, false); }

torch::Tensor colbias_mod_bug(const torch::Tensor& x, const torch::Tensor& b) { return colbias(x, b, true); }
