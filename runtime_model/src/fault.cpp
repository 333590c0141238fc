/*
 * fault.cpp -- how the host runtime stops an op.  A device fault
 * (an _Assert of the shipped library, ARCHITECTURE.md "The device's marshalling",
 * or a host-model check) becomes:
 *   report.status = GPSIMD_STATUS_FAULT, report.fault_kind = kind,
 *   report.message = the text,
 * then a jump back to the launcher (stack_switch.cpp), which returns
 * GPSIMD_STATUS_FAULT to the model.  Fault kinds: gpsimd_host/faults.h.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

namespace gpsimd_rt {

static bool g_faulted = false;

bool launch_faulted() { return g_faulted; }
void clear_fault() { g_faulted = false; }

/* Writes the fault into the report (first fault of a launch wins). */
void record_fault(uint32_t kind, const char* message) {
    if (g_faulted) return;
    g_faulted = true;
    gpsimd_core_report* r = core().report;
    if (!r) return;
    r->status = GPSIMD_STATUS_FAULT;
    r->fault_kind = kind;
    strncpy(r->message, message, GPSIMD_MESSAGE_CAPACITY - 1);
    r->message[GPSIMD_MESSAGE_CAPACITY - 1] = '\0';
    update_report_counters();
}

bool check_enabled(uint32_t check) {
    const CoreState& c = core();
    return c.bound && (c.binding.checks & check) != 0;
}

void report_flag(uint32_t flag) {
    gpsimd_core_report* r = core().report;
    if (r) r->flags |= flag;
}

/* gpsimd_core_report.warnings: "<text>\n" per warning while it fits. */
GPSIMD_HOST_ONLY void record_warning(const char* fmt, ...) {
    gpsimd_core_report* r = core().report;
    if (!r) return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    r->warning_count += 1;
    const size_t used = strnlen(r->warnings, GPSIMD_WARNINGS_CAPACITY);
    const size_t n = strlen(text);
    if (used + n + 2 <= GPSIMD_WARNINGS_CAPACITY) {
        memcpy(r->warnings + used, text, n);
        r->warnings[used + n] = '\n';
        r->warnings[used + n + 1] = '\0';
    }
}

void update_report_counters() {
    CoreState& c = core();
    gpsimd_core_report* r = c.report;
    if (!r) return;
    r->tcm_peak = c.tcm.peak();
    r->scratch_peak = c.scratch.peak();
    r->dataram_peak = c.dataram.peak();
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

/* faults.h: stop the op with `kind` and a printf-style message. */
GPSIMD_HOST_ONLY void gpsimd_fault(uint32_t kind, const char* fmt, ...) {
    static char message[GPSIMD_MESSAGE_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (shape_call_active()) shape_call_fault(kind, message);
    if (in_launch()) {
        record_fault(kind, message);
        return_to_launcher();
    }
    /* No launcher to return to (a kernel function called outside a launch,
     * or a nested fault after the first): report and stop the process. */
    fprintf(stderr, "gpsimd runtime fault outside a launch [%s]: %s\n", gpsimd_fault_name(kind), message);
    abort();
}

/* faults.h: the name column of GPSIMD_FAULT_KINDS. */
extern "C" const char* gpsimd_fault_name(uint32_t kind) {
    switch (kind) {
#define GPSIMD_FAULT_NAME_(name, value) case value: return #name;
        GPSIMD_FAULT_KINDS(GPSIMD_FAULT_NAME_)
#undef GPSIMD_FAULT_NAME_
    default:
        return "UNKNOWN";
    }
}
