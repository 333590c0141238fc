/*
 * shape.cpp -- the host side of shape functions (gpsimd_host/shape_abi.h,
 * torchneuron/register.h, docs/shape-functions.md): the registry that
 * NEURON_LIBRARY blocks and their m.def calls fill when a shape library is
 * loaded, and gpsimd_shape_call, which runs one shape function on meta
 * tensors (sizes and a dtype, no data).
 *
 * While a shape function runs (shape_call_active()), the factories make
 * meta tensors, a factory without a dtype makes float32 (the host PyTorch
 * default), and whatever reads or writes tensor data or needs a device core
 * (accessors, fill_, element-wise ops, get_dst_tensor, tcm_malloc, the
 * custom_op.h calls) is a GPSIMD_FAULT_SHAPE_FUNCTION fault
 * (forbid_in_shape_call).  A fault of any kind ends the call through
 * shape_call_fault, which jumps back to gpsimd_shape_call with the message.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <cxxabi.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "gpsimd_host/dtypes.h"
#include "gpsimd_host/shape_abi.h"
#include "runtime.h"
#include "tensor_impl.h"
#include "torchneuron/register.h"

static_assert(GPSIMD_SHAPE_MAX_DIMS == GPSIMD_MAX_DIMS,
              "gpsimd_host/shape_abi.h differs from gpsimd_host/abi.h");

namespace gpsimd_rt {
namespace {

using c10::ScalarType;

/* The registry.  NEURON_LIBRARY blocks run as static initialisers of the
 * shape sources, possibly before this file's, so every container is made
 * on first use. */
struct Def;
std::deque<std::string>& strings() { static std::deque<std::string> s; return s; }
std::deque<gpsimd_shape_library_info>& libraries() { static std::deque<gpsimd_shape_library_info> l; return l; }
std::deque<Def>& defs();

/* An owned copy of a string the registry hands out. */
const char* keep(const char* s) {
    strings().emplace_back(s ? s : "");
    return strings().back().c_str();
}

struct Def {
    gpsimd_shape_def_info info;
    std::vector<uint32_t> kinds;
    std::vector<const char*> spellings;
    void (*fn)();
    torchneuron::detail::Invoker invoker;
};

std::deque<Def>& defs() { static std::deque<Def> d; return d; }
const char* g_current_library = nullptr;   /* (constant-initialised) */

bool g_in_call = false;
jmp_buf g_landing;
gpsimd_shape_result* g_out = nullptr;

/* "relu_fwd_shape(at::Tensor)" of a function in a loaded object, or "". */
const char* symbol_of(void (*fn)()) {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void*>(fn), &info) || !info.dli_sname ||
        info.dli_saddr != reinterpret_cast<void*>(fn))
        return keep("");
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    const char* out = keep(status == 0 && demangled ? demangled : info.dli_sname);
    free(demangled);
    return out;
}

bool isa_to_scalar_type(uint32_t isa, ScalarType* out) {
    switch (isa) {
#define GPSIMD_SHAPE_ISA_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol) \
    case NEURON_ISA_TPB_DTYPE_##isa: *out = ScalarType::st; return true;
        GPSIMD_DTYPES(GPSIMD_SHAPE_ISA_)
#undef GPSIMD_SHAPE_ISA_
    default: return false;
    }
}

bool scalar_type_to_isa(ScalarType t, uint32_t* out) {
    switch (t) {
#define GPSIMD_SHAPE_ST_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol) \
    case ScalarType::st: *out = NEURON_ISA_TPB_DTYPE_##isa; return true;
        GPSIMD_DTYPES(GPSIMD_SHAPE_ST_)
#undef GPSIMD_SHAPE_ST_
    default: return false;
    }
}

/* A call ends before the shape function runs. */
int refuse(gpsimd_shape_result* out, uint32_t kind, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int refuse(gpsimd_shape_result* out, uint32_t kind, const char* fmt, ...) {
    out->status = 1;
    out->fault_kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
    return 1;
}

}  // namespace

bool shape_call_active() { return g_in_call; }

void shape_call_fault(uint32_t kind, const char* message) {
    g_out->status = 1;
    g_out->fault_kind = kind;
    snprintf(g_out->message, sizeof g_out->message, "%s", message);
    g_in_call = false;
    longjmp(g_landing, 1);
}

void forbid_in_shape_call(const char* what) {
    if (!g_in_call) return;
    gpsimd_fault(GPSIMD_FAULT_SHAPE_FUNCTION,
                 "%s in a shape function: a shape function runs on the host while the model compiles, on tensors "
                 "that have sizes and a dtype but no data; it may use sizes(), numel(), dim(), scalar_type() and "
                 "the factories (docs/shape-functions.md)", what);
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

namespace torchneuron {
namespace detail {

void register_def(const char* op, void (*fn)(), const char* kernel, const char* file, unsigned line,
                  unsigned nparams, const uint32_t* kinds, const char* const* spellings, uint32_t return_kind,
                  const char* return_spelling, Invoker invoker) {
    defs().emplace_back();
    Def& d = defs().back();
    d.fn = fn;
    d.invoker = invoker;
    for (unsigned i = 0; i < nparams; ++i) {
        d.kinds.push_back(kinds[i]);
        d.spellings.push_back(keep(spellings[i]));
    }
    gpsimd_shape_def_info& info = d.info;
    memset(&info, 0, sizeof info);
    info.op = keep(op);
    info.kernel = keep(kernel);
    info.library = keep(g_current_library);
    info.file = keep(file);
    info.line = line;
    info.nparams = nparams;
    info.kinds = d.kinds.data();
    info.spellings = d.spellings.data();
    info.return_kind = return_kind;
    info.callable = invoker != nullptr;
    info.return_spelling = keep(return_spelling);
    info.symbol = symbol_of(fn);
}

void bad_argument(unsigned index, const char* parameter) {
    gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "argument %u of the call does not fit parameter %u (%s)", index, index,
                 parameter);
}

}  // namespace detail
}  // namespace torchneuron

