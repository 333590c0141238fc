/*
 * stack_switch.cpp -- the host form of the stack-switch handoff
 * (the Neuron SDK's build driver, build_custom_op.py; stack_switch.hpp).
 *
 * On the device, switch_stack_or_call_wrapper moves the core onto the
 * kernel's stack (when the default on-core stack is too small) and the
 * wrapper ends with `j switchBack`.  On the host the wrapper ALWAYS runs on
 * a fresh stack (ucontext: getcontext/makecontext/swapcontext):
 *
 *   host stack bytes = stack_size * binding.stack_scale, rounded up to pages;
 *   stack_scale 0 in the binding means 8: x86-64/aarch64 frames of the same
 *   code are several times larger than Xtensa windowed-ABI frames (no
 *   register windows, 16-byte aligned frames, libc calls such as vsnprintf
 *   that the device implements in its own small runtime), so a kernel that
 *   fits its device stack must not overflow the host one.
 *
 * Under GPSIMD_CHECK_POISON_STACK the stack is filled with the binding's
 * tcm_poison before the wrapper starts, so that a local variable the kernel
 * reads before writing holds another value in each checked run (the model
 * compares them; a fresh mapping would hold zeros every time).  The calls
 * the wrapper makes before the kernel (customop_setup, customop_next_*)
 * leave their frames where the kernel's frame will be; on x86-64
 * (GPSIMD_STACK_REFILL) each of them is a thunk that runs its body and then
 * fills the stack below the wrapper's frame again, its own frame included,
 * so the kernel starts on poison only.
 *
 * A 64 KiB PROT_NONE guard sits below the stack.  While a wrapper runs, a
 * SIGSEGV/SIGBUS handler (on a sigaltstack) turns an access to the guard
 * into a GPSIMD_FAULT_STACK_OVERFLOW fault, an access below the size of a
 * request tcm_malloc returned null for (in this launch) into
 * GPSIMD_FAULT_TCM_NULL, a write to the inputs of a multicore op (read-only
 * for its launches under the checks) into GPSIMD_FAULT_MULTICORE, and any
 * other invalid access made on the wrapper
 * stack into GPSIMD_FAULT_SEGV; signals from elsewhere go to
 * the previously installed handler.  A trampoline at the bottom of the
 * wrapper stack catches C++ exceptions (GPSIMD_FAULT_CXX_EXCEPTION,
 * "C++ exception: <what()>").  Every fault returns here through
 * return_to_launcher(), and the launcher returns GPSIMD_STATUS_FAULT.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <exception>

#include "runtime.h"
#include "stack_switch.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* (Linux 5.14; older C libraries do not name it) */
#endif

/* stack_switch.hpp:4 -- true while a wrapper runs on the switched stack. */
bool switched_stack = false;

namespace gpsimd_rt {

static const size_t kGuardBytes = 64 * 1024;
static const uint32_t kDefaultStackScale = 8;

static ucontext_t g_launcher_ctx;
static ucontext_t g_wrapper_ctx;
static bool g_in_launch = false;
static uintptr_t g_wrapper_fn = 0;
static char* g_map = nullptr;       /* guard + stack */
static size_t g_map_bytes = 0;
static uint32_t g_stack_size = 0;   /* device bytes requested */
static uint32_t g_stack_scale = 0;

static struct sigaction g_old_segv, g_old_bus;
static stack_t g_old_altstack;
static bool g_handlers_installed = false;
static char g_altstack[64 * 1024] __attribute__((aligned(16)));

bool in_launch() { return g_in_launch; }

/* Where the device keeps the launcher's stack: a stack_size up to the
 * default (GPSIMD_DEFAULT_STACK_SIZE) is the core's own fast local memory
 * (switch_stack_or_call_wrapper just calls the wrapper); a larger one is
 * moved into slower device memory (the public guide's -DSTACK_SIZE). */
int stack_place(const void* p) {
    if (!g_in_launch || !g_map) return 0;
    const char* c = static_cast<const char*>(p);
    if (c < g_map + kGuardBytes || c >= g_map + g_map_bytes) return 0;
    return g_stack_size <= GPSIMD_DEFAULT_STACK_SIZE ? 1 : 2;
}

uint32_t stack_size_of_launch() { return g_stack_size; }

}  // namespace gpsimd_rt

