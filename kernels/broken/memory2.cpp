// Deliberately broken single-core kernels (kernels/broken/ops.yaml,
// broken_memory2): stray stores past the output's guard zone, and reads
// one element past a TCM or dataram block.
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>

static float* raw_out(torch::Tensor& out) {
    auto q = out.q7_data_ptr();
    return (float*)neuron_translate(q.ctx, q.hbm_addr);
}

static torch::Tensor doubled_then_store(const torch::Tensor& x, int64_t at, bool store) {
    torch::Tensor out = get_dst_tensor();
    float* p = raw_out(out);
    auto xa = x.accessor<float, 1>();
    for (int64_t i = 0; i < x.numel(); i++) p[i] = 2.0f * xa[i];
    if (store) p[at] = 123.0f;      // BUG: a stray store
    return out;
}

// BUG: a store past the 64 KiB guard zone, in the bytes that round the
// output's copy up to a page (16 floats: element 16400).
torch::Tensor stray_rounding(const torch::Tensor& x) {
    return doubled_then_store(x, 16400, true);
}

// BUG: a store 8000 bytes past the end in the second run only (a branch on
// never-written TCM): past the later runs' 4 KiB guard zone.
torch::Tensor stray_second_run(const torch::Tensor& x) {
    unsigned char* t = (unsigned char*)torch::neuron::tcm_malloc(16);
    bool second = t[0] == 0xC3;
    torch::neuron::tcm_free(t);
    return doubled_then_store(x, 2000, second);
}

// BUG: a store 1.2 MB past the end (a wrong stride, say).
torch::Tensor stray_far(const torch::Tensor& x) {
    return doubled_then_store(x, 300000, true);
}

// BUG: y[i] = s[i] + s[i+1] from a TCM copy of x of exactly n elements,
// reading s[n] (the kernel expects a zero there, as the reference pads).
torch::Tensor stencil_tcm(const torch::Tensor& x) {
    int64_t n = x.numel();
    float* s = (float*)torch::neuron::tcm_malloc(n * sizeof(float));
    x.tcm_accessor().tensor_to_tcm<float>(s, 0, n);
    torch::Tensor out = get_dst_tensor();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = s[i] + s[i + 1];
    torch::neuron::tcm_free(s);
    return out;
}

// BUG: the same from a neuron_dataram_allocate block.
torch::Tensor stencil_dataram(const torch::Tensor& x) {
    int64_t n = x.numel();
    void* v = nullptr;
    neuron_dataram_allocate(n * sizeof(float), &v, 64);
    float* s = (float*)v;
    x.tcm_accessor().tensor_to_tcm<float>(s, 0, n);
    torch::Tensor out = get_dst_tensor();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = s[i] + s[i + 1];
    neuron_dataram_deallocate(v);
    return out;
}
