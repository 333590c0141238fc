// Test kernels of the marshalling ABI paths and guards, run through the whole
// emulator pipeline by tests/test_emu_abi_paths.py
// (the device ABI (gpsimd_host/abi.h); the Neuron SDK's build driver, build_custom_op.py).
#include <stdint.h>
#include <string.h>
#include <torch/torch.h>

// The device's plain cursor entries (no argument-position tags): a kernel
// that pulls one argument more than the stream holds trips arg_parser.hpp:66.
#define GPSIMD_NO_ARG_POSITION_TAGS 1
#include <neuron/wrapper_api.h>

// The return-copy path: a fresh result, staged through dataram by
// customop_return_tensor (chunked when larger than the free dataram).
torch::Tensor ret_copy(const torch::Tensor& x, float s) {
    return torch::mul(x, s);
}

// The get_dst_tensor path: the output is written in place; the value
// returned (an int32 tensor of one element) is ignored, so the utypes.hpp:65
// gate never sees it.
torch::Tensor dst_inplace(const torch::Tensor& x, const torch::Scalar& a) {
    torch::Tensor out = get_dst_tensor();
    torch::add_out(out, x, a);
    return torch::zeros({1}, torch::kInt);
}

// Every argument type of the Neuron SDK's build driver, build_custom_op.py in one op:
// out = x * f + (k + m + s), float32.
torch::Tensor all_types(const torch::Tensor& x, int k, long long m, float f, const torch::Scalar& s) {
    const double shift = double(k) + double(m) + s.toDouble();
    return torch::add(torch::mul(x, f), shift);
}

// Pulls one argument past the end of the stream.
torch::Tensor read_extra(const torch::Tensor& x) {
    at::Tensor extra = customop_next_tensor();
    return torch::add(x, extra);
}

// A 1 MiB frame: with -fstack-clash-protection its pages are probed in
// order, so it lands on the guard page of the wrapper stack.
torch::Tensor deep(const torch::Tensor& x) {
    volatile char big[1 << 20];
    big[0] = 1;
    big[sizeof big - 1] = 2;
    return torch::full(x.sizes(), float(big[0] + big[sizeof big - 1]), torch::kFloat);
}

// HBM allocations come from this core's scratch window (32 MiB single-core,
// 2 MiB per core multicore); mib MiB that do not fit fault SCRATCH_FULL.
torch::Tensor hog(const torch::Tensor& x, int mib) {
    torch::Tensor keep[64];
    for (int i = 0; i < mib && i < 64; i++) {
        keep[i] = torch::empty({1024, 256}, torch::kFloat);  // 1 MiB
    }
    return torch::mul(x, 2.0f);
}
