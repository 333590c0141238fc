// Deliberately broken SINGLE-CORE kernels: capacity and allocator misuse
// (docs/kernel-api.md "Accessors and memory", "Limits"; ARCHITECTURE.md
// "The device's marshalling" for the dataram staging of the writeback).
#include <stdint.h>
#include <stdio.h>
#include <custom_op.h>
#include <torch/torch.h>

// The whole 16 KiB TCM pool is taken, so the next tcm_malloc returns null,
// and the kernel writes through that null without checking it.
torch::Tensor tcm_null_deref(const torch::Tensor& x) {
    void* pool = torch::neuron::tcm_malloc(16384);
    float* buf = (float*)torch::neuron::tcm_malloc(4096);
    for (int j = 0; j < 16; j++) buf[j] = float(j);
    torch::neuron::tcm_free(buf);
    torch::neuron::tcm_free(pool);
    return torch::mul(x, 2.0f);
}

// tcm_free twice on the same block.
torch::Tensor tcm_double_free(const torch::Tensor& x) {
    void* buf = torch::neuron::tcm_malloc(256);
    torch::neuron::tcm_free(buf);
    torch::neuron::tcm_free(buf);
    return torch::mul(x, 2.0f);
}

// A TCM tile sized in elements where bytes were meant: each transfer of 8
// floats (32 bytes) goes into an 8-byte block, on the device over the TCM
// that follows it (the pool's next block, or a stream's reservation).
torch::Tensor tcm_too_small(const torch::Tensor& x) {
    const int64_t tile = 8;
    torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
    float* buf = (float*)torch::neuron::tcm_malloc(tile);  // tile * sizeof(float) was meant
    if (buf == nullptr) return out;
    auto xa = x.tcm_accessor();
    auto oa = out.tcm_accessor();
    for (int64_t i = 0; i < x.numel(); i += tile) {
        xa.tensor_to_tcm<float>(buf, i, tile);
        for (int64_t j = 0; j < tile; j++) buf[j] *= 2.0f;
        oa.tcm_to_tensor<float>(buf, i, tile);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

// The kernel keeps all 48 KiB of dataram staging, so the writeback of the
// result (a copy staged through dataram) has nothing to stage through.
torch::Tensor dataram_exhausted(const torch::Tensor& x) {
    void* hold = nullptr;
    neuron_dataram_allocate(48 * 1024, &hold, 64);
    return torch::mul(x, 2.0f);
}

// A 1 MiB local array on the 4196-byte launcher stack.
torch::Tensor stack_overflow(const torch::Tensor& x) {
    volatile char big[1 << 20];
    big[0] = 1;
    big[sizeof big - 1] = 1;
    return torch::mul(x, float(big[0] + big[sizeof big - 1]));
}

// 2000 lines of 93 bytes (186000): more than the 128 KiB printf buffer holds, so
// the oldest output is dropped (a warning; the result is right).
torch::Tensor printf_flood(const torch::Tensor& x) {
    for (int i = 0; i < 2000; i++) printf("line %04d %s\n", i, "................................................................................._");
    return torch::mul(x, 2.0f);
}

// State kept between calls: a call counter in a static variable. The first
// call is right (2x); on the device the library stays loaded, and every
// later call scales by the number of calls so far.
torch::Tensor call_counter(const torch::Tensor& x) {
    static int calls = 0;
    calls++;
    return torch::mul(x, 2.0f * float(calls));
}

// State kept between calls: a scale computed from the first call's scalar
// (right on that call, and on a second call with the same scalar).
torch::Tensor cached_scale(const torch::Tensor& x, const torch::Scalar& s) {
    static float k = -1.0f;
    if (k < 0.0f) k = 2.0f + s.to<float>();
    return torch::mul(x, k);
}

// State kept between calls: the first call's result is kept and returned by
// every later call; a later call with a larger x[0] than the first reads past
// x (a fault) before it does.
torch::Tensor stale_or_fault(const torch::Tensor& x) {
    static float cached[2];
    static float first_x0;
    static bool called = false;
    auto xa = x.accessor<float, 1>();
    if (!called) {
        called = true;
        first_x0 = xa[0];
        cached[0] = 2.0f * xa[0];
        cached[1] = 2.0f * xa[1];
    } else if (xa[0] > first_x0) {
        cached[0] += xa[5];
    }
    torch::Tensor out = torch::empty({2}, torch::kFloat);
    auto oa = out.accessor<float, 1>();
    oa[0] = cached[0];
    oa[1] = cached[1];
    return out;
}

// The control: a table filled on the first call and only read afterwards
// (kept between calls, and right on every call).
torch::Tensor lazy_table(const torch::Tensor& x) {
    static float table[4];
    static bool filled = false;
    if (!filled) {
        for (int i = 0; i < 4; i++) table[i] = 2.0f;
        filled = true;
    }
    return torch::mul(x, table[3]);
}
