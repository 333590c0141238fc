// Deliberately broken MULTICORE kernels (kernels/broken/ops.yaml, never in
// the default build): each shows one defect class the device hides and the
// emulator reports (docs/kernel-api.md "Multicore (SPMD) libraries",
// "Accessors and memory", "Limits").
#include <stdint.h>
#include <stdlib.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

namespace {

constexpr size_t kChunk = 64;  // elements per TCM chunk

// out[begin, begin + count) = 2 * x[begin, begin + count), through TCM.
void double_slice(const torch::Tensor& x, torch::Tensor& out, size_t begin, size_t count) {
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (buf == nullptr) return;
    auto in_acc = x.tcm_accessor();
    auto out_acc = out.tcm_accessor();
    for (size_t i = 0; i < count; i += kChunk) {
        const size_t n = (count - i) > kChunk ? kChunk : (count - i);
        in_acc.tensor_to_tcm<float>(buf, begin + i, n);
        for (size_t j = 0; j < n; j++) buf[j] = 2.0f * buf[j];
        out_acc.tcm_to_tensor<float>(buf, begin + i, n);
    }
    torch::neuron::tcm_free(buf);
}

}  // namespace

// THE CLASSIC REMAINDER BUG: the last core takes the remainder of
// numel / count but starts at partition * cpu_id with its enlarged
// partition, so it starts past where it should, reads and writes beyond
// the tensor and leaves elements before it unwritten.
torch::Tensor remainder_bug(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t numel = x.numel(), id = get_cpu_id(), count = get_cpu_count();
    size_t partition = numel / count;
    if (id == count - 1) partition += numel % count;
    double_slice(x, out, partition * id, partition);
    return out;
}

// Each core writes one element more than its slice: neighbours overlap
// (the values agree, so only the write sets show it).
torch::Tensor overlap(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t numel = x.numel(), id = get_cpu_id(), count = get_cpu_count();
    const size_t part = numel / count, begin = part * id;
    size_t n = (id == count - 1) ? numel - begin : part + 1;
    double_slice(x, out, begin, n);
    return out;
}

// The work is split over count - 1 cores; the last core claims the output
// and writes nothing (the output is right: a warning, not a failure).
torch::Tensor idle_core(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t numel = x.numel(), id = get_cpu_id(), workers = get_cpu_count() - 1;
    if (id == workers) return out;
    const size_t part = numel / workers, begin = part * id;
    double_slice(x, out, begin, id == workers - 1 ? numel - begin : part);
    return out;
}

// A standard accessor in multicore mode (docs/kernel-api.md: undefined, races).
torch::Tensor std_accessor_multicore(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    auto a = x.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (int64_t i = get_cpu_id(); i < x.numel(); i += get_cpu_count()) o[i] = 2.0f * a[i];
    return out;
}

// A read stream accessor in multicore mode (docs/kernel-api.md: single-core only).
torch::Tensor stream_multicore(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    auto xs = x.read_stream_accessor<float>();
    float sum = 0.0f;
    for (int64_t i = 0; i < x.numel(); i++) sum += xs.read();
    xs.close();
    out.fill_(sum);
    return out;
}

// A multicore op that never calls get_dst_tensor: every core returns a whole
// result, which the device would copy over the same output eight times.
torch::Tensor no_dst_tensor(const torch::Tensor& x) {
    return torch::mul(x, 2.0f);
}

// Three 1 MiB tensors on each core: the per-core HBM scratch window of a
// multicore object is 2 MiB (docs/kernel-api.md "Limits").
torch::Tensor hbm_window(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    torch::Tensor keep[3];
    for (int i = 0; i < 3; i++) keep[i] = torch::empty({1024, 256}, torch::kFloat);  // 1 MiB each
    double_slice(x, out, 0, 0);
    return out;
}

// Core 3 aborts; the other cores still run, and the vector names the core.
torch::Tensor core3_abort(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    if (get_cpu_id() == 3) abort();
    const size_t numel = x.numel(), id = get_cpu_id(), count = get_cpu_count();
    const size_t part = numel / count;
    double_slice(x, out, part * id, id == count - 1 ? numel - part * id : part);
    return out;
}

// Every core doubles its slice; core 3 then fills the 4 KiB before the
// output through a raw pointer (an index that went below 0): the 1024
// elements before it.
torch::Tensor write_before_mc(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t numel = x.numel(), id = get_cpu_id(), count = get_cpu_count();
    const size_t part = numel / count;
    double_slice(x, out, part * id, id == count - 1 ? numel - part * id : part);
    if (id == 3) {
        float* p = (float*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
        for (int i = 1; i <= 1024; i++) p[-i] = 42.0f;
    }
    return out;
}

// out[i] = 2 x[i] + x[i - 1], each core its slice through TCM, x[i - 1]
// through a raw pointer; BUG: core 0 reads x[-1], which the reference takes
// as 0.
torch::Tensor read_before_mc(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t numel = x.numel(), id = get_cpu_id(), count = get_cpu_count();
    const size_t part = numel / count, begin = part * id;
    const size_t n = id == count - 1 ? numel - begin : part;
    const float* xp = (const float*)neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr);
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * (n ? n : 1));
    if (buf == nullptr) return out;
    x.tcm_accessor().tensor_to_tcm<float>(buf, begin, n);
    for (size_t j = 0; j < n; j++) buf[j] = 2.0f * buf[j] + xp[(int64_t)(begin + j) - 1];
    out.tcm_accessor().tcm_to_tensor<float>(buf, begin, n);
    torch::neuron::tcm_free(buf);
    return out;
}
