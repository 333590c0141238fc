// Deliberately broken multicore kernels (kernels/broken/ops.yaml,
// broken_shared): what only the runs against one shared output show.
// Each core doubles its 8 elements of x (legal, TCM accessor); core 7 also
// peeks, through a raw pointer, at core 0's first element as a "core 0
// done?" flag (a cross-core race on the device: the cores run at the same
// time, so core 7 normally sees it unwritten).
#include <stdint.h>
#include <custom_op.h>
#include <neuron/neuron-utils.hpp>
#include <torch/torch.h>

static volatile float* raw(torch::Tensor& t) {
    auto q = t.q7_data_ptr();
    return (volatile float*)neuron_translate(q.ctx, q.hbm_addr);
}

static void doubled(const torch::Tensor& x, torch::Tensor& out) {
    uint32_t id = get_cpu_id();
    float buf[8];
    x.tcm_accessor().tensor_to_tcm<float>(buf, id * 8, 8);
    for (int j = 0; j < 8; j++) buf[j] *= 2.0f;
    out.tcm_accessor().tcm_to_tensor<float>(buf, id * 8, 8);
}

// BUG: when core 0 is not done, core 7 writes element 64 of 64.
torch::Tensor past_end_race(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    doubled(x, out);
    if (get_cpu_id() == 7) {
        volatile float* p = raw(out);
        if (p[0] == 0.0f) p[64] = 1.0f;
    }
    return out;
}

// BUG: the same, before the start of the output (element -1).
torch::Tensor before_start_race(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    doubled(x, out);
    if (get_cpu_id() == 7) {
        volatile float* p = raw(out);
        if (p[0] == 0.0f) p[-1] = 1.0f;
    }
    return out;
}

// BUG: each core tests the first element of its own part (never written
// yet) as an "already cleared?" flag, and works only when it is non-zero:
// on the device (a zero-filled output) no core does.
torch::Tensor skip_on_zero(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    volatile float* p = raw(out);
    if (p[get_cpu_id() * 8] != 0.0f) doubled(x, out);
    return out;
}
