/*
 * runtime.h -- internal state and helpers of the host runtime
 * (libneuroncustomop.a).  Not a kernel-facing header.
 *
 * One CoreState per linked core object: each core object is a shared
 * object linked with -Bsymbolic and loaded RTLD_LOCAL, so every core has its
 * own copy of these globals, as each core has on the device
 * (ARCHITECTURE.md "Host link").  Everything here has hidden visibility.
 */
#ifndef GPSIMD_RUNTIME_H
#define GPSIMD_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <map>
#include <set>

#include "gpsimd_host/abi.h"
#include "gpsimd_host/faults.h"
#include "gpsimd_host/lsp.h"

#pragma GCC visibility push(hidden)

/* 1: the wrapper's calls before the kernel (customop_setup_tagged,
 * customop_next_*_tagged) are thunks that poison the launcher stack below
 * the wrapper's frame when they return (stack_switch.cpp), x86-64 only. */
#if defined(__x86_64__)
#define GPSIMD_STACK_REFILL 1
#else
#define GPSIMD_STACK_REFILL 0
#endif

namespace gpsimd_rt {

/* First-fit allocator over the offsets [0, size) of a window.  Free blocks
 * are coalesced on release.  `used` counts the bytes handed out (block
 * sizes after rounding), `peak` its maximum since reset(). */
class FirstFit {
 public:
    void reset(uint64_t size);
    /* Offset of a block of nbytes (rounded up to align, a power of two) at
     * that alignment; false when no free block fits. */
    bool allocate(uint64_t nbytes, uint64_t align, uint64_t* offset);
    /* false when offset is not the start of a live block. */
    bool release(uint64_t offset);
    /* The live block holding offset: its start and the bytes asked for it
     * (before rounding); false when offset is in no live block. */
    bool holding(uint64_t offset, uint64_t* start, uint64_t* asked) const;
    uint64_t largest_free(uint64_t align) const;
    /* The end of the free bytes after the live block at offset: the next
     * live block's start, or the window's end. */
    uint64_t free_after(uint64_t offset) const;
    uint64_t size() const { return size_; }
    uint64_t used() const { return used_; }
    uint64_t peak() const { return peak_; }
    /* The end of the highest block handed out since reset(). */
    uint64_t high() const { return high_; }
    size_t live_blocks() const { return live_.size(); }
 private:
    uint64_t size_ = 0;
    uint64_t used_ = 0;
    uint64_t peak_ = 0;
    uint64_t high_ = 0;
    std::map<uint64_t, uint64_t> free_;  /* offset -> size */
    /* offset -> {size after rounding, bytes asked for} */
    std::map<uint64_t, std::pair<uint64_t, uint64_t> > live_;
};

struct CoreState {
    bool bound = false;                 /* gpsimd_bind_core succeeded */
    gpsimd_core_binding binding{};      /* copy of the model's binding */
    gpsimd_core_report* report = nullptr;
    uint32_t epoch = 1;                 /* bumped by every reset */
    FirstFit scratch;                   /* HBM scratch window (LSP) */
    FirstFit tcm;                       /* dataram [0, 16 KiB) */
    FirstFit dataram;                   /* dataram [16 KiB, 64 KiB) */
    std::set<uint64_t> tcm_freed;       /* offsets freed and not reallocated */
    /* The largest request a tcm_malloc of this launch returned null for
     * (0: none) and the pool bytes in use then: a SIGSEGV at an address
     * below it is the kernel dereferencing that null (TCM_NULL fault). */
    uint64_t tcm_null_request = 0;
    uint64_t tcm_null_in_use = 0;
    /* malloc / new blocks start filled with the binding's tcm_poison
     * (GPSIMD_CHECK_POISON_HEAP, set at bind time): every launch reports
     * GPSIMD_REPORT_HEAP_POISONED. */
    bool heap_poisoned = false;
    /* Open stream accessors per storage (host pointer of element 0):
     * {read streams, write streams}, for the coherence check. */
    std::map<const void*, std::pair<int, int> > streams;
    /* Read tracking (abi.h GPSIMD_CHECK_READS): host range of the output
     * region, its element size and the binding's read map (null: off). */
    const unsigned char* out_host = nullptr;
    uint64_t out_size = 0;
    uint32_t out_itemsize = 0;
    uint8_t* read_map = nullptr;
    /* The runtime's own writeback (UTensor::copy) is copying: its
     * neuron_memcpy calls are not the kernel's stores (note_output_write). */
    bool writing_back = false;
};

/* A transfer of nbytes at host pointer p into or out of the dataram window
 * (tensor_to_tcm, tcm_to_tensor, neuron_memcpy) stays inside the live block
 * of tcm_malloc or neuron_dataram_allocate it starts in, or faults (TCM,
 * DATARAM).  A pointer outside the window is a DATARAM fault naming what it
 * points to (dataram_ptr.cpp), unless it lies on the launcher's default
 * stack, which the device keeps in the core's local memory (not followed). */
void check_dataram_span(const void* p, uint64_t nbytes, const char* what);
[[noreturn]] void fault_outside_dataram(const void* p, uint64_t nbytes, const char* what);

/* 0: p is not on the running launch's stack; 1: it is, and that stack is
 * the device's on-core one (stack_size <= the default); 2: it is, and the
 * device keeps that stack in device memory (a larger stack_size)
 * (stack_switch.cpp). */
int stack_place(const void* p);
uint32_t stack_size_of_launch();

/* The last launch's scratch and TCM blocks poisoned in the bound window
 * (device.cpp): at each launch, and before a binding replaces another. */
void poison_released();

/* tcm_malloc's allocator (device.cpp): nbytes of the TCM pool or null;
 * record_null remembers a failure for the TCM_NULL check. */
void* tcm_allocate(size_t nbytes, bool record_null);

/* The kernel's neuron_hbm_allocate without the poison and the
 * REPORT_SCRATCH_USED flag: the runtime's own tensors (torch::empty poisons
 * its storage itself, the other factories fill theirs). */
uint64_t scratch_allocate(size_t nbytes);

/* The kernel's neuron_dataram_allocate without the REPORT_TCM_USED flag:
 * the runtime's own staging (UTensor::copy) fills what it reads. */
int dataram_allocate(uint32_t nbytes, void** ptr, uint32_t alignment);

/* Set up read tracking from the binding (at bind time). */
void setup_read_tracking();

/* The kernel reads [host, host + nbytes) through the runtime: record every
 * element of the output region in that range whose bytes all still hold
 * the binding's poison (never written by this core) in the read map. */
void note_output_read(const void* host, uint64_t nbytes);

/* The kernel writes nbytes from src to [host, host + nbytes) through the
 * runtime (tcm_to_tensor, neuron_memcpy to HBM): an output element that
 * still holds the poison and gets the poison again is one the kernel read
 * (through a raw pointer, which is not followed) and stores back unwritten,
 * a read-modify-write of an element it does not own: record it in the read
 * map as read before written (no computed value is the poison of both
 * private runs). Call it before the copy. */
void note_output_write(const void* host, const void* src, uint64_t nbytes);

/* The kernel got a way to read [host, ...) that the runtime does not see
 * (a standard or stream accessor, a raw pointer): report flag
 * GPSIMD_REPORT_OUTPUT_UNTRACKED when host lies in the output or at its
 * end, in every run (the shared ones, without a read map, too). */
void note_output_untracked(const void* host);

/* The binding's GPSIMD_CHECK_* bits (0 when unbound). */
bool check_enabled(uint32_t check);

/* Set GPSIMD_REPORT_* bits in the report of the running launch. */
void report_flag(uint32_t flag);

/* The model's own diagnostics, which the device does not run: their code
 * goes to a section of its own, and the static stack report (the build's
 * gpsimd_build.objgraph, HOST_ONLY_SECTION) does not charge them to the
 * device stack.  Never inlined, so that their frames stay apart. */
#define GPSIMD_HOST_ONLY __attribute__((noinline, section(".text.gpsimd_host_only")))

/* Append one warning ("<text>\n") to the report (warnings.cpp: kept while
 * it fits GPSIMD_WARNINGS_CAPACITY, always counted). */
GPSIMD_HOST_ONLY void record_warning(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

CoreState& core();

/* The scratch window of this object: from its linker spec. */
uint64_t scratch_origin();
uint64_t scratch_size();

/* Reset every per-launch piece of state: allocators, TCM pool, argument
 * parser, get_dst_tensor flag, printf ring, report. */
void reset_launch_state();

/* Fault recording (fault.cpp). */
void record_fault(uint32_t kind, const char* message);
bool launch_faulted();
void clear_fault();
/* Copy peaks / printf counters into the report. */
void update_report_counters();

/* Landing of gpsimd_fault: set by the launcher while a wrapper runs
 * (stack_switch.cpp).  Returns true and does not return when it jumped. */
bool in_launch();
[[noreturn]] void return_to_launcher();

/* Device address -> host pointer for [addr, addr + nbytes), which must lie
 * inside one HBM region or the scratch window; otherwise a
 * GPSIMD_FAULT_UNMAPPED fault "<what>: ..." (what may be null). */
void* translate_range(uint64_t addr, uint64_t nbytes, const char* what);

/* Shape functions (shape.cpp): whether one is running; end it with a fault
 * (jumps back to gpsimd_shape_call); fault (SHAPE_FUNCTION) when `what`
 * (reading tensor data, a device call) happens inside one. */
bool shape_call_active();
[[noreturn]] void shape_call_fault(uint32_t kind, const char* message);
void forbid_in_shape_call(const char* what);

/* printf ring (printf.cpp). */
void printf_reset();
void printf_append(const char* data, size_t n);

/* Argument parser / output protocol reset (wrapper_api.cpp). */
void marshalling_reset();

/* "a" or "an" before a dtype's name in a message ("an int32 tensor"). */
inline const char* article(const char* dtype) { return dtype[0] == 'i' ? "an" : "a"; }

}  // namespace gpsimd_rt

#pragma GCC visibility pop

#endif  // GPSIMD_RUNTIME_H
