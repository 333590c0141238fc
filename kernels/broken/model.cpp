// Deliberately broken SINGLE-CORE kernels where the device is stricter than a
// plain host build: a dtype a kernel cannot create, a write stream's
// unflushed writes read through another access, a dataram buffer that is
// not dataram, or a local array on a stack the device keeps in device
// memory (docs/kernel-api.md "Limits", "Accessors and memory").  The
// controls pass: a write stream whose full buffer was flushed, a local
// array on the default stack as a TCM buffer.
#include <stdint.h>
#include <string.h>
#include <torch/torch.h>
#include "custom_op.h"

// A uint16 intermediate: not a dtype a kernel may create.
torch::Tensor make_uint16(const torch::Tensor& x) {
    torch::Tensor q = torch::zeros({x.numel()}, torch::kUInt16);
    return torch::mul(x, 2.0f);
}

// Pass 2 reads tmp through a standard accessor while pass 1's write stream
// is still open (no close()); tmp's coherence policy INCOHERENT_VERBOSE
// when ``verbose``, else COHERENT.
static torch::Tensor read_back_open(const torch::Tensor& x, bool verbose) {
    const int64_t n = x.numel();
    torch::Tensor tmp = torch::zeros({n}, torch::kFloat);
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    if (verbose) tmp.set_accessor_coherence_policy(torch::neuron::INCOHERENT_VERBOSE);
    auto xs = x.read_stream_accessor<float>();
    auto w = tmp.write_stream_accessor<float>();
    for (int64_t i = 0; i < n; i++) w.write(xs.read() * 2.0f);
    auto t = tmp.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = t[i] - 1.0f;
    return out;
}

// Under COHERENT (the default): an error.
torch::Tensor stale_accessor(const torch::Tensor& x) { return read_back_open(x, false); }

// The same through a read stream under INCOHERENT_QUIET: no message, and
// the read stream sees the zeros the write stream has not flushed yet.
torch::Tensor stale_quiet(const torch::Tensor& x) {
    const int64_t n = x.numel();
    torch::Tensor tmp = torch::zeros({n}, torch::kFloat);
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    tmp.set_accessor_coherence_policy(torch::neuron::INCOHERENT_QUIET);
    auto xs = x.read_stream_accessor<float>();
    auto w = tmp.write_stream_accessor<float>();
    for (int64_t i = 0; i < n; i++) w.write(xs.read() * 2.0f);
    auto r = tmp.read_stream_accessor<float>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = r.read() - 1.0f;
    return out;
}

// The same through a standard accessor under INCOHERENT_VERBOSE: a warning,
// and the stale zeros.
torch::Tensor stale_verbose(const torch::Tensor& x) { return read_back_open(x, true); }

// tensor_to_tcm of a tensor whose write stream is open: under COHERENT an error.
torch::Tensor stale_tcm(const torch::Tensor& x) {
    const int64_t n = x.numel();
    torch::Tensor tmp = torch::zeros({n}, torch::kFloat);
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    auto xs = x.read_stream_accessor<float>();
    auto w = tmp.write_stream_accessor<float>();
    for (int64_t i = 0; i < n; i++) w.write(xs.read() * 2.0f);
    float* buf = static_cast<float*>(torch::neuron::tcm_malloc(n * sizeof(float)));
    tmp.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    for (int64_t i = 0; i < n; i++) buf[i] -= 1.0f;
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(buf);
    return out;
}

// Control: under INCOHERENT_QUIET, the first 1024 floats (one full 4 KiB
// buffer) have been flushed and are read back right; the rest, still in
// the buffer, the kernel computes itself.
torch::Tensor flushed_when_full(const torch::Tensor& x) {
    const int64_t n = x.numel();
    torch::Tensor tmp = torch::zeros({n}, torch::kFloat);
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    tmp.set_accessor_coherence_policy(torch::neuron::INCOHERENT_QUIET);
    auto xa = x.accessor<float, 1>();
    auto w = tmp.write_stream_accessor<float>();
    for (int64_t i = 0; i < n; i++) w.write(xa[i] * 2.0f);
    auto t = tmp.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) o[i] = (i < 1024 ? t[i] : xa[i] * 2.0f) - 1.0f;
    return out;
}

// neuron_memcpy's dataram side pointed at a static array (the object's data,
// not dataram).
static float g_stage[64];
torch::Tensor memcpy_static(const torch::Tensor& x) {
    const int64_t n = x.numel();
    uint64_t hbm = neuron_hbm_allocate(n * sizeof(float));
    auto xa = x.accessor<float, 1>();
    for (int64_t i = 0; i < n; i++) g_stage[i] = xa[i];
    neuron_memcpy(hbm, g_stage, n * sizeof(float));
    return torch::mul(x, 2.0f);
}

// tensor_to_tcm into a static array instead of tcm_malloc's block.
static float g_buf[64];
torch::Tensor tcm_static(const torch::Tensor& x) {
    const int64_t n = x.numel();
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    x.tcm_accessor().tensor_to_tcm<float>(g_buf, 0, n);
    for (int64_t i = 0; i < n; i++) g_buf[i] *= 2.0f;
    out.tcm_accessor().tcm_to_tensor<float>(g_buf, 0, n);
    return out;
}

// Control: a local array on the default stack (the core's local memory) as
// the TCM buffer.
torch::Tensor tcm_stack(const torch::Tensor& x) {
    const int64_t n = x.numel();
    float buf[16];
    torch::Tensor out = torch::zeros({n}, torch::kFloat);
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    for (int64_t i = 0; i < n; i++) buf[i] *= 2.0f;
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    return out;
}

// The same with the op's stack_size above the default: the device moves that
// stack into device memory, so the local array is not dataram.
torch::Tensor tcm_moved_stack(const torch::Tensor& x) { return tcm_stack(x); }
