// Deliberately broken SINGLE-CORE kernels that crash or never return: each
// is contained to its own vector (the emulator runs every vector in its own
// process).
#include <stdexcept>
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>

// A store to an address nothing maps (0x10, through a volatile so that the
// compiler cannot see it).
torch::Tensor segfault(const torch::Tensor& x) {
    volatile uintptr_t addr = 0x10;
    *reinterpret_cast<volatile int*>(addr) = 1;
    return torch::mul(x, 2.0f);
}

// abort(): SIGABRT kills the process that runs the vector.
torch::Tensor abort_kernel(const torch::Tensor& x) {
    if (x.numel() > 0) abort();
    return torch::mul(x, 2.0f);
}

// A C++ exception escapes the kernel.
torch::Tensor cxx_exception(const torch::Tensor& x) {
    if (x.numel() > 0) throw std::runtime_error("broken kernel: boom");
    return torch::mul(x, 2.0f);
}

// Never returns: stopped by the vector's time limit (EMU_TIMEOUT).
torch::Tensor infinite_loop(const torch::Tensor& x) {
    volatile int64_t n = x.numel();
    while (n > 0) n = n + 1 - 1;
    return torch::mul(x, 2.0f);
}

// State kept between calls: from the second call on, an input whose first
// element is 1 makes it spin (a call counter gone wrong).
torch::Tensor spin_on_second(const torch::Tensor& x) {
    static int calls = 0;
    auto xa = x.accessor<float, 1>();
    if (++calls > 1 && xa[0] == 1.0f) {
        volatile int spin = 1;
        while (spin) {
        }
    }
    return torch::mul(x, 2.0f);
}
