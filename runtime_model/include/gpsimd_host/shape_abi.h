/*
 * gpsimd_host/shape_abi.h -- the contract between a host shape library
 * (the shape sources of one custom-op library, compiled for the host and
 * linked with the host runtime) and the Python model that reads its
 * registration and calls its shape functions (gpsimd_emu.shapes).
 *
 * The torch-neuronx flow (docs/shape-functions.md): a shape source includes
 * "torchneuron/register.h" and opens NEURON_LIBRARY(<lib>, m) { ... } with
 * one m.def("<op>", &<shape_fn>, "<kernel>") per op.  Those run as static
 * initialisers when the shape library is loaded and land in a registry of
 * the runtime (runtime_model/src/shape.cpp), read through the functions
 * below.  A shape function runs on the host with tensors that have sizes
 * and a dtype but no data ("meta" tensors); anything that reads or writes
 * tensor data, or a device call, is a GPSIMD_FAULT_SHAPE_FUNCTION fault.
 *
 * Every struct here is HOST-MODEL (the device has no such interface).  The
 * model checks gpsimd_shape_abi_sizes() against its own layout before any
 * call.  C and C++ compatible; <stdint.h> only.
 */
#ifndef GPSIMD_HOST_SHAPE_ABI_H
#define GPSIMD_HOST_SHAPE_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPSIMD_SHAPE_ABI_VERSION 1u
#define GPSIMD_SHAPE_MAX_PARAMS 32u   /* parameters a registered shape function may have */
#define GPSIMD_SHAPE_MAX_DIMS 8u      /* sizes[] capacity (gpsimd_host/abi.h GPSIMD_MAX_DIMS) */
#define GPSIMD_SHAPE_MESSAGE_CAPACITY 1024u

/* The C++ type of one shape-function parameter (or its return), as
 * register.h's m.def sees it.  Tensor covers torch::Tensor by value,
 * const&, & and &&; Scalar likewise.  INT64 is int64_t (long on the LP64
 * host), LONG_LONG the distinct type long long. */
#define GPSIMD_SHAPE_PARAM_KINDS(X)                                   \
    X(OTHER, 0) X(TENSOR, 1) X(SCALAR, 2) X(DOUBLE, 3) X(FLOAT, 4)    \
    X(INT, 5) X(INT64, 6) X(LONG_LONG, 7)

enum gpsimd_shape_param_kind {
#define GPSIMD_SHAPE_PARAM_ENUM_(name, value) GPSIMD_SHAPE_PARAM_##name = value,
    GPSIMD_SHAPE_PARAM_KINDS(GPSIMD_SHAPE_PARAM_ENUM_)
#undef GPSIMD_SHAPE_PARAM_ENUM_
    GPSIMD_SHAPE_PARAM_KIND_COUNT_
};

/* One argument of a call: a meta tensor (dtype and sizes, no data) or a
 * number. */
#define GPSIMD_SHAPE_ARG_TENSOR 1u
#define GPSIMD_SHAPE_ARG_INT 2u
#define GPSIMD_SHAPE_ARG_FLOAT 3u
typedef struct {
    uint32_t kind;               /* GPSIMD_SHAPE_ARG_*                            */
    uint32_t dtype;              /* tensor: ISA dtype (abi.h NEURON_ISA_TPB_DTYPE) */
    uint32_t ndim;               /* tensor: rank, <= GPSIMD_SHAPE_MAX_DIMS        */
    uint32_t reserved;
    int64_t  sizes[GPSIMD_SHAPE_MAX_DIMS];  /* tensor: dimensions (elements)      */
    int64_t  i;                  /* INT: the value                                */
    double   f;                  /* FLOAT: the value                              */
} gpsimd_shape_arg;              /* 96 bytes */

/* What a call returns: the result's dtype and sizes, or a fault. */
typedef struct {
    uint32_t status;             /* 0: ok; 1: the shape function faulted          */
    uint32_t fault_kind;         /* gpsimd_host/faults.h, when status is 1        */
    uint32_t dtype;              /* ISA dtype of the returned tensor              */
    uint32_t ndim;               /* its rank                                      */
    int64_t  sizes[GPSIMD_SHAPE_MAX_DIMS];
    char     message[GPSIMD_SHAPE_MESSAGE_CAPACITY];  /* NUL-terminated fault text */
} gpsimd_shape_result;

/* One NEURON_LIBRARY block that ran. */
typedef struct {
    const char* name;            /* its first argument, e.g. "my_ops"             */
    const char* file;            /* __FILE__ of the block (the shape source)      */
    uint32_t    line;            /* __LINE__ of NEURON_LIBRARY                    */
    uint32_t    reserved;
} gpsimd_shape_library_info;

/* One m.def that ran. */
typedef struct {
    const char* op;              /* first argument: the op name torch calls       */
    const char* kernel;          /* third argument: the kernel function's name    */
    const char* library;         /* the NEURON_LIBRARY it ran in                  */
    const char* file;            /* the source file of the m.def call             */
    uint32_t    line;            /* its line                                      */
    uint32_t    nparams;         /* parameters of the shape function              */
    const uint32_t* kinds;       /* nparams GPSIMD_SHAPE_PARAM_* values           */
    const char* const* spellings;/* nparams C++ spellings ("const torch::Tensor&") */
    uint32_t    return_kind;     /* GPSIMD_SHAPE_PARAM_TENSOR, else OTHER         */
    uint32_t    callable;        /* 1: every parameter is of a kind a call can make */
    const char* return_spelling;
    const char* symbol;          /* demangled "fn(at::Tensor)", or "" when unknown */
} gpsimd_shape_def_info;

/* Exported by every shape library (the runtime's shape.cpp):
 *   uint32_t gpsimd_shape_abi_sizes(uint32_t which): sizeof of
 *       0 gpsimd_shape_arg, 1 gpsimd_shape_result, 2 gpsimd_shape_library_info,
 *       3 gpsimd_shape_def_info; 4 the ABI version.
 *   uint32_t gpsimd_shape_library_count(void);
 *   const gpsimd_shape_library_info* gpsimd_shape_library_at(uint32_t i);
 *   uint32_t gpsimd_shape_def_count(void);
 *   const gpsimd_shape_def_info* gpsimd_shape_def_at(uint32_t i);
 *   int gpsimd_shape_call(uint32_t def, const gpsimd_shape_arg* args,
 *                         uint32_t nargs, gpsimd_shape_result* out);
 *       runs the shape function of registration `def` on `nargs`
 *       arguments; 0 when it returned a tensor (out: dtype, sizes), 1 on a
 *       fault (out: status 1, kind, message).  Never throws. */
uint32_t gpsimd_shape_abi_sizes(uint32_t which);
uint32_t gpsimd_shape_library_count(void);
const gpsimd_shape_library_info* gpsimd_shape_library_at(uint32_t i);
uint32_t gpsimd_shape_def_count(void);
const gpsimd_shape_def_info* gpsimd_shape_def_at(uint32_t i);
int gpsimd_shape_call(uint32_t def, const gpsimd_shape_arg* args, uint32_t nargs,
                      gpsimd_shape_result* out);

/* Called by register.h (not by the model). */
void gpsimd_shape_begin_library(const char* name, const char* file, uint32_t line);
void gpsimd_shape_end_library(void);
/* A meta tensor (refcount 1, no storage) of an ISA dtype and sizes: a
 * c10::TensorImpl*, adopted by the at::Tensor the caller makes. */
void* gpsimd_shape_meta_tensor(uint32_t isa_dtype, const int64_t* sizes, uint32_t ndim);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GPSIMD_HOST_SHAPE_ABI_H */
