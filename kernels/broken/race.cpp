// Deliberately broken MULTICORE kernels: cross-core races (kernels/broken/
// ops.yaml, never in the default build). On the device the eight cores run
// at the same time and cannot wait for each other (docs/kernel-api.md
// "Multicore (SPMD) libraries"): a core that reads what another core writes, or a
// result that depends on which core writes last, is a race the device
// hides. own_readback is the control: a core may read back what it wrote.
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
#include <gpsimd_host/abi.h>   // (GPSIMD_CHECK_READS: both_done_hidden)

namespace {

constexpr size_t kChunk = 64;  // elements per TCM chunk
constexpr size_t kParts = 8;   // partial sums per core (reduce_partials)

struct Slice {
    size_t begin;
    size_t count;
};

Slice my_slice(size_t numel) {
    const size_t id = get_cpu_id(), count = get_cpu_count();
    const size_t base = numel / count, rem = numel % count;
    return {id * base + (id < rem ? id : rem), base + (id < rem ? 1 : 0)};
}

// out[s] = scale * x[s] (+ out[s] when accumulate), through TCM.
void scale_slice(const torch::Tensor& x, torch::Tensor& out, Slice s, float scale, bool accumulate) {
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    float* acc = (float*)torch::neuron::tcm_malloc(sizeof(float) * kChunk);
    if (buf == nullptr || acc == nullptr) return;
    auto in_acc = x.tcm_accessor();
    auto out_acc = out.tcm_accessor();
    for (size_t i = 0; i < s.count; i += kChunk) {
        const size_t n = (s.count - i) > kChunk ? kChunk : (s.count - i);
        in_acc.tensor_to_tcm<float>(buf, s.begin + i, n);
        if (accumulate) out_acc.tensor_to_tcm<float>(acc, s.begin + i, n);
        for (size_t j = 0; j < n; j++) buf[j] = scale * buf[j] + (accumulate ? acc[j] : 0.0f);
        out_acc.tcm_to_tensor<float>(buf, s.begin + i, n);
    }
    torch::neuron::tcm_free(acc);
    torch::neuron::tcm_free(buf);
}

}  // namespace

