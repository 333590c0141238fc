// Two single-core kernels that double a float32 tensor in chunks of 16
// through the TCM (explore's test, tests/integration/test_explore.py).
// odd_tail_bug copies the tail after the last whole chunk two elements at
// a time, so the last element of an odd tail is never written: a bug that
// only a count of 16k + odd shows. odd_tail_ok is the same kernel, right.
// past_pool_bug: a bug only past the 16 KiB TCM pool.
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

static const size_t kChunk = 16;

static torch::Tensor doubled(const torch::Tensor& x, bool pairs_only) {
    const size_t n = x.numel();
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(kChunk * sizeof(float));
    if (buf == nullptr) return out;
    auto xa = x.tcm_accessor();
    auto oa = out.tcm_accessor();
    size_t i = 0;
    for (; i + kChunk <= n; i += kChunk) {
        xa.tensor_to_tcm<float>(buf, i, kChunk);
        for (size_t j = 0; j < kChunk; j++) buf[j] *= 2.0f;
        oa.tcm_to_tensor<float>(buf, i, kChunk);
    }
    const size_t step = pairs_only ? 2 : 1;
    for (; i + step <= n; i += step) {
        xa.tensor_to_tcm<float>(buf, i, step);
        for (size_t j = 0; j < step; j++) buf[j] *= 2.0f;
        oa.tcm_to_tensor<float>(buf, i, step);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

torch::Tensor odd_tail_bug(const torch::Tensor& x) { return doubled(x, true); }

// Doubles x through one 16 KiB TCM buffer (4096 floats); every chunk after
// the first is read from one element too early: only a tensor of more than
// 4096 elements with neighbours that differ shows it.
torch::Tensor past_pool_bug(const torch::Tensor& x) {
    const size_t n = x.numel(), chunk = 4096;
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(chunk * sizeof(float));
    if (buf == nullptr) return out;
    auto xa = x.tcm_accessor();
    auto oa = out.tcm_accessor();
    for (size_t i = 0; i < n; i += chunk) {
        const size_t count = n - i < chunk ? n - i : chunk;
        xa.tensor_to_tcm<float>(buf, i == 0 ? 0 : i - 1, count);
        for (size_t j = 0; j < count; j++) buf[j] *= 2.0f;
        oa.tcm_to_tensor<float>(buf, i, count);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

torch::Tensor odd_tail_ok(const torch::Tensor& x) { return doubled(x, false); }
