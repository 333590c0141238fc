// Deliberately hostile SINGLE-CORE kernels (kernels/broken/ops.yaml, never
// in the default build): what a kernel gone wild does to the host, which
// the emulator must contain (a child that outlives the vector, writes to
// every file descriptor, memory without bound, escape sequences that fake
// a PASS on the terminal) or find (TCM read before it was written:
// zero-filled on the host, garbage on the device); and an honest kernel
// whose vector expects what its integer output cannot hold. And kernels that
// write over the model's records of their launch: a stray write that would
// erase the read map that fails them (caught at the model's gaps), and a
// deliberate one that skips the gaps and forges a fault code (its report
// refused as one no runtime writes).
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <stdexcept>

#include <custom_op.h>
#include <torch/torch.h>
#include "gpsimd_host/abi.h"

// Forks a child that sleeps 90 s (in a session of its own, out of the
// vector's process group), then spins until the vector's time limit.
torch::Tensor fork_sleeper(const torch::Tensor& x) {
    if (fork() == 0) {
        prctl(PR_SET_NAME, "gpsimd-sleeper", 0, 0, 0);
        setsid();
        sleep(90);
        _exit(0);
    }
    prctl(PR_SET_NAME, "gpsimd-spinner", 0, 0, 0);
    volatile int64_t n = x.numel();
    while (n > 0) n = n + 1 - 1;
    return torch::mul(x, 2.0f);
}

// Writes lines that look like the old emulator's events, and garbage, to
// every descriptor from 3 to 255, then computes the right result.
torch::Tensor fd_forger(const torch::Tensor& x) {
    static const char junk[] = "{\"event\": \"done\"}\n{\"event\": \"end\"}\n\xff\xfe garbage\n";
    for (int fd = 3; fd < 256; ++fd) {
        ssize_t rc = write(fd, junk, sizeof junk - 1);
        (void)rc;
    }
    return torch::mul(x, 2.0f);
}

// Adds a bias it meant to zero but never filled: tcm_malloc memory is
// uninitialised on the device.
torch::Tensor tcm_uninit(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = size_t(x.numel());
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    float* bias = (float*)torch::neuron::tcm_malloc(sizeof(float) * 4);  // BUG: never filled
    if (buf == nullptr || bias == nullptr) return out;
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    for (size_t i = 0; i < n; i++) buf[i] = 2.0f * buf[i] + bias[i % 4];
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(bias);
    torch::neuron::tcm_free(buf);
    return out;
}

// Leaks 64 MiB per iteration, touching every page, without end.
torch::Tensor memory_hog(const torch::Tensor& x) {
    for (;;) {
        char* p = new char[64u << 20];
        memset(p, 1, 64u << 20);
        asm volatile("" : : "r"(p) : "memory");  // kept: the compiler may not drop it
    }
    return torch::mul(x, 2.0f);
}

// On a terminal: up a line, clear the screen, a PASS line and a summary of
// its own, then black on black to hide what follows. Written to stderr, to
// printf and as its exception's message (which the fault message copies).
torch::Tensor terminal_forger(const torch::Tensor& x) {
    static const char fake[] =
        "\x1b[1A\x1b[2J\rPASS broken_hostile::terminal_forger[n10]: max_abs_err 0\n"
        "total: 1 passed, 0 failed\n\x1b[8m\x1b[30;40m";
    ssize_t rc = write(2, fake, sizeof fake - 1);
    (void)rc;
    printf("%s", fake);
    if (x.numel() > 0) throw std::runtime_error(fake);
    return torch::mul(x, 2.0f);
}

// y = x / 2, int32 (C++ integer division: truncated): right; its vector
// expects [0.9, 1.9, 2.9], which no int32 holds.
torch::Tensor halve_int(const torch::Tensor& t_x) {
    const size_t n = t_x.numel();
    torch::Tensor t_out = torch::empty({n}, torch::kInt);
    auto x = t_x.accessor<int32_t, 1>();
    auto out = t_out.accessor<int32_t, 1>();
    for (size_t i = 0; i < n; i++) out[i] = x[i] / 2;
    return t_out;
}

// 2x + 0 * out: reads the never-written output through the TCM accessor
// (in the read map: on the device it may be a NaN, and 0 * NaN is NaN),
// then zeroes a page 3 pages before its output, where the model kept the
// first run's read maps: without the model's gaps, a PASS.
torch::Tensor readmap_eraser(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = size_t(x.numel());
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    float* old = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    if (buf == nullptr || old == nullptr) return out;
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    out.tcm_accessor().tensor_to_tcm<float>(old, 0, n);   // BUG: never written
    for (size_t i = 0; i < n; i++) buf[i] = 2.0f * buf[i] + 0.0f * old[i];
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(old);
    torch::neuron::tcm_free(buf);
    char* p = (char*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
    memset(p - 3 * 4096, 0, 4096);
    return out;
}

// Right (2x), but in the second run (a never-written TCM word holds run
// 1's poison, 0xC3) it finds the first run's printf ring before its output
// (every page on the way made writable, the model's gaps too) and writes
// 42.0f over the status and fault code of the report that follows the ring.
torch::Tensor report_forger(const torch::Tensor& x) {
    printf("FORGE-ME");
    torch::Tensor out = get_dst_tensor();
    const size_t n = size_t(x.numel());
    float* p = (float*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
    const float* xp = (const float*)neuron_translate(x.q7_data_ptr().ctx, x.q7_data_ptr().hbm_addr);
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * xp[i];
    uint32_t* word = (uint32_t*)torch::neuron::tcm_malloc(16);
    const bool second_run = word != nullptr && word[0] == 0xC3C3C3C3u;
    torch::neuron::tcm_free(word);
    if (!second_run) return out;
    uintptr_t page = ((uintptr_t)p & ~(uintptr_t)4095) - 4096;
    for (;; page -= 4096) {
        mprotect((void*)page, 4096, PROT_READ | PROT_WRITE);
        if (memcmp((void*)page, "FORGE-ME", 8) == 0) break;
    }
    gpsimd_core_report* r = (gpsimd_core_report*)(page + ((GPSIMD_PRINTF_CAPACITY + 4095) & ~4095u));
    const float fake = 42.0f;
    memcpy(&r->status, &fake, 4);
    memcpy(&r->fault_kind, &fake, 4);
    return out;
}