extern "C" {

uint32_t gpsimd_shape_abi_sizes(uint32_t which) {
    switch (which) {
    case 0: return sizeof(gpsimd_shape_arg);
    case 1: return sizeof(gpsimd_shape_result);
    case 2: return sizeof(gpsimd_shape_library_info);
    case 3: return sizeof(gpsimd_shape_def_info);
    case 4: return GPSIMD_SHAPE_ABI_VERSION;
    default: return 0;
    }
}

void gpsimd_shape_begin_library(const char* name, const char* file, uint32_t line) {
    gpsimd_shape_library_info info;
    memset(&info, 0, sizeof info);
    info.name = keep(name);
    info.file = keep(file);
    info.line = line;
    libraries().push_back(info);
    g_current_library = info.name;
}

void gpsimd_shape_end_library(void) { g_current_library = nullptr; }

uint32_t gpsimd_shape_library_count(void) { return uint32_t(libraries().size()); }

const gpsimd_shape_library_info* gpsimd_shape_library_at(uint32_t i) {
    return i < libraries().size() ? &libraries()[i] : nullptr;
}

uint32_t gpsimd_shape_def_count(void) { return uint32_t(defs().size()); }

const gpsimd_shape_def_info* gpsimd_shape_def_at(uint32_t i) { return i < defs().size() ? &defs()[i].info : nullptr; }

void* gpsimd_shape_meta_tensor(uint32_t isa_dtype, const int64_t* sizes, uint32_t ndim) {
    ScalarType t = ScalarType::Undefined;
    if (!isa_to_scalar_type(isa_dtype, &t))
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "a shape function's tensor argument has ISA dtype %u, which is no storage type",
                     isa_dtype);
    if (ndim > GPSIMD_SHAPE_MAX_DIMS)
        gpsimd_fault(GPSIMD_FAULT_SHAPE, "a shape function's tensor argument has %u dimensions", ndim);
    at::Tensor handle = make_borrowed_tensor(t, sizes, int(ndim), nullptr, 0);
    c10::TensorImpl* impl = handle.unsafeGetTensorImpl();
    ++impl->refcount;   /* one reference outlives `handle`, for the caller */
    return impl;
}

int gpsimd_shape_call(uint32_t def, const gpsimd_shape_arg* args, uint32_t nargs, gpsimd_shape_result* out) {
    memset(out, 0, sizeof *out);
    if (def >= defs().size())
        return refuse(out, GPSIMD_FAULT_BAD_ARGUMENT, "no registration %u (the library has %zu)", def,
                      defs().size());
    Def& d = defs()[def];
    if (!d.invoker)
        return refuse(out, GPSIMD_FAULT_BAD_ARGUMENT,
                      "the shape function of op '%s' has a parameter or return type a call cannot make", d.info.op);
    if (nargs != d.info.nparams)
        return refuse(out, GPSIMD_FAULT_BAD_ARGUMENT, "the shape function of op '%s' takes %u arguments, not %u",
                      d.info.op, d.info.nparams, nargs);
    at::Tensor* result = new at::Tensor();
    g_out = out;
    char exception[512] = "";
    if (setjmp(g_landing) == 0) {
        g_in_call = true;
        try {
            d.invoker(d.fn, args, result);
        } catch (const std::exception& e) {
            snprintf(exception, sizeof exception, "C++ exception: %s", e.what());
        } catch (...) {
            snprintf(exception, sizeof exception, "C++ exception of a type not derived from std::exception");
        }
        g_in_call = false;
        if (exception[0]) return refuse(out, GPSIMD_FAULT_CXX_EXCEPTION, "%s", exception);
        const c10::TensorImpl* p = result->unsafeGetTensorImpl();
        if (!p) return refuse(out, GPSIMD_FAULT_UNDEFINED_TENSOR, "the shape function returned an undefined tensor");
        if (!scalar_type_to_isa(p->dtype, &out->dtype))
            return refuse(out, GPSIMD_FAULT_DTYPE, "the shape function returned a tensor of dtype %s, which the device "
                          "has no ISA dtype for", c10::dtype_name(p->dtype));
        out->ndim = uint32_t(p->ndim);
        for (int i = 0; i < p->ndim && i < int(GPSIMD_SHAPE_MAX_DIMS); ++i) out->sizes[i] = p->sizes[i];
        delete result;
        return 0;
    }
    /* a fault landed here (shape_call_fault): the tensors it left are leaked */
    return 1;
}

}  // extern "C"
