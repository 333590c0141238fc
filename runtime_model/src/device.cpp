/*
 * device.cpp -- the core's memories and the runtime device calls of
 * custom_op.h: address translation (neuron_translate), the HBM scratch
 * window (neuron_hbm_allocate), the dataram window split into the TCM pool
 * (torch::neuron::tcm_malloc/tcm_free) and the staging area
 * (neuron_dataram_*), neuron_memcpy, and get_cpu_id/get_cpu_count.  What
 * the kernel allocates (scratch, TCM, staging) starts poisoned under the
 * checks (the binding's tcm_poison).
 *
 * Memory map (docs/kernel-api.md "Limits", abi.h):
 *   dataram window [0x80000, 0x90000), 64 KiB, host backing binding.dataram_host:
 *     [0, 16 KiB)   TCM pool      (docs/kernel-api.md: "16 KB per core")
 *     [16, 64 KiB)  dataram staging for neuron_dataram_allocate (the writeback's too)
 *   scratch window: origin/size from this object's LSP (the Neuron SDK's build driver, build_custom_op.py),
 *     host backing binding.scratch_host.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <string.h>

#include "custom_op.h"
#include "neuron/neuron-utils.hpp"
#include "runtime.h"
#include "torch/torch.h"

namespace gpsimd_rt {

/* ---- FirstFit ----------------------------------------------------------- */

void FirstFit::reset(uint64_t size) {
    size_ = size;
    used_ = 0;
    peak_ = 0;
    high_ = 0;
    free_.clear();
    live_.clear();
    if (size) free_[0] = size;
}

static uint64_t round_up(uint64_t v, uint64_t align) { return (v + align - 1) & ~(align - 1); }

bool FirstFit::allocate(uint64_t nbytes, uint64_t align, uint64_t* offset) {
    if (align == 0) align = 1;
    const uint64_t want = round_up(nbytes ? nbytes : 1, align);
    for (std::map<uint64_t, uint64_t>::iterator it = free_.begin(); it != free_.end(); ++it) {
        const uint64_t start = round_up(it->first, align);
        const uint64_t end = it->first + it->second;
        if (start >= end || end - start < want) continue;
        const uint64_t blk = it->first, blk_size = it->second;
        free_.erase(it);
        if (start > blk) free_[blk] = start - blk;                     /* alignment gap */
        if (start + want < blk + blk_size) free_[start + want] = blk + blk_size - (start + want);
        live_[start] = std::make_pair(want, nbytes);
        used_ += want;
        if (used_ > peak_) peak_ = used_;
        if (start + want > high_) high_ = start + want;
        *offset = start;
        return true;
    }
    return false;
}

bool FirstFit::release(uint64_t offset) {
    std::map<uint64_t, std::pair<uint64_t, uint64_t> >::iterator it = live_.find(offset);
    if (it == live_.end()) return false;
    uint64_t start = it->first, len = it->second.first;
    used_ -= len;
    live_.erase(it);
    /* coalesce with the following and the preceding free block */
    std::map<uint64_t, uint64_t>::iterator next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + len) {
        len += next->second;
        free_.erase(next);
    }
    std::map<uint64_t, uint64_t>::iterator after = free_.lower_bound(start);
    if (after != free_.begin()) {
        std::map<uint64_t, uint64_t>::iterator prev = after;
        --prev;
        if (prev->first + prev->second == start) {
            prev->second += len;
            return true;
        }
    }
    free_[start] = len;
    return true;
}

bool FirstFit::holding(uint64_t offset, uint64_t* start, uint64_t* asked) const {
    std::map<uint64_t, std::pair<uint64_t, uint64_t> >::const_iterator it = live_.upper_bound(offset);
    if (it == live_.begin()) return false;
    --it;
    if (offset >= it->first + it->second.first) return false;
    *start = it->first;
    *asked = it->second.second;
    return true;
}

uint64_t FirstFit::largest_free(uint64_t align) const {
    if (align == 0) align = 1;
    uint64_t best = 0;
    for (std::map<uint64_t, uint64_t>::const_iterator it = free_.begin(); it != free_.end(); ++it) {
        const uint64_t start = round_up(it->first, align);
        const uint64_t end = it->first + it->second;
        if (start < end && end - start > best) best = end - start;
    }
    return best & ~(align - 1);
}

