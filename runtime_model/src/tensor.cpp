/*
 * tensor.cpp -- the out-of-line part of the tensor library of
 * torch/torch.h (docs/kernel-api.md "Tensor members", "Making tensors",
 * "Accessors and memory", "Limits"): TensorImpl lifetime, the checks behind
 * accessors and the TCM accessor, fill_ (the factories: factories.cpp).
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <stdio.h>
#include <string.h>

#include <new>
#include <type_traits>

#include "custom_op.h"
#include "gpsimd_host/dtypes.h"
#include "runtime.h"
#include "tensor_impl.h"

/* c10::ScalarType and the C element types of torch/detail/scalar_type.h
 * (kernel-facing, so left as written) are checked here, at compile time,
 * against the one dtype table, gpsimd_host/dtypes.h: value, size, and the
 * C type <-> ScalarType traits. */
#define GPSIMD_CHECK_DTYPE_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol)                 \
    static_assert(int(c10::ScalarType::st) == c10v, "ScalarType::" #st " differs from gpsimd_host/dtypes.h"); \
    static_assert(sizeof(ctype) == bytes, #ctype ": size differs from gpsimd_host/dtypes.h");            \
    static_assert(c10::ElementType<ctype>::scalar_type == c10::ScalarType::st,                            \
                  #ctype " is not the element type of ScalarType::" #st);
GPSIMD_DTYPES(GPSIMD_CHECK_DTYPE_)
#undef GPSIMD_CHECK_DTYPE_

static_assert(c10::kMaxTensorDims == GPSIMD_MAX_DIMS, "torch/detail/tensor.h differs from gpsimd_host/abi.h");

namespace gpsimd_rt {

using c10::ScalarType;
using c10::TensorImpl;

static TensorImpl* new_impl(ScalarType dtype, const int64_t* sizes, int ndim) {
    TensorImpl* p = new TensorImpl();
    p->refcount = 1;
    p->dtype = dtype;
    p->owns_storage = false;
    p->ndim = ndim;
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d) {
        p->sizes[d] = sizes[d];
        numel *= sizes[d];
    }
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        p->strides[d] = stride;
        stride *= sizes[d];
    }
    p->numel = numel;
    p->nbytes = size_t(numel) * c10::elementSize(dtype);
    p->data = nullptr;
    p->device_addr = 0;
    p->epoch = 0;
    p->coherence = c10::COHERENT;
    return p;
}

at::Tensor make_borrowed_tensor(ScalarType dtype, const int64_t* sizes, int ndim, void* host,
                                uint64_t device_addr) {
    TensorImpl* p = new_impl(dtype, sizes, ndim);
    p->data = host;
    p->device_addr = device_addr;
    return at::Tensor(p);
}

const char* shape_string(const TensorImpl* impl, char* buf, size_t n) {
    size_t k = size_t(snprintf(buf, n, "["));
    for (int d = 0; d < impl->ndim && k < n; ++d)
        k += size_t(snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)impl->sizes[d]));
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

at::Tensor make_scratch_tensor(const char* who, const c10::IntArrayRef& sizes, ScalarType dtype) {
    if (c10::elementSize(dtype) == 0)
        gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "%s: undefined dtype (the device needs one)", who);
    if (sizes.size() > c10::kMaxTensorDims)
        gpsimd_fault(GPSIMD_FAULT_SHAPE, "%s: %zu dimensions, the device allows at most %zu", who, sizes.size(),
                     c10::kMaxTensorDims);
    /* abi.h: rank <= GPSIMD_MAX_DIMS_4D may have u32 dimensions (INLINE_4D),
     * a larger rank dimensions of at most GPSIMD_MAX_DIM_SIZE (INLINE_8D);
     * at most GPSIMD_MAX_ELEMENTS elements either way. */
    const int64_t largest = sizes.size() <= GPSIMD_MAX_DIMS_4D ? int64_t(GPSIMD_MAX_DIM_SIZE_4D)
                                                               : int64_t(GPSIMD_MAX_DIM_SIZE);
    uint64_t count = 1;
    for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d] < 0 || sizes[d] > largest)
            gpsimd_fault(GPSIMD_FAULT_SHAPE, "%s: dimension %zu has size %lld, the device allows 0..%lld for a "
                         "tensor of %zu dimensions", who, d, (long long)sizes[d], (long long)largest, sizes.size());
        count = count > uint64_t(GPSIMD_MAX_ELEMENTS) ? count : count * uint64_t(sizes[d]);
    }
    if (count > uint64_t(GPSIMD_MAX_ELEMENTS))
        gpsimd_fault(GPSIMD_FAULT_SHAPE, "%s: %llu elements or more, the device allows at most %llu", who,
                     (unsigned long long)count, (unsigned long long)GPSIMD_MAX_ELEMENTS);
    TensorImpl* p = new_impl(dtype, sizes.data(), int(sizes.size()));
    if (shape_call_active()) return at::Tensor(p);   /* a meta tensor: no storage */
    if (p->nbytes) {
        at::Tensor guard(p);  /* the handle owns p from here on */
        p->device_addr = scratch_allocate(p->nbytes);
        p->data = translate_range(p->device_addr, p->nbytes, who);
        p->owns_storage = true;
        p->epoch = core().epoch;
        return guard;
    }
    return at::Tensor(p);
}