/* The poisoned launcher stack [lo, hi) of the running launch and its byte
 * (lo 0: not poisoned), read by gpsimd_rt_refill_return. */
extern "C" {
__attribute__((visibility("hidden"))) uintptr_t gpsimd_rt_refill_lo = 0;
__attribute__((visibility("hidden"))) uintptr_t gpsimd_rt_refill_hi = 0;
__attribute__((visibility("hidden"))) unsigned char gpsimd_rt_refill_byte = 0;
}

#if GPSIMD_STACK_REFILL
/* Jumped to by a thunk after its body returned, with %rsp at the return
 * address into the wrapper: fills [lo, %rsp) when %rsp lies in [lo, hi)
 * (rep stosb; %rax, %rdx and %xmm0 keep the body's result) and returns. */
__asm__(".text\n.p2align 4\n.hidden gpsimd_rt_refill_return\n"
        ".type gpsimd_rt_refill_return, @function\n"
        "gpsimd_rt_refill_return:\n"
        "\tmovq gpsimd_rt_refill_lo(%rip), %rdi\n"
        "\ttestq %rdi, %rdi\n\tjz 1f\n"
        "\tcmpq %rdi, %rsp\n\tjbe 1f\n"
        "\tcmpq gpsimd_rt_refill_hi(%rip), %rsp\n\tjae 1f\n"
        "\tmovq %rax, %r8\n"
        "\tmovq %rsp, %rcx\n\tsubq %rdi, %rcx\n"
        "\tmovzbl gpsimd_rt_refill_byte(%rip), %eax\n"
        "\trep stosb\n"
        "\tmovq %r8, %rax\n"
        "1:\tret\n"
        ".size gpsimd_rt_refill_return, .-gpsimd_rt_refill_return\n");

/* The public entry `mangled` (wrapper_api.h, C++ linkage): calls `body`
 * (wrapper_api.cpp, same arguments in the same registers; %rsp kept
 * 16-byte aligned) and jumps to gpsimd_rt_refill_return. Its call frame
 * information lets a C++ exception the body throws unwind through it to
 * the launcher, as it did before the thunk. */
#define GPSIMD_REFILL_THUNK(mangled, body)                                              \
    __asm__(".text\n.p2align 4\n.globl " mangled "\n.type " mangled ", @function\n"   \
            mangled ":\n\t.cfi_startproc\n\tsubq $8, %rsp\n\t.cfi_adjust_cfa_offset 8\n" \
            "\tcall " body "@PLT\n\taddq $8, %rsp\n\t.cfi_adjust_cfa_offset -8\n"        \
            "\tjmp gpsimd_rt_refill_return\n\t.cfi_endproc\n"                            \
            ".size " mangled ", .-" mangled "\n")
GPSIMD_REFILL_THUNK("_Z21customop_setup_taggedbj", "gpsimd_rt_customop_setup_tagged");
GPSIMD_REFILL_THUNK("_Z27customop_next_tensor_taggedj", "gpsimd_rt_customop_next_tensor_tagged");
GPSIMD_REFILL_THUNK("_Z27customop_next_scalar_taggedj", "gpsimd_rt_customop_next_scalar_tagged");
GPSIMD_REFILL_THUNK("_Z24customop_next_int_taggedj", "gpsimd_rt_customop_next_int_tagged");
GPSIMD_REFILL_THUNK("_Z29customop_next_longlong_taggedj", "gpsimd_rt_customop_next_longlong_tagged");
GPSIMD_REFILL_THUNK("_Z26customop_next_float_taggedj", "gpsimd_rt_customop_next_float_tagged");
#endif

