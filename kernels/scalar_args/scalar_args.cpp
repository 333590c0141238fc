// One op per scalar argument type of the device ABI (the Neuron SDK's build driver, build_custom_op.py):
// Scalar -> const at::Scalar&, int -> int, long long -> long long.
#include <stdint.h>
#include <torch/torch.h>

// y = x + alpha, float32
torch::Tensor add_scalar(const torch::Tensor& t_x, const torch::Scalar& alpha) {
    const size_t n = t_x.numel();
    const float a = alpha.to<float>();
    torch::Tensor t_out = torch::empty({n}, torch::kFloat);
    auto x = t_x.accessor<float, 1>();
    auto out = t_out.accessor<float, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = x[i] + a;
    }
    return t_out;
}

// y = min(max(x, lo), hi), int32
torch::Tensor clamp_int(const torch::Tensor& t_x, int lo, int hi) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kInt);
    auto x = t_x.accessor<int32_t, 1>();
    auto out = t_out.accessor<int32_t, 1>();
    for (size_t i = 0; i < n; i++) {
        const int32_t v = x[i];
        // (torch.clamp's order: a lo above hi gives hi)
        const int32_t above = v < lo ? lo : v;
        out[i] = above > hi ? hi : above;
    }
    return t_out;
}

// y = x + offset, int64 (an offset that does not fit in 32 bits)
torch::Tensor offset_long(const torch::Tensor& t_x, long long offset) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kLong);
    auto x = t_x.accessor<int64_t, 1>();
    auto out = t_out.accessor<int64_t, 1>();
    for (size_t i = 0; i < n; i++) {
        out[i] = x[i] + static_cast<int64_t>(offset);
    }
    return t_out;
}