/* ---- element load/store ---------------------------------------------- */

template <typename T>
static T get(const void* base, int64_t i) {
    T v;
    memcpy(&v, static_cast<const char*>(base) + i * int64_t(sizeof(T)), sizeof(T));
    return v;
}
template <typename T>
static void put(void* base, int64_t i, T v) {
    memcpy(static_cast<char*>(base) + i * int64_t(sizeof(T)), &v, sizeof(T));
}

/* One element of C++ type T as double / int64 (floats widen through float,
 * integers convert exactly or wrap; floats saturate to int64). */
template <typename T>
static double as_double(T v, std::true_type /* integral */) { return double(v); }
template <typename T>
static double as_double(T v, std::false_type) { return double(static_cast<float>(v)); }
template <typename T>
static int64_t as_int(T v, std::true_type /* integral */) { return int64_t(v); }
template <typename T>
static int64_t as_int(T v, std::false_type) {
    return c10::detail::saturating_cast<int64_t>(double(static_cast<float>(v)));
}

/* The switches below have one case per row of gpsimd_host/dtypes.h. */
#define GPSIMD_DTYPE_CASE_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol) \
    case ScalarType::st: GPSIMD_DTYPE_DO_(ctype)

double load_double(ScalarType t, const void* b, int64_t i) {
    switch (t) {
#define GPSIMD_DTYPE_DO_(ctype) return as_double(get<ctype>(b, i), std::is_integral<ctype>());
        GPSIMD_DTYPES(GPSIMD_DTYPE_CASE_)
#undef GPSIMD_DTYPE_DO_
    default: gpsimd_fault(GPSIMD_FAULT_DTYPE, "load of an element of undefined dtype");
    }
}

int64_t load_int(ScalarType t, const void* b, int64_t i) {
    switch (t) {
#define GPSIMD_DTYPE_DO_(ctype) return as_int(get<ctype>(b, i), std::is_integral<ctype>());
        GPSIMD_DTYPES(GPSIMD_DTYPE_CASE_)
#undef GPSIMD_DTYPE_DO_
    default: gpsimd_fault(GPSIMD_FAULT_DTYPE, "load of an element of undefined dtype");
    }
}

template <typename T>
static void store_scalar(void* b, int64_t i, const c10::Scalar& s) {
    put<T>(b, i, s.to<T>());
}

static void store_from_scalar(ScalarType t, void* b, int64_t i, const c10::Scalar& s) {
    switch (t) {
#define GPSIMD_DTYPE_DO_(ctype) store_scalar<ctype>(b, i, s); break;
        GPSIMD_DTYPES(GPSIMD_DTYPE_CASE_)
#undef GPSIMD_DTYPE_DO_
    default: gpsimd_fault(GPSIMD_FAULT_DTYPE, "store of an element of undefined dtype");
    }
}
#undef GPSIMD_DTYPE_CASE_

