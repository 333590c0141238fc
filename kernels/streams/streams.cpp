// Stream accessors, the TCM accessor and the TCM pool (docs/kernel-api.md
// "Accessors and memory"). Single-core: stream accessors are single-core
// only. Each active stream holds 4 KiB of the 16 KiB TCM pool.
#include <stdint.h>
#include <stdio.h>
#include <torch/torch.h>

// out = a * x + y through two read streams and one write stream, each
// closed explicitly; the three coherence policies are set on the tensors
// (many read streams per input, one write stream on the output).
torch::Tensor stream_saxpy(const torch::Tensor& t_x, const torch::Tensor& t_y, float a) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty(t_x.sizes(), torch::kFloat);
    torch::Tensor x = t_x;
    torch::Tensor y = t_y;
    x.set_accessor_coherence_policy(torch::neuron::COHERENT);
    y.set_accessor_coherence_policy(torch::neuron::INCOHERENT_VERBOSE);
    t_out.set_accessor_coherence_policy(torch::neuron::INCOHERENT_QUIET);
    auto xs = x.read_stream_accessor<float>();
    auto ys = y.read_stream_accessor<float>();
    auto os = t_out.write_stream_accessor<float>();
    for (size_t i = 0; i < n; i++) {
        os.write(a * xs.read() + ys.read());
    }
    os.close();
    ys.close();
    xs.close();
    return t_out;
}

// float32 -> float8_e4m3 in 1024-element chunks through two TCM buffers
// from tcm_malloc (tensor_to_tcm, convert in TCM, tcm_to_tensor); any rank.
// A kernel cannot create a float8 tensor (docs/kernel-api.md "Limits"): it
// writes the op's output, get_dst_tensor().
torch::Tensor tcm_to_fp8(const torch::Tensor& t_x) {
    constexpr size_t kChunk = 1024;
    const size_t n = t_x.numel();
    torch::Tensor t_out = get_dst_tensor();
    float* in = static_cast<float*>(torch::neuron::tcm_malloc(kChunk * sizeof(float)));
    auto* out = static_cast<at::Float8_e4m3*>(torch::neuron::tcm_malloc(kChunk * sizeof(at::Float8_e4m3)));
    if (in == nullptr || out == nullptr) {
        torch::neuron::tcm_free(in);
        torch::neuron::tcm_free(out);
        return t_out;
    }
    auto x_acc = t_x.tcm_accessor();
    auto o_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < n; i += kChunk) {
        const size_t m = (n - i) > kChunk ? kChunk : (n - i);
        x_acc.tensor_to_tcm<float>(in, i, m);
        for (size_t j = 0; j < m; j++) {
            out[j] = at::Float8_e4m3(in[j]);
        }
        o_acc.tcm_to_tensor<at::Float8_e4m3>(out, i, m);
    }
    torch::neuron::tcm_free(out);
    torch::neuron::tcm_free(in);
    return t_out;
}

// (x * k) mod 2^16 for uint16 through a read and a write stream; prints the
// element count (printf reaches the user); any rank.  A kernel cannot
// create a uint16 tensor: it writes the op's output, get_dst_tensor().
torch::Tensor u16_scale(const torch::Tensor& t_x, int k) {
    const size_t n = t_x.numel();
    printf("u16_scale: %zu elements, k=%d\n", n, k);
    torch::Tensor t_out = get_dst_tensor();
    auto xs = t_x.read_stream_accessor<uint16_t>();
    auto os = t_out.write_stream_accessor<uint16_t>();
    for (size_t i = 0; i < n; i++) {
        os.write(static_cast<uint16_t>(xs.read() * static_cast<uint32_t>(k)));
    }
    os.close();
    xs.close();
    return t_out;
}