namespace gpsimd_rt {

void return_to_launcher() {
    setcontext(&g_launcher_ctx);
    abort();  /* setcontext only returns on error */
}

/* The stack pointer of the interrupted context, or 0 if unknown. */
static uintptr_t interrupted_sp(void* uctx) {
    ucontext_t* uc = static_cast<ucontext_t*>(uctx);
#if defined(__x86_64__)
    return uintptr_t(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
    return uintptr_t(uc->uc_mcontext.sp);
#else
    (void)uc;
    return 0;
#endif
}

static void chain_signal(int sig, siginfo_t* si, void* uctx) {
    struct sigaction* old = (sig == SIGSEGV) ? &g_old_segv : &g_old_bus;
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) old->sa_sigaction(sig, si, uctx);
        return;
    }
    if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        /* re-executing the access now takes the default action */
        signal(sig, SIG_DFL);
        return;
    }
    old->sa_handler(sig);
}

/* The read-only regions (the inputs) of a multicore core under
 * GPSIMD_CHECK_MULTICORE: made PROT_READ at the start of each launch
 * (set_inputs_readonly), so that a write to an input, by any means, faults at
 * once (a write restored before the run ends leaves no trace in the inputs'
 * bytes). On the device the other cores read the inputs meanwhile. They stay
 * read-only after the launch, to the end of the process: nothing of the
 * host's writes an input while the cores run (the vector's processes are
 * made for it, and its inputs are written before), and the next launch of
 * the run's cores in this process then finds them so (an mprotect that
 * changes nothing splits no mapping: two of those a launch, not four that
 * split and merge the image's mapping). A single-core op may write its input
 * and restore it: no one else reads it while it runs. */
static bool inputs_readonly() {
    const CoreState& c = core();
    return c.binding.core_count > 1 && check_enabled(GPSIMD_CHECK_MULTICORE);
}

static void set_inputs_readonly() {
    const CoreState& c = core();
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        if (!(r.flags & GPSIMD_REGION_READONLY) || !r.size || r.host % page) continue;
        mprotect(reinterpret_cast<void*>(uintptr_t(r.host)), (r.size + page - 1) / page * page,
                 PROT_READ);
    }
}

/* The read-only region (an input arena) holding `addr`, or null. */
static const gpsimd_region* readonly_region(const char* addr) {
    const CoreState& c = core();
    const uintptr_t a = uintptr_t(addr), page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        if ((r.flags & GPSIMD_REGION_READONLY) && a >= r.host
                && a < r.host + (r.size + page - 1) / page * page)
            return &r;
    }
    return nullptr;
}

/* " (N bytes before the output)": where addr is from the nearest of the
 * core's tensors and windows in the image (the binding's regions, its
 * scratch window and dataram), within the 2 GiB around them (the model's
 * gaps, PROT_NONE, sit between them and the model's records; the one after
 * the outputs is 1 GiB, gpsimd_emu.memory.OUTPUT_GAP_BYTES); "" else. */
static void describe_near(char* out, size_t cap, uintptr_t addr) {
    const gpsimd_core_binding& b = core().binding;
    struct { uintptr_t lo, hi; const char* name; } areas[GPSIMD_MAX_REGIONS + 2];
    int n = 0;
    for (uint32_t i = 0; i < b.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = b.regions[i];
        const char* name = (r.flags & GPSIMD_REGION_OUTPUT) ? "the output"
                           : r.device_addr >= b.sbuf_window_base ? "the SBUF inputs" : "the HBM inputs";
        areas[n++] = {uintptr_t(r.host), uintptr_t(r.host + r.size), name};
    }
    areas[n++] = {uintptr_t(b.scratch_host), uintptr_t(b.scratch_host + scratch_size()), "the scratch window"};
    areas[n++] = {uintptr_t(b.dataram_host), uintptr_t(b.dataram_host + GPSIMD_DATARAM_SIZE), "the dataram"};
    uintptr_t best = uintptr_t(1) << 31;
    out[0] = 0;
    for (int i = 0; i < n; ++i) {
        if (!areas[i].lo || areas[i].hi <= areas[i].lo) continue;
        if (addr < areas[i].lo && areas[i].lo - addr <= best) {
            best = areas[i].lo - addr;
            snprintf(out, cap, " (%llu bytes before %s)", (unsigned long long)best, areas[i].name);
        } else if (addr >= areas[i].hi && addr - areas[i].hi < best) {
            best = addr - areas[i].hi;
            snprintf(out, cap, " (%llu bytes past the end of %s)", (unsigned long long)best, areas[i].name);
        }
    }
}

