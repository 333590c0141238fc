// Kernels whose bugs explore must find (or, rowsum, must not invent):
// tests/integration/test_explore.py. Each is 2x of its input unless said.
#include <math.h>
#include <stdint.h>
#include <torch/torch.h>

namespace {
constexpr size_t kChunk = 512;

// out[i] = f(in[i], i) through a TCM buffer of kChunk elements
template <typename T, typename F>
void map_tcm(const torch::Tensor& in, torch::Tensor& out, F f) {
    const size_t n = in.numel();
    T* buf = (T*)torch::neuron::tcm_malloc(sizeof(T) * kChunk);
    if (buf == nullptr) return;
    auto ia = in.tcm_accessor();
    auto oa = out.tcm_accessor();
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t m = (n - i) > kChunk ? kChunk : (n - i);
        ia.tensor_to_tcm<T>(buf, i, m);
        for (size_t j = 0; j < m; j++) buf[j] = f(buf[j], i + j);
        oa.tcm_to_tensor<T>(buf, i, m);
    }
    torch::neuron::tcm_free(buf);
}
}  // namespace

// float32 right; float16 element 0 wrong past 16384 elements
torch::Tensor f16_big(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = x.numel();
    if (x.scalar_type() == torch::kHalf) {
        map_tcm<at::Half>(x, out, [n](at::Half v, size_t i) {
            return at::Half(2.0f * static_cast<float>(v) + (n > 16384 && i == 0 ? 1.0f : 0.0f));
        });
    } else {
        map_tcm<float>(x, out, [](float v, size_t) { return 2.0f * v; });
    }
    return out;
}

// out[i,j] = a[i,j] * v[j]; element 0 wrong when a has more than 20000 elements
torch::Tensor rowscale(const torch::Tensor& a, const torch::Tensor& v) {
    torch::Tensor out = get_dst_tensor();
    const size_t m = a.sizes()[0], k = a.sizes()[1];
    float* b = (float*)torch::neuron::tcm_malloc(2 * sizeof(float));
    auto aa = a.tcm_accessor(); auto va = v.tcm_accessor(); auto oa = out.tcm_accessor();
    for (size_t i = 0; i < m; i++) for (size_t j = 0; j < k; j++) {
        aa.tensor_to_tcm<float>(b, i * k + j, 1);
        va.tensor_to_tcm<float>(b + 1, j, 1);
        b[0] *= b[1];
        if (m * k > 20000 && i == 0 && j == 0) b[0] += 1.0f;
        oa.tcm_to_tensor<float>(b, i * k + j, 1);
    }
    torch::neuron::tcm_free(b);
    return out;
}

// past 1000 elements, reads sizes()[dim()] (one past the last dimension)
torch::Tensor big_bug(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    size_t inner = 1;
    if (x.numel() > 1000) {
        for (int64_t d = 0; d <= x.dim(); d++) inner *= x.sizes()[d];
    }
    (void)inner;
    map_tcm<float>(x, out, [](float v, size_t) { return 2.0f * v; });
    return out;
}

// writes element 0 only (its one vector is 0-dimensional)
torch::Tensor first_only(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* b = (float*)torch::neuron::tcm_malloc(sizeof(float));
    x.tcm_accessor().tensor_to_tcm<float>(b, 0, 1);
    b[0] *= 2.0f;
    out.tcm_accessor().tcm_to_tensor<float>(b, 0, 1);
    torch::neuron::tcm_free(b);
    return out;
}

// one ulp high past 1e30 (its vector asks exact results: rtol 0, atol 0)
torch::Tensor ulp_off(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    map_tcm<float>(x, out, [](float v, size_t) {
        float r = 2.0f * v;
        return (r > 1e30f && r < 3e38f) ? nextafterf(r, INFINITY) : r;
    });
    return out;
}

// past one row of x (a dimension of 1), reads sizes()[dim()]
torch::Tensor rows_bug(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    size_t inner = 1;
    if (x.sizes()[0] == 1) {
        for (int64_t d = 1; d <= x.dim(); d++) inner *= x.sizes()[d];
    }
    (void)inner;
    map_tcm<float>(x, out, [](float v, size_t) { return 2.0f * v; });
    return out;
}

// out[i] = x[i][0] of a 2-dimensional x (accessor<float,2>: rank 2 only)
torch::Tensor rowfirst(const torch::Tensor& x) {
    auto xa = x.accessor<float, 2>();
    torch::Tensor out = torch::zeros({x.sizes()[0]}, torch::kFloat);
    auto oa = out.accessor<float, 1>();
    for (int64_t i = 0; i < x.sizes()[0]; i++) oa[i] = xa[i][0];
    return out;
}