// THE TEMPTING REDUCTION: each core writes kParts partial sums of its slice
// into its own part of the output, then core 0 reads the other cores'
// partials back and adds them into its part. On the device core 0 may read
// them before the other cores have written them.
torch::Tensor reduce_partials(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t id = get_cpu_id(), count = get_cpu_count();
    const size_t per = x.numel() / count, step = per / kParts;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * (step + kParts * count));
    if (buf == nullptr) return out;
    float* part = buf + step;   // this core's partials, then the others'
    auto in_acc = x.tcm_accessor();
    auto out_acc = out.tcm_accessor();
    for (size_t j = 0; j < kParts; j++) {
        in_acc.tensor_to_tcm<float>(buf, id * per + j * step, step);
        float sum = 0.0f;
        for (size_t i = 0; i < step; i++) sum += buf[i];
        part[j] = sum;
    }
    out_acc.tcm_to_tensor<float>(part, id * kParts, kParts);
    if (id == 0) {
        out_acc.tensor_to_tcm<float>(part + kParts, kParts, kParts * (count - 1));
        for (size_t c = 1; c < count; c++)
            for (size_t j = 0; j < kParts; j++) part[j] += part[c * kParts + j];
        out_acc.tcm_to_tensor<float>(part, 0, kParts);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

// Every core writes its own slice, and element 0 too (with its core id):
// the last core to write it wins.
torch::Tensor last_writer(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    scale_slice(x, out, my_slice(x.numel()), 2.0f, false);
    float* v = (float*)torch::neuron::tcm_malloc(sizeof(float));
    if (v == nullptr) return out;
    v[0] = float(get_cpu_id());
    out.tcm_accessor().tcm_to_tensor<float>(v, 0, 1);
    torch::neuron::tcm_free(v);
    return out;
}

// A carry between neighbours: each core adds the last element of the
// previous core's slice to its own first element, read through a raw
// pointer into the output (which the runtime does not follow: only the
// runs in two core orders show it).
torch::Tensor neighbour_carry(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    scale_slice(x, out, s, 2.0f, false);
    if (get_cpu_id() == 0 || s.count == 0) return out;
    const float* raw = static_cast<const float*>(
        neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
    float* v = (float*)torch::neuron::tcm_malloc(sizeof(float));
    if (v == nullptr) return out;
    auto out_acc = out.tcm_accessor();
    out_acc.tensor_to_tcm<float>(v, s.begin, 1);
    v[0] += raw[s.begin - 1];
    out_acc.tcm_to_tensor<float>(v, s.begin, 1);
    torch::neuron::tcm_free(v);
    return out;
}

// A lost update: each core computes 2x of its slice in TCM, appends the
// next core's first output element, read through a raw pointer, and stores
// the block back whole with one tcm_to_tensor. On the device it may store
// back that element before the next core has written it, or after, undoing
// its write; run one after another, the cores in either order end right.
torch::Tensor block_writeback(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    const float* raw = static_cast<const float*>(
        neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * (s.count + 1));
    if (buf == nullptr) return out;
    x.tcm_accessor().tensor_to_tcm<float>(buf, s.begin, s.count);
    for (size_t i = 0; i < s.count; i++) buf[i] *= 2.0f;
    size_t n = s.count;
    if (s.begin + n < size_t(x.numel())) {
        buf[n] = raw[s.begin + n];
        n++;
    }
    out.tcm_accessor().tcm_to_tensor<float>(buf, s.begin, n);
    torch::neuron::tcm_free(buf);
    return out;
}

// The control: each core writes 2x into its slice, then reads back what it
// wrote itself and adds x: 3x, no race.
torch::Tensor own_readback(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    scale_slice(x, out, s, 2.0f, false);
    scale_slice(x, out, s, 1.0f, true);
    return out;
}

// A race from the second call on: each core reads (through tensor_to_tcm,
// which the runtime follows) the first element of the next core's slice
// and adds 1 to its own first element when that core has written it
// already (a wrong shortcut). Its first call is right; on the device its second call reads
// the next core's element before or after that core writes it.
static int second_race_calls = 0;
torch::Tensor second_race(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    scale_slice(x, out, s, 2.0f, false);
    const size_t n = size_t(x.numel());
    if (second_race_calls++ == 0 || s.count == 0 || s.begin + s.count >= n) return out;
    float* v = (float*)torch::neuron::tcm_malloc(3 * sizeof(float));
    if (v == nullptr) return out;
    auto out_acc = out.tcm_accessor();
    out_acc.tensor_to_tcm<float>(v, s.begin + s.count, 1);
    x.tcm_accessor().tensor_to_tcm<float>(v + 1, s.begin + s.count, 1);
    out_acc.tensor_to_tcm<float>(v + 2, s.begin, 1);
    if (v[0] == 2.0f * v[1]) v[2] += 1.0f;      // (the next core is done: a wrong shortcut)
    out_acc.tcm_to_tensor<float>(v + 2, s.begin, 1);
    torch::neuron::tcm_free(v);
    return out;
}

// Its own slice of the INPUT as scratch: each core negates it in place
// through a raw pointer, reads the last input element of the previous
// core's slice (a halo), and restores its slice; the inputs end as they
// were. On the device the previous core may be mid-scratch: the halo reads
// negated.
torch::Tensor input_scratch(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    float* raw = static_cast<float*>(neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr));
    float* halo = (float*)torch::neuron::tcm_malloc(2 * sizeof(float));
    if (halo == nullptr) return out;
    for (size_t i = 0; i < s.count; i++) raw[s.begin + i] = -raw[s.begin + i];
    if (s.begin > 0) x.tcm_accessor().tensor_to_tcm<float>(halo, s.begin - 1, 1);
    for (size_t i = 0; i < s.count; i++) raw[s.begin + i] = -raw[s.begin + i];
    if (s.begin > 0) x.tcm_accessor().tensor_to_tcm<float>(halo + 1, s.begin - 1, 1);
    torch::neuron::tcm_free(halo);
    scale_slice(x, out, s, 2.0f, false);
    return out;
}

// A shortcut on two other cores being done: core 4 reads the first output
// elements of cores 2 and 6 through a raw pointer and adds 1 to its own
// first element when both hold their results. In the order 0..7 core 4
// sees only core 2 done, in 7..0 only core 6; on the device, core 4 slower,
// both can be.
// Core 4 on cores 2 and 6 both done, through a raw pointer to the output.
// both_done_hidden hides the pointer from the check as two attacks did:
// it takes it only in the runs without the read check (the shared ones),
// found by asking the runtime linked into the object, and steps back from
// the output's end, translated from an address made from the input's (the
// output starts at the next MiB: the model's layout).
namespace gpsimd_rt { bool check_enabled(uint32_t check); }

torch::Tensor both_done_via(const torch::Tensor& x, bool hidden) {
    torch::Tensor out = get_dst_tensor();
    const Slice s = my_slice(x.numel());
    const size_t per = size_t(x.numel()) / get_cpu_count();
    scale_slice(x, out, s, 2.0f, false);
    if (get_cpu_id() != 4 || s.count == 0) return out;
    if (hidden && gpsimd_rt::check_enabled(GPSIMD_CHECK_READS)) return out;
    const float* raw;
    if (hidden) {
        const auto q = x.q7_data_ptr();
        const uint64_t end = (q.hbm_addr & ~0xFFFFFull) + 0x100000 + x.numel() * sizeof(float);
        raw = static_cast<const float*>(neuron_translate(q.ctx, end)) - x.numel();
    } else {
        raw = static_cast<const float*>(neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
    }
    float* v = (float*)torch::neuron::tcm_malloc(3 * sizeof(float));
    if (v == nullptr) return out;
    auto in_acc = x.tcm_accessor();
    in_acc.tensor_to_tcm<float>(v, 2 * per, 1);
    in_acc.tensor_to_tcm<float>(v + 1, 6 * per, 1);
    if (raw[2 * per] == 2.0f * v[0] && raw[6 * per] == 2.0f * v[1]) {
        out.tcm_accessor().tensor_to_tcm<float>(v + 2, s.begin, 1);
        v[2] += 1.0f;
        out.tcm_accessor().tcm_to_tensor<float>(v + 2, s.begin, 1);
    }
    torch::neuron::tcm_free(v);
    return out;
}

torch::Tensor both_done(const torch::Tensor& x) { return both_done_via(x, false); }
torch::Tensor both_done_hidden(const torch::Tensor& x) { return both_done_via(x, true); }

// Two writers from the second call on: core 3 also stores element 0 (core
// 0's) with the same value, on every call after its first.
static int second_overlap_calls = 0;
torch::Tensor second_overlap(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    scale_slice(x, out, my_slice(x.numel()), 2.0f, false);
    if (second_overlap_calls++ > 0 && get_cpu_id() == 3) scale_slice(x, out, Slice{0, 1}, 2.0f, false);
    return out;
}