uint64_t FirstFit::free_after(uint64_t offset) const {
    std::map<uint64_t, std::pair<uint64_t, uint64_t> >::const_iterator it = live_.upper_bound(offset);
    return it == live_.end() ? size_ : it->first;
}

/* ---- the core --------------------------------------------------------- */

/* Never destroyed: a kernel's static at::Tensor may be released during
 * dlclose, after this object's static destructors would have run. */
CoreState& core() {
    static CoreState* state = new CoreState();
    return *state;
}

uint64_t scratch_origin() { return gpsimd_linker_spec.scratch_origin; }
uint64_t scratch_size() { return gpsimd_linker_spec.scratch_size; }

static char* dataram_host();

/* custom_op.h: every block of a launch is released at the next. What the
 * last launch handed out (scratch, TCM) goes back poisoned in the window of
 * the current binding, so that a block a kernel keeps for its next call (a
 * pointer in a static) reads poison, as the next launch's own blocks would
 * overwrite it on the device. */
void poison_released() {
    CoreState& c = core();
    if (c.bound && c.scratch.high() && check_enabled(GPSIMD_CHECK_POISON_SCRATCH))
        memset(translate_range(scratch_origin(), c.scratch.high(), "the scratch window"),
               c.binding.tcm_poison, c.scratch.high());
    if (c.bound && c.tcm.high() && check_enabled(GPSIMD_CHECK_POISON_TCM))
        memset(dataram_host(), c.binding.tcm_poison, c.tcm.high());
}

void reset_launch_state() {
    CoreState& c = core();
    ++c.epoch;
    poison_released();
    c.scratch.reset(scratch_size());
    c.tcm.reset(GPSIMD_TCM_POOL_SIZE);
    c.dataram.reset(GPSIMD_DATARAM_SIZE - GPSIMD_TCM_POOL_SIZE);
    c.tcm_freed.clear();
    c.tcm_null_request = c.tcm_null_in_use = 0;
    c.streams.clear();
    marshalling_reset();
    printf_reset();
    clear_fault();
    if (c.report) {
        gpsimd_core_report* r = c.report;
        r->status = GPSIMD_STATUS_OK;
        r->fault_kind = GPSIMD_FAULT_NONE;
        r->printf_total = r->printf_len = r->printf_head = 0;
        r->tcm_peak = r->scratch_peak = r->dataram_peak = 0;
        r->message[0] = '\0';
        r->flags = c.heap_poisoned ? GPSIMD_REPORT_HEAP_POISONED : 0;
        r->warning_count = 0;
        r->warnings[0] = '\0';
    }
}

void* translate_range(uint64_t addr, uint64_t nbytes, const char* what) {
    CoreState& c = core();
    const char* w = what ? what : "neuron_translate";
    if (!c.bound) gpsimd_fault(GPSIMD_FAULT_BINDING, "%s: the core is not bound", w);
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        if (addr >= r.device_addr && addr - r.device_addr < r.size) {
            if (nbytes > r.size - (addr - r.device_addr))
                gpsimd_fault(GPSIMD_FAULT_UNMAPPED,
                             "%s: [0x%llx, 0x%llx) runs past the end of HBM region [0x%llx, 0x%llx)", w,
                             (unsigned long long)addr, (unsigned long long)(addr + nbytes),
                             (unsigned long long)r.device_addr,
                             (unsigned long long)(r.device_addr + r.size));
            return reinterpret_cast<char*>(static_cast<uintptr_t>(r.host)) + (addr - r.device_addr);
        }
    }
    const uint64_t org = scratch_origin(), size = scratch_size();
    if (addr >= org && addr - org < size) {
        if (nbytes > size - (addr - org))
            gpsimd_fault(GPSIMD_FAULT_UNMAPPED,
                         "%s: [0x%llx, 0x%llx) runs past the end of the scratch window [0x%llx, 0x%llx)",
                         w, (unsigned long long)addr, (unsigned long long)(addr + nbytes),
                         (unsigned long long)org, (unsigned long long)(org + size));
        return reinterpret_cast<char*>(static_cast<uintptr_t>(c.binding.scratch_host)) + (addr - org);
    }
    /* a zero-byte range at the very end of a region is fine */
    if (nbytes == 0) {
        for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
            const gpsimd_region& r = c.binding.regions[i];
            if (addr == r.device_addr + r.size)
                return reinterpret_cast<char*>(static_cast<uintptr_t>(r.host)) + r.size;
        }
    }
    gpsimd_fault(GPSIMD_FAULT_UNMAPPED, "%s: device address 0x%llx is not mapped", w,
                 (unsigned long long)addr);
}

