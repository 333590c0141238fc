/*
 * gpsimd_host/faults.h -- the fault kinds the host runtime reports in
 * gpsimd_core_report.fault_kind (abi.h).  The numeric values are STABLE: the
 * Python model maps them to names; append new kinds at the end, never
 * renumber.  GPSIMD_FAULT_KINDS is an X-macro so that C, C++ and a Python
 * parser can all read the same table.  gpsimd_fault_name() (exported by every
 * core object, C linkage) returns the name column.
 */
#ifndef GPSIMD_HOST_FAULTS_H
#define GPSIMD_HOST_FAULTS_H

#include <stdint.h>

/*            name                 value  what                                              */
#define GPSIMD_FAULT_KINDS(X)                                                                  \
    X(NONE,                0)  /* no fault (status OK)                                       */ \
    X(BINDING,             1)  /* bad binding: ABI version, missing backing, not bound        */ \
    X(LSP_MISMATCH,        2)  /* the object's linker spec does not match the bound core      */ \
    X(ARG_STREAM,          3)  /* ArgParser guards: arg_parser.hpp:66/67, arg_extractor.hpp:16 */ \
    X(DESCRIPTOR,          4)  /* malformed 48-byte descriptor (location, shape, num_elem)    */ \
    X(DTYPE,               5)  /* Unknown ScalarType, utypes.hpp:65 gate, accessor<T> mismatch */ \
    X(SCALAR,              6)  /* utypes.hpp:172/178 "Cannot create an at::Scalar..."         */ \
    X(SHAPE,               7)  /* element count / shape mismatch, > 8 dims, dim > 65535       */ \
    X(UNMAPPED,            8)  /* neuron_translate of an address no region maps               */ \
    X(OUT_OF_RANGE,        9)  /* accessor / tcm_accessor index outside [0, numel)            */ \
    X(SCRATCH_FULL,       10)  /* the core's HBM scratch window cannot fit a request          */ \
    X(DATARAM,            11)  /* dataram staging failure, bad neuron_dataram_deallocate      */ \
    X(TCM,                12)  /* tcm_free of a foreign pointer, double tcm_free              */ \
    X(STACK_OVERFLOW,     13)  /* the wrapper's stack ran into its guard page                 */ \
    X(CXX_EXCEPTION,      14)  /* a C++ exception escaped the kernel                          */ \
    X(UNDEFINED_TENSOR,   15)  /* use of an undefined (default-constructed) at::Tensor        */ \
    X(BAD_ARGUMENT,       16)  /* invalid API use: factory without dtype, bad dim, bad op arg */ \
    X(UNSUPPORTED,        17)  /* valid request the device does not support (op x dtype)      */ \
    X(INTERNAL,           18)  /* host resource failure (mmap, ...)                           */ \
    X(SEGV,               19)  /* invalid memory access (SIGSEGV/SIGBUS) on the wrapper stack */ \
    X(TCM_NULL,           20)  /* dereference of the null a failed tcm_malloc returned        */ \
    X(MULTICORE,          21)  /* docs/kernel-api.md multicore rule (accessor kind, get_dst_tensor) */ \
    X(COHERENCE,          22)  /* stream accessors incoherent under the COHERENT policy       */ \
    X(SHAPE_FUNCTION,     23)  /* a shape function used tensor data or a device call          */

enum gpsimd_fault_kind {
#define GPSIMD_FAULT_ENUM_(name, value) GPSIMD_FAULT_##name = value,
    GPSIMD_FAULT_KINDS(GPSIMD_FAULT_ENUM_)
#undef GPSIMD_FAULT_ENUM_
    GPSIMD_FAULT_KIND_COUNT
};

#ifdef __cplusplus
extern "C" {
#endif
/* "NONE", "BINDING", ...; "UNKNOWN" for a value not in the table. */
const char* gpsimd_fault_name(uint32_t kind);
#ifdef __cplusplus
}

/* Stop the running op: write `kind` and the formatted message into the
 * core's report and return to the launcher, which returns
 * GPSIMD_STATUS_FAULT.  Outside a launch (no launcher to return to) the
 * message goes to stderr and the process aborts.  C++ linkage. */
[[noreturn]] void gpsimd_fault(uint32_t kind, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
#endif

#endif /* GPSIMD_HOST_FAULTS_H */
