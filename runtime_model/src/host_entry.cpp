/*
 * host_entry.cpp -- what the Python device model calls in a core object
 * besides the registration trio (abi.h "Exported by every core object"):
 * gpsimd_bind_core and gpsimd_linker_spec_info.
 *
 * gpsimd_bind_core checks the binding against this object's linker spec
 * (the Neuron SDK's build driver, build_custom_op.py: a core must be given its own object; ARCHITECTURE.md
 * "so a core can check that it was given its own object"), copies it, sets
 * the heap poison of the process (GPSIMD_CHECK_POISON_HEAP) and resets
 * every per-launch state.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

using namespace gpsimd_rt;

/* Write a bind failure into the report (there is no launcher to return to). */
static int bind_fail(gpsimd_core_report* r, uint32_t kind, int rc, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bind_fail(gpsimd_core_report* r, uint32_t kind, int rc, const char* fmt, ...) {
    CoreState& c = core();
    c.bound = false;
    c.report = r;
    if (r) {
        memset(r, 0, sizeof *r);
        r->status = GPSIMD_STATUS_FAULT;
        r->fault_kind = kind;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof r->message, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* GPSIMD_CHECK_POISON_HEAP: glibc's mallopt(M_PERTURB, b) makes every
 * malloc (and so operator new) fill its block with ~b and every free fill
 * the freed bytes with b (calloc stays zero; b = 0 turns it off), in the
 * whole process, which runs the bound cores one launch at a time: the run's
 * tcm_poison reaches malloc'd memory.  (The zygote runs with glibc's
 * per-thread cache off, GLIBC_TUNABLES glibc.malloc.tcache_count=0: a
 * block the cache hands back is not perturbed.)  True when it is on. */
static bool set_heap_poison(const gpsimd_core_binding& b) {
#ifdef M_PERTURB
    const int byte = (b.checks & GPSIMD_CHECK_POISON_HEAP) ? (~b.tcm_poison & 0xff) : 0;
    return mallopt(M_PERTURB, byte) == 1 && byte != 0;
#else
    (void)b;
    return false;
#endif
}

/* abi.h: bind this core object before a launch; 0 on success. */
extern "C" int gpsimd_bind_core(const gpsimd_core_binding* b) {
    if (!b) return bind_fail(nullptr, GPSIMD_FAULT_BINDING, -1, "null binding");
    gpsimd_core_report* r = reinterpret_cast<gpsimd_core_report*>(static_cast<uintptr_t>(b->report_host));
    if (!r) return bind_fail(nullptr, GPSIMD_FAULT_BINDING, -1, "binding without a report");
    if (b->abi_version != GPSIMD_HOST_ABI_VERSION)
        return bind_fail(r, GPSIMD_FAULT_BINDING, 1, "ABI version mismatch: binding has %u, runtime has %u",
                         b->abi_version, GPSIMD_HOST_ABI_VERSION);

    const gpsimd_lsp_info& lsp = gpsimd_linker_spec;
    if (lsp.core_id == GPSIMD_LSP_SINGLE) {
        if (b->core_id != 0 || b->core_count != 1)
            return bind_fail(r, GPSIMD_FAULT_LSP_MISMATCH, 2,
                             "object linked with %.32s (single-core) loaded on core %u of %u", lsp.name, b->core_id,
                             b->core_count);
    } else if (lsp.core_id != b->core_id || b->core_count != GPSIMD_NUM_CORES) {
        if (lsp.core_id != b->core_id)
            return bind_fail(r, GPSIMD_FAULT_LSP_MISMATCH, 2, "object linked with %.32s loaded on core %u",
                             lsp.name, b->core_id);
        return bind_fail(r, GPSIMD_FAULT_LSP_MISMATCH, 2,
                         "object linked with %.32s (multicore) bound with core_count %u, expected %u", lsp.name,
                         b->core_count, GPSIMD_NUM_CORES);
    }
    if (b->num_regions > GPSIMD_MAX_REGIONS)
        return bind_fail(r, GPSIMD_FAULT_BINDING, 3, "binding has %u regions, at most %u", b->num_regions,
                         GPSIMD_MAX_REGIONS);
    if (!b->dataram_host)
        return bind_fail(r, GPSIMD_FAULT_BINDING, 3, "binding has no dataram backing (dataram_host)");
    if (!b->scratch_host)
        return bind_fail(r, GPSIMD_FAULT_BINDING, 3, "binding has no scratch window backing (scratch_host)");

    CoreState& c = core();
    poison_released();                  /* (in the windows of the binding it replaces) */
    c.binding = *b;
    c.report = r;
    c.bound = true;
    c.heap_poisoned = set_heap_poison(*b);
    setup_read_tracking();
    reset_launch_state();
    return 0;
}

/* abi.h: this object's linker spec. */
extern "C" const gpsimd_lsp_info* gpsimd_linker_spec_info(void) { return &gpsimd_linker_spec; }
