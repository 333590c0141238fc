// Deliberately broken MULTICORE kernels (kernels/broken/ops.yaml): core 4
// on cores 2 and 6 both done, as race.cpp's both_done, through reads the
// run with every other core's part written once missed (found in review):
// reads the runtime follows, made only in the runs without the read check
// (the shared ones, which keep no read map), found by asking the runtime
// linked into the object; and a core that takes its raw pointer openly but
// skips its shortcut where its own part is already written (that run was
// the only one where it was).
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
#include <gpsimd_host/abi.h>   // (GPSIMD_CHECK_READS)

namespace gpsimd_rt { bool check_enabled(uint32_t check); }

namespace {

// out[begin, begin + count) = 2 * x there, through TCM
void double_part(const torch::Tensor& x, torch::Tensor& out, size_t begin, size_t count) {
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * 64);
    if (buf == nullptr) return;
    auto in_acc = x.tcm_accessor();
    auto out_acc = out.tcm_accessor();
    for (size_t i = 0; i < count; i += 64) {
        const size_t n = (count - i) > 64 ? 64 : (count - i);
        in_acc.tensor_to_tcm<float>(buf, begin + i, n);
        for (size_t j = 0; j < n; j++) buf[j] *= 2.0f;
        out_acc.tcm_to_tensor<float>(buf, begin + i, n);
    }
    torch::neuron::tcm_free(buf);
}

// how: 0, tensor_to_tcm from the output; 1, neuron_memcpy from the
// output's device address (made from the input's: the model's layout puts
// the output at the next MiB); 2, the raw pointer of the spotter
torch::Tensor both_done_read(const torch::Tensor& x, int how) {
    torch::Tensor out = get_dst_tensor();
    const size_t per = size_t(x.numel()) / get_cpu_count(), begin = get_cpu_id() * per;
    float* v = (float*)torch::neuron::tcm_malloc(5 * sizeof(float));
    if (v == nullptr) return out;
    auto in_acc = x.tcm_accessor();
    const float* raw = nullptr;
    bool mine_written = false;
    if (how == 2 && get_cpu_id() == 4) {
        raw = static_cast<const float*>(
            neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
        in_acc.tensor_to_tcm<float>(v, begin, 1);
        mine_written = raw[begin] == 2.0f * v[0];
    }
    double_part(x, out, begin, per);
    if (get_cpu_id() != 4 || mine_written ||
        (how != 2 && gpsimd_rt::check_enabled(GPSIMD_CHECK_READS))) {
        torch::neuron::tcm_free(v);
        return out;
    }
    in_acc.tensor_to_tcm<float>(v, 2 * per, 1);
    in_acc.tensor_to_tcm<float>(v + 1, 6 * per, 1);
    if (how == 0) {
        out.tcm_accessor().tensor_to_tcm<float>(v + 3, 2 * per, 1);
        out.tcm_accessor().tensor_to_tcm<float>(v + 4, 6 * per, 1);
    } else if (how == 1) {
        const uint64_t o = (x.q7_data_ptr().hbm_addr & ~0xFFFFFull) + 0x100000;
        neuron_memcpy(v + 3, o + 2 * per * sizeof(float), sizeof(float));
        neuron_memcpy(v + 4, o + 6 * per * sizeof(float), sizeof(float));
    } else {
        v[3] = raw[2 * per];
        v[4] = raw[6 * per];
    }
    if (v[3] == 2.0f * v[0] && v[4] == 2.0f * v[1]) {
        out.tcm_accessor().tensor_to_tcm<float>(v + 2, begin, 1);
        v[2] += 1.0f;
        out.tcm_accessor().tcm_to_tensor<float>(v + 2, begin, 1);
    }
    torch::neuron::tcm_free(v);
    return out;
}

}  // namespace

torch::Tensor both_done_tcm(const torch::Tensor& x) { return both_done_read(x, 0); }
torch::Tensor both_done_memcpy(const torch::Tensor& x) { return both_done_read(x, 1); }
torch::Tensor both_done_spot(const torch::Tensor& x) { return both_done_read(x, 2); }

// Core 4 on cores 2 and 6 both done where its own part reads unwritten,
// told apart from the run with every other core's part written by what
// that run left of its own part (the output's bytes as uint8: its first
// element is 165, run 0's poison byte, which that run took for unwritten),
// or by how far its output lies from its input (that run read another
// run's inputs); both found in review.
torch::Tensor both_done_poison_valued(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t per = size_t(x.numel()) / get_cpu_count(), begin = get_cpu_id() * per;
    uint8_t* buf = (uint8_t*)torch::neuron::tcm_malloc(per);
    if (buf == nullptr) return out;
    const uint8_t* raw = nullptr;
    bool mine_written = false;
    if (get_cpu_id() == 4) {
        raw = static_cast<const uint8_t*>(
            neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
        mine_written = raw[begin] != 0;
    }
    x.tcm_accessor().tensor_to_tcm<uint8_t>(buf, begin, per);
    if (get_cpu_id() == 4) {
        buf[0] = 0xA5;
        if (!mine_written && raw[2 * per] != 0 && raw[6 * per] != 0) buf[1] += 1;
    }
    out.tcm_accessor().tcm_to_tensor<uint8_t>(buf, begin, per);
    torch::neuron::tcm_free(buf);
    return out;
}

torch::Tensor both_done_distance(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t per = size_t(x.numel()) / get_cpu_count(), begin = get_cpu_id() * per;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * per);
    if (buf == nullptr) return out;
    bool bad = false;
    if (get_cpu_id() == 4) {
        const float* o = static_cast<const float*>(
            neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr));
        const char* i = static_cast<const char*>(
            neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr));
        const long long d = (const char*)o - i;
        const bool far = d < 0 || d > (1ll << 20);
        bad = !far && o[2 * per] != 0.0f && o[6 * per] != 0.0f && o[begin] == 0.0f;
    }
    x.tcm_accessor().tensor_to_tcm<float>(buf, begin, per);
    for (size_t j = 0; j < per; j++) buf[j] *= 2.0f;
    if (bad) buf[0] += 1.0f;
    out.tcm_accessor().tcm_to_tensor<float>(buf, begin, per);
    torch::neuron::tcm_free(buf);
    return out;
}
