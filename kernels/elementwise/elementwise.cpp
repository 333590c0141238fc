// Element-wise operations of the device tensor library (docs/kernel-api.md
// "Element-wise operations"): every function in its allocating form op(...)
// and its op_out(result, ...) form. Shapes must match (no broadcasting), so
// every op here works for any rank up to 8. Single-core.
#include <stdint.h>
#include <torch/torch.h>

// sin(x) + cos(x) * tan(x / 4), allocating forms.
torch::Tensor ew_trig(const torch::Tensor& x) {
    torch::Tensor t = torch::tan(torch::div(x, 4.0f));
    return torch::add(torch::sin(x), torch::mul(torch::cos(x), t));
}

// log(a) + log2(a) + log10(a) + exp(-a) with a = |x| + 1, _out forms into
// tensors made once.
torch::Tensor ew_logexp(const torch::Tensor& x) {
    torch::Tensor a = torch::empty(x.sizes(), torch::kFloat);
    torch::Tensor t = torch::empty(x.sizes(), torch::kFloat);
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    torch::abs_out(a, x);
    torch::add_out(a, a, 1.0f);
    torch::log_out(out, a);
    torch::log2_out(t, a);
    torch::add_out(out, out, t);
    torch::log10_out(t, a);
    torch::add_out(out, out, t);
    torch::mul_out(t, a, -1.0f);
    torch::exp_out(t, t);
    torch::add_out(out, out, t);
    return out;
}

// clamp(floor(x) + ceil(x), lo, hi): floor_out, ceil, clamp_out.
torch::Tensor ew_round_clamp(const torch::Tensor& x, float lo, float hi) {
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    torch::floor_out(out, x);
    torch::add_out(out, out, torch::ceil(x));
    torch::clamp_out(out, out, lo, hi);
    return out;
}

// (|x| + 0.5)^y + x^2 + 2^y: the three forms of pow (tensor^tensor,
// tensor^scalar, scalar^tensor).
torch::Tensor ew_pow(const torch::Tensor& x, const torch::Tensor& y) {
    torch::Tensor base = torch::add(torch::abs(x), 0.5f);
    torch::Tensor out = torch::pow(base, y);
    torch::Tensor sq = torch::empty(x.sizes(), torch::kFloat);
    torch::pow_out(sq, x, 2);
    torch::add_out(out, out, sq);
    torch::pow_out(sq, 2.0f, y);
    return torch::add(out, sq);
}

// (x + alpha * y) - (x * y) / 4 - 2 * y, with add/sub/mul/div in both forms.
torch::Tensor ew_axpby(const torch::Tensor& x, const torch::Tensor& y, const torch::Scalar& alpha) {
    torch::Tensor s = torch::add(x, y, alpha);
    torch::Tensor p = torch::empty(x.sizes(), torch::kFloat);
    torch::mul_out(p, x, y);
    torch::div_out(p, p, 4.0f);
    torch::Tensor out = torch::sub(s, p);
    torch::sub_out(out, out, y, 2);
    return torch::div(out, torch::full(x.sizes(), 1.0f, torch::kFloat));
}

// (a & mask) | ~b, int32: bitwise_and, bitwise_not, bitwise_or_out.
torch::Tensor ew_bits(const torch::Tensor& a, const torch::Tensor& b, int mask) {
    torch::Tensor out = torch::empty(a.sizes(), torch::kInt);
    torch::bitwise_or_out(out, torch::bitwise_and(a, mask), torch::bitwise_not(b));
    return out;
}