/* Uninitialised TCM is found by running twice with two poisons (the model
 * compares the outputs): what tcm_malloc and neuron_dataram_allocate hand
 * the kernel starts poisoned, and the free bytes after it up to the next
 * live block or the pool's end too, so that a read past the block (s[n] of
 * a stencil) is poison, not a zero the reference's padding may expect
 * (only the pages a kernel uses are touched). off: the block's offset in
 * pool. */
static void poison_block(void* p, const FirstFit& pool, uint64_t off) {
    if (check_enabled(GPSIMD_CHECK_POISON_TCM))
        memset(p, core().binding.tcm_poison, pool.free_after(off) - off);
}

static char* dataram_host() {
    return reinterpret_cast<char*>(static_cast<uintptr_t>(core().binding.dataram_host));
}

/* On the device a transfer past its TCM buffer overwrites the pool's next
 * block, or the stream reservations and the staging after it. */
void check_dataram_span(const void* host, uint64_t nbytes, const char* what) {
    const char* p = static_cast<const char*>(host);
    const char* base = dataram_host();
    if (!nbytes || !p) return;   /* (null: a failed tcm_malloc, reported as TCM_NULL where used) */
    if (p < base || p >= base + GPSIMD_DATARAM_SIZE) {
        if (stack_place(p) == 1) return;   /* the on-core stack: local memory (docs/kernel-api.md) */
        fault_outside_dataram(p, nbytes, what);
    }
    const uint64_t off = uint64_t(p - base);
    const bool pool = off < GPSIMD_TCM_POOL_SIZE;
    const uint64_t origin = pool ? 0 : GPSIMD_TCM_POOL_SIZE;
    const int kind = pool ? GPSIMD_FAULT_TCM : GPSIMD_FAULT_DATARAM;
    const char* from = pool ? "tcm_malloc" : "neuron_dataram_allocate";
    uint64_t start = 0, asked = 0;
    if (!(pool ? core().tcm : core().dataram).holding(off - origin, &start, &asked))
        gpsimd_fault(kind, "%s of %llu bytes at 0x%llx: no live block of %s holds that address (freed?)", what,
                     (unsigned long long)nbytes, (unsigned long long)(GPSIMD_DATARAM_BASE + off), from);
    const uint64_t end = off - origin + nbytes;
    if (end > start + asked)
        gpsimd_fault(kind, "%s of %llu bytes at 0x%llx runs %llu bytes past the end of its %llu-byte %s block at 0x%llx",
                     what, (unsigned long long)nbytes, (unsigned long long)(GPSIMD_DATARAM_BASE + off),
                     (unsigned long long)(end - start - asked), (unsigned long long)asked, from,
                     (unsigned long long)(GPSIMD_DATARAM_BASE + origin + start));
}

static void require_bound(const char* what) {
    forbid_in_shape_call(what);
    if (!core().bound) gpsimd_fault(GPSIMD_FAULT_BINDING, "%s: the core is not bound", what);
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

/* ---- custom_op.h ----------------------------------------------------------- */

/* The context every neuron_translate takes (ARCHITECTURE.md
 * "The device's marshalling"). */
void* neuron_translate_ctx() { return &core(); }

/* the device ABI (gpsimd_host/abi.h) (_Z16neuron_translatePvy). */
void* neuron_translate(void* ctx, unsigned long long hbm_addr) {
    if (ctx != &core())
        gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "neuron_translate: ctx %p is not neuron_translate_ctx()", ctx);
    void* host = translate_range(hbm_addr, 0, "neuron_translate");
    note_output_untracked(host);
    const CoreState& c = core();
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        if ((r.flags & GPSIMD_REGION_READONLY) && hbm_addr >= r.device_addr &&
            hbm_addr - r.device_addr < r.size)
            report_flag(GPSIMD_REPORT_INPUT_RAW);
    }
    return host;
}