static void memory_fault_handler(int sig, siginfo_t* si, void* uctx) {
    char* addr = static_cast<char*>(si->si_addr);
    const uintptr_t sp = interrupted_sp(uctx);
    const uintptr_t lo = uintptr_t(g_map), hi = uintptr_t(g_map) + g_map_bytes;
    const bool on_wrapper_stack = g_in_launch && sp >= lo && sp <= hi;
    if (g_in_launch && on_wrapper_stack) {
        char msg[512];
        if ((addr >= g_map && addr < g_map + kGuardBytes) || (sp >= lo && sp < lo + kGuardBytes)) {
            snprintf(msg, sizeof msg,
                     "stack overflow: the wrapper's stack of %u bytes (host: %zu bytes = %u x stack_scale %u,"
                     " page-rounded) is exhausted; raise STACK_SIZE (-DSTACK_SIZE=N)",
                     g_stack_size, g_map_bytes - kGuardBytes, g_stack_size, g_stack_scale);
            record_fault(GPSIMD_FAULT_STACK_OVERFLOW, msg);
        } else if (core().tcm_null_request &&
                   uintptr_t(addr) < (core().tcm_null_request + 4095) / 4096 * 4096) {
            /* within the (page-rounded) size of a request tcm_malloc
             * returned null for in this launch: the kernel used that null */
            const CoreState& c = core();
            snprintf(msg, sizeof msg,
                     "null TCM pointer dereferenced: %s at address 0x%llx, within the %llu bytes of a tcm_malloc "
                     "that returned null (the %u-byte TCM pool had %llu bytes in use); check tcm_malloc's result",
                     sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", (unsigned long long)(uintptr_t)addr,
                     (unsigned long long)c.tcm_null_request,
                     GPSIMD_TCM_POOL_SIZE, (unsigned long long)c.tcm_null_in_use);
            record_fault(GPSIMD_FAULT_TCM_NULL, msg);
        } else if (const gpsimd_region* r = inputs_readonly() ? readonly_region(addr) : nullptr) {
            /* (the model names the input at this device address: judge.py) */
            snprintf(msg, sizeof msg,
                     "a write to the input at device address 0x%llx: in a multicore op every core "
                     "reads the inputs while the others run, so a core that writes one, even to "
                     "restore it, races with their reads (docs/kernel-api.md \"Multicore (SPMD) "
                     "libraries\")",
                     (unsigned long long)(r->device_addr + (uintptr_t(addr) - r->host)));
            record_fault(GPSIMD_FAULT_MULTICORE, msg);
        } else {
            char near[128];
            describe_near(near, sizeof near, uintptr_t(addr));
            snprintf(msg, sizeof msg, "%s: invalid memory access at address %p%s",
                     sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", (void*)addr, near);
            record_fault(GPSIMD_FAULT_SEGV, msg);
        }
        return_to_launcher();
    }
    chain_signal(sig, si, uctx);
}

static void install_handlers() {
    stack_t ss;
    ss.ss_sp = g_altstack;
    ss.ss_size = sizeof g_altstack;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, &g_old_altstack) != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = memory_fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
    g_handlers_installed = true;
}

static void uninstall_handlers() {
    if (!g_handlers_installed) return;
    sigaction(SIGSEGV, &g_old_segv, nullptr);
    sigaction(SIGBUS, &g_old_bus, nullptr);
    sigaltstack(&g_old_altstack, nullptr);
    g_handlers_installed = false;
}

/* Bottom frame of the wrapper stack: runs the wrapper, turns an escaping C++
 * exception into a fault, and returns to the launcher if the wrapper
 * returns without switchBack(). */
