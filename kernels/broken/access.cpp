// Deliberately broken SINGLE-CORE kernels: reads and writes past a tensor
// through every accessor kind, a stream used after close(), an empty()
// result returned uninitialised, and stream coherence violations
// (docs/kernel-api.md "Accessors and memory", "Making tensors").
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

// Standard accessor: the loop runs one element too far (i <= n).
torch::Tensor accessor_oob(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    auto a = x.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i <= x.numel(); i++) o[i] = 2.0f * a[i];
    return out;
}

// Read stream: one read() more than the tensor has.
torch::Tensor read_stream_oob(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    auto xs = x.read_stream_accessor<float>();
    auto os = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < x.numel(); i++) os.write(2.0f * xs.read());
    os.close();
    float extra = xs.read();
    out.fill_(extra);
    return out;
}

// Write stream: one write() more than the tensor has.
torch::Tensor write_stream_oob(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    auto xs = x.read_stream_accessor<float>();
    auto os = out.write_stream_accessor<float>();
    for (int64_t i = 0; i < x.numel(); i++) os.write(2.0f * xs.read());
    os.write(0.0f);
    return out;
}

// A write stream used after close().
torch::Tensor stream_after_close(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    auto xs = x.read_stream_accessor<float>();
    auto os = out.write_stream_accessor<float>();
    os.write(2.0f * xs.read());
    os.close();
    for (int64_t i = 1; i < x.numel(); i++) os.write(2.0f * xs.read());
    return out;
}

// TCM accessor: the last chunk of 8 starts 4 elements before the end.
torch::Tensor tcm_oob(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(8 * sizeof(float));
    if (buf == nullptr) return out;
    auto xa = x.tcm_accessor();
    auto oa = out.tcm_accessor();
    for (size_t i = 0; i < size_t(x.numel()); i += 4) {
        xa.tensor_to_tcm<float>(buf, i, 8);
        for (int j = 0; j < 8; j++) buf[j] *= 2.0f;
        oa.tcm_to_tensor<float>(buf, i, 8);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

// torch::empty() is uninitialised; the last three elements are never
// written and reach the output through customop_return_tensor's copy.
torch::Tensor empty_uninit(const torch::Tensor& x) {
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    auto a = x.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = 0; i + 3 < x.numel(); i++) o[i] = 2.0f * a[i];
    return out;
}

// COHERENT (the default policy): a read stream opened on a tensor while a
// write stream on it is open.
torch::Tensor coherence_error(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    auto xs = x.read_stream_accessor<float>();
    auto os = out.write_stream_accessor<float>();
    auto back = out.read_stream_accessor<float>();
    for (int64_t i = 0; i < x.numel(); i++) os.write(2.0f * xs.read());
    return out;
}

// The same under INCOHERENT_VERBOSE: a warning, and the result is right.
torch::Tensor coherence_verbose(const torch::Tensor& x) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    out.set_accessor_coherence_policy(torch::neuron::INCOHERENT_VERBOSE);
    auto xs = x.read_stream_accessor<float>();
    auto os = out.write_stream_accessor<float>();
    auto back = out.read_stream_accessor<float>();
    for (int64_t i = 0; i < x.numel(); i++) os.write(2.0f * xs.read());
    return out;
}

// Right (2x, through a raw pointer), then two writes before the output's
// first element (an index computed as i - 1 and i - 50 at i = 0).
torch::Tensor write_before(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* p = (float*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
    const float* xp = (const float*)neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr);
    for (int64_t i = 0; i < x.numel(); i++) p[i] = 2.0f * xp[i];
    p[-1] = 42.0f;
    p[-50] = 1.0f;
    return out;
}

// out[i] = 2 x[i] + x[i - 1] through a raw pointer; BUG: at i = 0 it reads
// x[-1], which the reference takes as 0.
torch::Tensor read_before(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* p = (float*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
    const float* xp = (const float*)neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr);
    for (int64_t i = 0; i < x.numel(); i++) p[i] = 2.0f * xp[i] + xp[i - 1];
    return out;
}