namespace gpsimd_rt {
/* A block of the scratch window (device address); faults when it is full. */
uint64_t scratch_allocate(size_t nbytes) {
    require_bound("neuron_hbm_allocate");
    CoreState& c = core();
    uint64_t off = 0;
    if (!c.scratch.allocate(nbytes, 64, &off))
        gpsimd_fault(GPSIMD_FAULT_SCRATCH_FULL,
                     "scratch window full: cannot allocate %zu bytes in %s [0x%llx, 0x%llx) "
                     "(%llu bytes, %llu in use, largest free block %llu)",
                     nbytes, gpsimd_linker_spec.name, (unsigned long long)scratch_origin(),
                     (unsigned long long)(scratch_origin() + scratch_size()),
                     (unsigned long long)scratch_size(), (unsigned long long)c.scratch.used(),
                     (unsigned long long)c.scratch.largest_free(64));
    return scratch_origin() + off;
}
}  // namespace gpsimd_rt

/* docs/kernel-api.md "Limits" (per-core scratch window); custom_op.h: HBM
 * the kernel may read before filling (poisoned under the checks, like TCM). */
uint64_t neuron_hbm_allocate(size_t nbytes) {
    const uint64_t addr = scratch_allocate(nbytes);
    if (nbytes && check_enabled(GPSIMD_CHECK_POISON_SCRATCH))
        memset(translate_range(addr, nbytes, "neuron_hbm_allocate"), core().binding.tcm_poison, nbytes);
    report_flag(GPSIMD_REPORT_SCRATCH_USED);
    return addr;
}

namespace gpsimd_rt {
int dataram_allocate(uint32_t nbytes, void** ptr, uint32_t alignment) {
    require_bound("neuron_dataram_allocate");
    if (alignment == 0) alignment = 4;
    if (alignment & (alignment - 1))
        gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "neuron_dataram_allocate: alignment %u is not a power of two",
                     alignment);
    uint64_t off = 0;
    if (!core().dataram.allocate(nbytes, alignment, &off)) {
        *ptr = nullptr;
        return -1;
    }
    *ptr = dataram_host() + GPSIMD_TCM_POOL_SIZE + off;
    return 0;
}
}  // namespace gpsimd_rt

/* the device ABI (gpsimd_host/abi.h) (neuron_dataram_allocate(want, &stage, align)):
 * staging the kernel may read before filling (poisoned under the checks). */
int neuron_dataram_allocate(uint32_t nbytes, void** ptr, uint32_t alignment) {
    const int rc = dataram_allocate(nbytes, ptr, alignment);
    if (rc == 0) {
        poison_block(*ptr, core().dataram,
                     uint64_t(static_cast<char*>(*ptr) - dataram_host() - GPSIMD_TCM_POOL_SIZE));
        report_flag(GPSIMD_REPORT_TCM_USED);
    }
    return rc;
}

/* the device ABI (gpsimd_host/abi.h) (neuron_dataram_deallocate(stage)). */
int neuron_dataram_deallocate(void* ptr) {
    require_bound("neuron_dataram_deallocate");
    char* base = dataram_host() + GPSIMD_TCM_POOL_SIZE;
    char* p = static_cast<char*>(ptr);
    if (p < base || p >= dataram_host() + GPSIMD_DATARAM_SIZE ||
        !core().dataram.release(uint64_t(p - base)))
        gpsimd_fault(GPSIMD_FAULT_DATARAM,
                     "neuron_dataram_deallocate(%p): not a block from neuron_dataram_allocate", ptr);
    return 0;
}

/* the device ABI (gpsimd_host/abi.h) (neuron_dataram_max_free_space(&bytes, ...)). */
int neuron_dataram_max_free_space(uint32_t* nbytes, uint32_t alignment) {
    require_bound("neuron_dataram_max_free_space");
    *nbytes = uint32_t(core().dataram.largest_free(alignment ? alignment : 4));
    return 0;
}