static void trampoline() {
    static char what[1024];
    bool caught = false;
    try {
        reinterpret_cast<void (*)()>(g_wrapper_fn)();
    } catch (const std::exception& e) {
        snprintf(what, sizeof what, "%s", e.what());
        caught = true;
    } catch (...) {
        snprintf(what, sizeof what, "%s", "unknown exception (not derived from std::exception)");
        caught = true;
    }
    if (caught) gpsimd_fault(GPSIMD_FAULT_CXX_EXCEPTION, "C++ exception: %s", what);
    return_to_launcher();
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

/* stack_switch.hpp:20 / the Neuron SDK's build driver, build_custom_op.py: the launcher body. */
int switch_stack_or_call_wrapper(uintptr_t wrapper_fn_ptr, uint32_t stack_size) {
    CoreState& c = core();
    if (g_in_launch)
        gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "switch_stack_or_call_wrapper: a launch is already running");
    if (!c.bound) {
        /* bind failed or never happened: the report (if any) says why */
        if (c.report && c.report->status != GPSIMD_STATUS_FAULT) {
            clear_fault();
            record_fault(GPSIMD_FAULT_BINDING, "launch on a core that is not bound (call gpsimd_bind_core first)");
        }
        return GPSIMD_STATUS_FAULT;
    }
    reset_launch_state();

    g_stack_size = stack_size ? stack_size : GPSIMD_DEFAULT_STACK_SIZE;
    g_stack_scale = c.binding.stack_scale ? c.binding.stack_scale : kDefaultStackScale;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t bytes = size_t(g_stack_size) * g_stack_scale;
    bytes = (bytes + page - 1) / page * page;
    g_map_bytes = kGuardBytes + bytes;
    void* map = mmap(nullptr, g_map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        char msg[128];
        snprintf(msg, sizeof msg, "cannot map a wrapper stack of %zu bytes", g_map_bytes);
        record_fault(GPSIMD_FAULT_INTERNAL, msg);
        return GPSIMD_STATUS_FAULT;
    }
    g_map = static_cast<char*>(map);
    mprotect(g_map, kGuardBytes, PROT_NONE);
    if (check_enabled(GPSIMD_CHECK_POISON_STACK)) {
        /* a local variable read before it is written holds the run's byte
         * (a fresh mapping would give zeros in every run); its pages made
         * in one call, not a fault each (a kernel without it: the memset
         * faults them in) */
        madvise(g_map + kGuardBytes, bytes, MADV_POPULATE_WRITE);
        memset(g_map + kGuardBytes, c.binding.tcm_poison, bytes);
        gpsimd_rt_refill_lo = uintptr_t(g_map + kGuardBytes);
        gpsimd_rt_refill_hi = uintptr_t(g_map + g_map_bytes);
        gpsimd_rt_refill_byte = c.binding.tcm_poison;
        report_flag(GPSIMD_REPORT_STACK_POISONED);
    }

    getcontext(&g_wrapper_ctx);
    g_wrapper_ctx.uc_stack.ss_sp = g_map + kGuardBytes;
    g_wrapper_ctx.uc_stack.ss_size = bytes;
    g_wrapper_ctx.uc_link = &g_launcher_ctx;
    makecontext(&g_wrapper_ctx, trampoline, 0);

    install_handlers();
    if (inputs_readonly()) set_inputs_readonly();
    g_wrapper_fn = wrapper_fn_ptr;
    switched_stack = true;
    g_in_launch = true;
    swapcontext(&g_launcher_ctx, &g_wrapper_ctx);
    /* back from switchBack(), a fault, or the trampoline */
    g_in_launch = false;
    switched_stack = false;
    gpsimd_rt_refill_lo = gpsimd_rt_refill_hi = 0;
    uninstall_handlers();
    munmap(g_map, g_map_bytes);
    g_map = nullptr;

    update_report_counters();
    if (launch_faulted()) return GPSIMD_STATUS_FAULT;
    if (c.report) {
        c.report->status = GPSIMD_STATUS_OK;
        c.report->fault_kind = GPSIMD_FAULT_NONE;
    }
    return GPSIMD_STATUS_OK;
}

/* stack_switch.hpp / the Neuron SDK's build driver, build_custom_op.py(i): leave the switched stack. */
void switchBack() {
    if (!g_in_launch) gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "switchBack() outside a launch");
    return_to_launcher();
}