void store_double(ScalarType t, void* b, int64_t i, double v) { store_from_scalar(t, b, i, c10::Scalar(v)); }
void store_int(ScalarType t, void* b, int64_t i, int64_t v) { store_from_scalar(t, b, i, c10::Scalar(v)); }

/* Fill numel elements with one value: encode once, replicate bytes. */
void fill_elements(TensorImpl* p, const c10::Scalar& v) {
    if (!p->numel || !p->data) return;   /* (a meta tensor of a shape function) */
    const size_t es = c10::elementSize(p->dtype);
    store_from_scalar(p->dtype, p->data, 0, v);
    char* d = static_cast<char*>(p->data);
    size_t done = es;
    while (done < p->nbytes) {  /* doubling copy */
        size_t n = done < p->nbytes - done ? done : p->nbytes - done;
        memcpy(d + done, d, n);
        done += n;
    }
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

namespace c10 {
namespace detail {

/* docs/kernel-api.md "Accessors and memory" (host-model bounds check). */
void fault_out_of_range(const char* kind_prefix, const char* type_name, int rank, int64_t offset,
                        int64_t count, int64_t numel) {
    if (rank > 0)
        gpsimd_fault(GPSIMD_FAULT_OUT_OF_RANGE, "%s<%s,%d> out of range: offset %lld, count %lld, numel %lld",
                     kind_prefix, type_name, rank, (long long)offset, (long long)count, (long long)numel);
    gpsimd_fault(GPSIMD_FAULT_OUT_OF_RANGE, "%s<%s> out of range: offset %lld, count %lld, numel %lld", kind_prefix,
                 type_name, (long long)offset, (long long)count, (long long)numel);
}

void fault_array_index(size_t index, size_t size) {
    gpsimd_fault(GPSIMD_FAULT_OUT_OF_RANGE, "IntArrayRef index %zu out of range (size %zu)", index, size);
}

void fault_undefined_tensor(const char* what) {
    gpsimd_fault(GPSIMD_FAULT_UNDEFINED_TENSOR, "%s() on an undefined tensor", what);
}

/* docs/kernel-api.md: the standard and stream accessors are single-core only
 * ("in multicore mode it is undefined behaviour (races)"); the TCM accessor
 * is the only one allowed in multicore mode. */
static void check_single_core_accessor(const char* kind, const char* type_name, int rank) {
    if (!check_enabled(GPSIMD_CHECK_MULTICORE) || core().binding.core_count <= 1) return;
    char what[96];
    if (rank > 0) snprintf(what, sizeof what, "%s<%s,%d>", kind, type_name, rank);
    else snprintf(what, sizeof what, "%s<%s>", kind, type_name);
    gpsimd_fault(GPSIMD_FAULT_MULTICORE,
                 "%s used in multicore mode: only the TCM accessor is allowed there, the standard and stream "
                 "accessors race between cores (docs/kernel-api.md \"Accessors and memory\")", what);
}

/* docs/kernel-api.md: accessor<T,N>() -- T must match the dtype, N the rank. */
void check_accessor(const TensorImpl* impl, ScalarType want, const char* type_name, int rank) {
    if (shape_call_active()) {
        char what[96];
        snprintf(what, sizeof what, "accessor<%s,%d>()", type_name, rank);
        forbid_in_shape_call(what);
    }
    check_single_core_accessor("accessor", type_name, rank);
    {
        char what[96];
        snprintf(what, sizeof what, "accessor<%s,%d>", type_name, rank);
        check_open_write_stream(impl, what);
    }
    note_output_untracked(impl->data);
    if (impl->dtype != want)
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "accessor<%s> on %s %s tensor", type_name,
                     article(dtype_name(impl->dtype)), dtype_name(impl->dtype));
    if (impl->ndim != rank)
        gpsimd_fault(GPSIMD_FAULT_SHAPE, "accessor<%s,%d> on a %d-dimensional tensor", type_name, rank,
                     int(impl->ndim));
}

/* docs/kernel-api.md "Accessors and memory": T must match the dtype. */
void check_stream(const TensorImpl* impl, ScalarType want, const char* type_name, const char* kind) {
    if (shape_call_active()) {
        char what[96];
        snprintf(what, sizeof what, "%s<%s>()", kind, type_name);
        forbid_in_shape_call(what);
    }
    check_single_core_accessor(kind, type_name, 0);
    note_output_untracked(impl->data);
    if (impl->dtype != want)
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "%s<%s> on %s %s tensor", kind, type_name,
                     article(dtype_name(impl->dtype)), dtype_name(impl->dtype));
}

/* docs/kernel-api.md "Accessors and memory": tensor_to_tcm / tcm_to_tensor of n
 * elements at flattened offset. */
void tcm_transfer(const TensorImpl* impl, ScalarType want, const char* type_name, void* tcm, size_t offset,
                  size_t n, bool to_tcm) {
    const char* kind = to_tcm ? "tensor_to_tcm" : "tcm_to_tensor";
    forbid_in_shape_call(kind);
    if (impl->dtype != want)
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "%s<%s> on %s %s tensor", kind, type_name,
                     article(dtype_name(impl->dtype)), dtype_name(impl->dtype));
    const uint64_t numel = uint64_t(impl->numel);
    if (offset > numel || n > numel - offset)
        fault_out_of_range(kind, type_name, 0, int64_t(offset), int64_t(n), impl->numel);
    const size_t es = elementSize(impl->dtype);
    char* t = static_cast<char*>(impl->data) + offset * es;
    if (!n) return;
    char what[64];
    snprintf(what, sizeof what, "%s<%s>", kind, type_name);
    check_open_write_stream(impl, what);
    gpsimd_rt::check_dataram_span(tcm, uint64_t(n) * es, what);
    if (to_tcm) note_output_read(t, uint64_t(n) * es);
    if (to_tcm) memmove(tcm, t, n * es);
    else {
        note_output_write(t, tcm, uint64_t(n) * es);
        memmove(t, tcm, n * es);
    }
}