/* the device ABI (gpsimd_host/abi.h): HBM -> dataram. */
int neuron_memcpy(void* dataram_dst, uint64_t hbm_src, size_t nbytes) {
    const void* src = translate_range(hbm_src, nbytes, "neuron_memcpy (HBM source)");
    check_dataram_span(dataram_dst, nbytes, "neuron_memcpy (dataram destination)");
    note_output_read(src, nbytes);
    if (nbytes) memmove(dataram_dst, src, nbytes);
    return 0;
}

/* the device ABI (gpsimd_host/abi.h): dataram -> HBM. */
int neuron_memcpy(uint64_t hbm_dst, const void* dataram_src, size_t nbytes) {
    void* dst = translate_range(hbm_dst, nbytes, "neuron_memcpy (HBM destination)");
    check_dataram_span(dataram_src, nbytes, "neuron_memcpy (dataram source)");
    note_output_write(dst, dataram_src, nbytes);
    if (nbytes) memmove(dst, dataram_src, nbytes);
    return 0;
}

/* ---- neuron-utils.hpp --------------------------------------------------- */

/* docs/kernel-api.md "Headers": 0 .. count-1. */
uint32_t get_cpu_id() {
    require_bound("get_cpu_id");
    return core().binding.core_id;
}

/* docs/kernel-api.md: 8 multicore, 1 single-core. */
uint32_t get_cpu_count() {
    require_bound("get_cpu_count");
    return core().binding.core_count;
}

/* ---- torch::neuron TCM pool ------------------------------------------------ */

namespace gpsimd_rt {
/* A block of the TCM pool, or null when it cannot fit nbytes.  A kernel's
 * tcm_malloc remembers the failure (record_null); a stream accessor's 4 KiB
 * reservation does not (the stream works without it, only slower). */
void* tcm_allocate(size_t nbytes, bool record_null) {
    CoreState& c = core();
    uint64_t off = 0;
    if (nbytes > GPSIMD_TCM_POOL_SIZE || !c.tcm.allocate(nbytes, 16, &off)) {
        if (!record_null) return nullptr;
        /* not an error by itself; remembered so that a dereference of this
         * null is reported as such (stack_switch.cpp, TCM_NULL) */
        if (nbytes > c.tcm_null_request) {
            c.tcm_null_request = nbytes;
            c.tcm_null_in_use = c.tcm.used();
        }
        report_flag(GPSIMD_REPORT_TCM_NULL);
        return nullptr;
    }
    c.tcm_freed.erase(off);
    return dataram_host() + off;
}
}  // namespace gpsimd_rt

namespace torch {
namespace neuron {

/* docs/kernel-api.md "Accessors and memory": null when the 16 KiB pool is exhausted. */
void* tcm_malloc(size_t nbytes) {
    require_bound("tcm_malloc");
    void* p = tcm_allocate(nbytes, true);
    if (p) {
        poison_block(p, core().tcm, uint64_t(static_cast<char*>(p) - dataram_host()));
        report_flag(GPSIMD_REPORT_TCM_USED);
    }
    return p;
}

/* docs/kernel-api.md: tcm_free of a pointer not from tcm_malloc is undefined on
 * the device; the host model faults on it and on a double free (named by
 * its device address in the dataram window, 0x80000 + pool offset). */
void tcm_free(void* ptr) {
    require_bound("tcm_free");
    CoreState& c = core();
    char* p = static_cast<char*>(ptr);
    char* base = dataram_host();
    if (p >= base && p < base + GPSIMD_TCM_POOL_SIZE) {
        const uint64_t off = uint64_t(p - base);
        if (c.tcm.release(off)) {
            c.tcm_freed.insert(off);
            return;
        }
        if (c.tcm_freed.count(off))
            gpsimd_fault(GPSIMD_FAULT_TCM, "tcm_free(0x%llx): double free (TCM pool offset %llu)",
                         (unsigned long long)(GPSIMD_DATARAM_BASE + off), (unsigned long long)off);
    }
    gpsimd_fault(GPSIMD_FAULT_TCM, "tcm_free(%p): pointer not from tcm_malloc", ptr);
}

}  // namespace neuron
}  // namespace torch
