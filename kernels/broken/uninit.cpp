// Never-written memory other than TCM and torch::empty(): HBM scratch, the
// heap (malloc, new[]) and the stack, each read before it is written; and
// the control that zeroes each of them first. Every op: each of the 8 cores
// sums its 32 elements of x into 4 partial sums and writes them to
// out[4 * id, 4 * id + 4) (reference.py:partial_sums).
#include <stdlib.h>
#include <string.h>

#include <vector>

#include <custom_op.h>
#include <neuron/neuron-utils.hpp>
#include <torch/torch.h>

namespace {

const size_t kPer = 32;   // elements of x per core (x has 8 * 32)

// acc[i % 4] += this core's elements (read into a local buffer it fills).
__attribute__((noinline)) void add_slice(const torch::Tensor& x, float* acc) {
    float buf[kPer];
    x.tcm_accessor().tensor_to_tcm<float>(buf, get_cpu_id() * kPer, kPer);
    for (size_t i = 0; i < kPer; i++) acc[i % 4] += buf[i];
}

__attribute__((noinline)) void write_partials(torch::Tensor& out, const float* acc) {
    float res[4] = {acc[0], acc[1], acc[2], acc[3]};
    out.tcm_accessor().tcm_to_tensor<float>(res, 4 * get_cpu_id(), 4);
}

}  // namespace

// BUG: the partial sums live in HBM scratch that is never zeroed.
torch::Tensor scratch_uninit(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* acc = (float*)neuron_translate(neuron_translate_ctx(), neuron_hbm_allocate(4 * sizeof(float)));
    add_slice(x, acc);
    write_partials(out, acc);
    return out;
}

// BUG: the partial sums live in malloc'd memory that is never zeroed.
torch::Tensor malloc_uninit(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* acc = (float*)malloc(4 * sizeof(float));
    add_slice(x, acc);
    write_partials(out, acc);
    free(acc);
    return out;
}

// BUG: the partial sums live in a new[] array that is never zeroed.
torch::Tensor new_uninit(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* acc = new float[4];
    add_slice(x, acc);
    write_partials(out, acc);
    delete[] acc;
    return out;
}

// BUG: the partial sums live in a local array that is never zeroed.
torch::Tensor stack_uninit(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float acc[4];
    add_slice(x, acc);
    write_partials(out, acc);
    return out;
}

// The control: the same sums in calloc'd, zeroed malloc'd, value-initialised
// std::vector, zeroed scratch and initialised stack memory (5 times the sums).
torch::Tensor zeroed_partials(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float* c = (float*)calloc(4, sizeof(float));
    float* m = (float*)malloc(4 * sizeof(float));
    memset(m, 0, 4 * sizeof(float));
    std::vector<float> v(4);
    float* s = (float*)neuron_translate(neuron_translate_ctx(), neuron_hbm_allocate(4 * sizeof(float)));
    memset(s, 0, 4 * sizeof(float));
    float local[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float* all[5] = {c, m, v.data(), s, local};
    for (float* acc : all) add_slice(x, acc);
    float sum[4];
    for (int k = 0; k < 4; k++) sum[k] = c[k] + m[k] + v[k] + s[k] + local[k];
    write_partials(out, sum);
    free(m);
    free(c);
    return out;
}

// State kept between calls: each core writes its partial sums on its first
// call only (a static flag), as if the output kept them; on the device the
// next call leaves the output unwritten.
torch::Tensor first_call_only(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    static bool done = false;
    if (done) return out;
    done = true;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    add_slice(x, acc);
    write_partials(out, acc);
    return out;
}

// BUG (state kept between calls): the partial sums start from a zeroed HBM
// scratch block kept in a static from the first call; custom_op.h releases
// every block at the next launch (the device hands it out again), so a later
// call starts from whatever is there then.
torch::Tensor kept_scratch(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    static float* zeros = nullptr;
    if (!zeros) {
        zeros = (float*)neuron_translate(neuron_translate_ctx(), neuron_hbm_allocate(4 * sizeof(float)));
        memset(zeros, 0, 4 * sizeof(float));
    }
    float acc[4];
    memcpy(acc, zeros, sizeof acc);
    add_slice(x, acc);
    write_partials(out, acc);
    return out;
}