/* The last handle went away: free kernel-created scratch storage (unless
 * it belongs to an earlier launch, whose window has been reset). */
void destroy_tensor_impl(TensorImpl* impl) {
    CoreState& c = core();
    if (impl->owns_storage && c.bound && impl->epoch == c.epoch)
        c.scratch.release(impl->device_addr - scratch_origin());
    delete impl;
}

}  // namespace detail
}  // namespace c10

namespace at {

/* docs/kernel-api.md "Tensor members": the storage's Q7PtrType, as the
 * device ABI builds it (Q7PtrType{hbm_addr, ctx}); null for a tensor
 * without storage.  The kernel reaches the data through neuron_translate,
 * which the model does not follow element by element. */
Q7PtrType Tensor::q7_data_ptr() const {
    forbid_in_shape_call("q7_data_ptr()");
    const TensorImpl* p = impl("q7_data_ptr");
    note_output_untracked(p->data);
    Q7PtrType q;
    q.hbm_addr = p->device_addr;
    q.ctx = neuron_translate_ctx();
    q.is_nullptr = p->data == nullptr;
    return q;
}

/* docs/kernel-api.md "Tensor members": fill_(Scalar). */
Tensor& Tensor::fill_(const Scalar& v) {
    forbid_in_shape_call("fill_()");
    fill_elements(impl("fill_"), v);
    return *this;
}

ConstTcmAccessor::ConstTcmAccessor(TensorImpl* impl) : impl_(impl) { ++impl_->refcount; }
ConstTcmAccessor::ConstTcmAccessor(const ConstTcmAccessor& o) : impl_(o.impl_) { ++impl_->refcount; }
ConstTcmAccessor& ConstTcmAccessor::operator=(const ConstTcmAccessor& o) {
    ++o.impl_->refcount;
    if (--impl_->refcount == 0) c10::detail::destroy_tensor_impl(impl_);
    impl_ = o.impl_;
    return *this;
}
ConstTcmAccessor::~ConstTcmAccessor() {
    if (--impl_->refcount == 0) c10::detail::destroy_tensor_impl(impl_);
}

}  // namespace at
