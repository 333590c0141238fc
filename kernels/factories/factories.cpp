// Tensor factories (docs/kernel-api.md "Making tensors": empty, zeros, ones,
// full, eye; the dtype is always given) and Tensor::fill_. Single-core.
#include <stdint.h>
#include <torch/torch.h>

// v * eye(n, m) + ones(n, m): an n x m float32 matrix from three factories.
torch::Tensor fact_eye(int n, int m, float v) {
    torch::Tensor diag = torch::mul(torch::eye(n, m, torch::kFloat), torch::full({n, m}, v, torch::kFloat));
    return torch::add(diag, torch::ones({n, m}, torch::TensorOptions().dtype(torch::kFloat)));
}

// x + v, int64, through zeros(...).fill_(v): any rank.
torch::Tensor fact_fill(const torch::Tensor& x, long long v) {
    torch::Tensor t = torch::zeros(x.sizes(), torch::kLong);
    t.fill_(v);
    return torch::add(x, t);
}

// x * s in float16: empty(...) filled with the Scalar s; any rank.
torch::Tensor fact_full_half(const torch::Tensor& x, const torch::Scalar& s) {
    torch::Tensor t = torch::empty(x.sizes(), x.scalar_type());
    t.fill_(s);
    return torch::mul(x, t);
}
