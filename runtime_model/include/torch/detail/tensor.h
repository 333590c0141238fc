/*
 * torch/detail/tensor.h -- at::Tensor and what it needs: IntArrayRef,
 * TensorOptions, the refcounted TensorImpl, the standard accessor and the
 * TCM accessor (docs/kernel-api.md "Tensor members", "Accessors and
 * memory").
 *
 * the device ABI (gpsimd_host/abi.h) builds a tensor as the chain
 *   Q7PtrType -> UniqueQ7Ptr{deleter} -> NeuronStorageImpl -> NeuronTensorImpl.
 * The host collapses the chain into one TensorImpl (no views exist on the
 * device API, so storage is never shared): it records the storage's device
 * address, its host pointer, and whether destroying the last handle frees
 * it (kernel-created, scratch window) or not (Q7Deleter::delete_nothing:
 * descriptor-backed inputs and the output).
 *
 * Every element access is bounds-checked against numel; a violation is a
 * GPSIMD_FAULT_OUT_OF_RANGE fault "<kind> out of range: offset O, count C,
 * numel N" (kind = accessor<float,2>, tensor_to_tcm<float>, ...).
 */
#ifndef GPSIMD_TORCH_DETAIL_TENSOR_H
#define GPSIMD_TORCH_DETAIL_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "torch/detail/scalar.h"
#include "torch/detail/scalar_type.h"

namespace c10 {

/* docs/kernel-api.md "Limits": at most 8 dimensions (the size of each is
 * checked by the runtime's factories: gpsimd_host/abi.h GPSIMD_MAX_DIM*). */
constexpr size_t kMaxTensorDims = 8;

struct TensorImpl;

/* docs/kernel-api.md "Accessors and memory": the per-tensor coherence policy of
 * the stream accessors.  Under the model's checks (abi.h
 * GPSIMD_CHECK_COHERENCE) a read stream opened while a write stream is open
 * on the same tensor, or a write stream while any stream is open, is a
 * GPSIMD_FAULT_COHERENCE fault under COHERENT, a warning under
 * INCOHERENT_VERBOSE, and allowed under INCOHERENT_QUIET. */
enum AccessorCoherencePolicy { COHERENT = 0, INCOHERENT_VERBOSE = 1, INCOHERENT_QUIET = 2 };
/* Any other access (a standard accessor, a read stream, a TCM transfer,
 * another write stream) to a tensor with an open write stream is treated
 * the same way (src/streams.cpp). */

/* The storage's pointer as the device ABI builds it (gpsimd_host/abi.h):
 * an HBM address the core reaches only through neuron_translate(ctx,
 * hbm_addr) (custom_op.h), its translation context, and whether it is null.
 * What Tensor::q7_data_ptr() returns. */
struct Q7PtrType {
    uint64_t hbm_addr;
    void* ctx;
    bool is_nullptr;
};

namespace detail {
/* false for every D: a static_assert on it fires only where a member
 * template that names it is used. */
template <typename D>
struct NotInDeviceApi : std::false_type {};

/* Out-of-line helpers of the runtime (src/tensor.cpp); each faults. */
[[noreturn]] void fault_out_of_range(const char* kind_prefix, const char* type_name, int rank,
                                     int64_t offset, int64_t count, int64_t numel);
[[noreturn]] void fault_array_index(size_t index, size_t size);
void check_accessor(const TensorImpl* impl, ScalarType want, const char* type_name, int rank);
void check_stream(const TensorImpl* impl, ScalarType want, const char* type_name, const char* kind);
void tcm_transfer(const TensorImpl* impl, ScalarType want, const char* type_name, void* tcm,
                  size_t offset, size_t n, bool to_tcm);
void destroy_tensor_impl(TensorImpl* impl);
/* A stream accessor opens (4 KiB of the TCM pool, or nullptr when full;
 * checks the coherence policy) and closes.  A write stream's buffer is the
 * TCM block, or a runtime block when it is null (stream_buffer); its count
 * elements from tensor element `first` reach memory by stream_flush. */
void* stream_open(const TensorImpl* impl, bool write, const char* kind, const char* type_name);
void* stream_buffer(void* tcm_block);
void stream_flush(const TensorImpl* impl, const void* buf, int64_t first, int64_t count);
void stream_close(const TensorImpl* impl, bool write, void* tcm_block, void* buf);
[[noreturn]] void fault_stream_closed(const char* kind, const char* type_name);
[[noreturn]] void fault_undefined_tensor(const char* what);
}  // namespace detail

/* IntArrayRef -- a list of at most 8 sizes, BY VALUE (PyTorch's is a
 * non-owning ArrayRef; owning a copy lets a brace list of any one integer
 * type convert, e.g. {num_elem} with a size_t num_elem).  A longer list
 * keeps its true size() so a factory can fault on it. */
class IntArrayRef {
 public:
    IntArrayRef() : size_(0) {}
    template <typename T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
    IntArrayRef(std::initializer_list<T> l) : size_(0) {
        for (T v : l) push(int64_t(v));
    }
    IntArrayRef(std::initializer_list<int64_t> l) : size_(0) {
        for (int64_t v : l) push(v);
    }
    template <typename T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
    IntArrayRef(const std::vector<T>& v) : size_(0) {
        for (T x : v) push(int64_t(x));
    }
    IntArrayRef(const int64_t* data, size_t n) : size_(0) {
        for (size_t i = 0; i < n; ++i) push(data[i]);
    }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    int64_t operator[](size_t i) const {
        if (i >= size_ || i >= kMaxTensorDims) detail::fault_array_index(i, size_);
        return data_[i];
    }
    const int64_t* data() const { return data_; }
    const int64_t* begin() const { return data_; }
    const int64_t* end() const { return data_ + (size_ < kMaxTensorDims ? size_ : kMaxTensorDims); }
    int64_t front() const { return (*this)[0]; }
    int64_t back() const { return (*this)[size_ - 1]; }
    std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
    friend bool operator==(const IntArrayRef& a, const IntArrayRef& b) {
        if (a.size_ != b.size_) return false;
        for (size_t i = 0; i < a.size_ && i < kMaxTensorDims; ++i)
            if (a.data_[i] != b.data_[i]) return false;
        return true;
    }
    friend bool operator!=(const IntArrayRef& a, const IntArrayRef& b) { return !(a == b); }

 private:
    void push(int64_t v) {
        if (size_ < kMaxTensorDims) data_[size_] = v;
        ++size_;
    }
    int64_t data_[kMaxTensorDims] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t size_;
};

/* TensorOptions -- only the dtype matters (docs/kernel-api.md "Making
 * tensors": dtype must be given; other options ignored). */
class TensorOptions {
 public:
    TensorOptions() : has_dtype_(false), dtype_(ScalarType::Undefined) {}
    TensorOptions(ScalarType t) : has_dtype_(true), dtype_(t) {}
    TensorOptions dtype(ScalarType t) const { TensorOptions o(*this); o.has_dtype_ = true; o.dtype_ = t; return o; }
    TensorOptions dtype(TypeMeta t) const { return dtype(t.toScalarType()); }
    TypeMeta dtype() const { return TypeMeta(dtype_); }
    bool has_dtype() const { return has_dtype_; }
    TensorOptions requires_grad(bool) const { return *this; }  /* ignored */
 private:
    bool has_dtype_;
    ScalarType dtype_;
};

/* The one object behind every tensor handle.  Fields are public for the
 * inline accessors; only the runtime creates or mutates them. */
struct TensorImpl {
    int32_t refcount;
    ScalarType dtype;
    bool owns_storage;      /* true: scratch storage freed with the last handle */
    int32_t ndim;
    int64_t numel;
    int64_t sizes[kMaxTensorDims];
    int64_t strides[kMaxTensorDims];  /* contiguous, in elements */
    void* data;             /* host pointer of element 0 */
    uint64_t device_addr;   /* device (HBM / scratch) address of element 0 */
    size_t nbytes;
    uint32_t epoch;         /* launch epoch the scratch storage belongs to */
    AccessorCoherencePolicy coherence;
};

namespace detail {
/* A counted reference to a TensorImpl, for accessors that outlive the
 * expression that made them. */
class ImplRef {
 public:
    explicit ImplRef(TensorImpl* p) : p_(p) { if (p_) ++p_->refcount; }
    ImplRef(const ImplRef& o) : p_(o.p_) { if (p_) ++p_->refcount; }
    ImplRef(ImplRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    ImplRef& operator=(ImplRef o) noexcept { std::swap(p_, o.p_); return *this; }
    ~ImplRef() { if (p_ && --p_->refcount == 0) destroy_tensor_impl(p_); }
    TensorImpl* get() const { return p_; }
 private:
    TensorImpl* p_;
};

}  // namespace detail
}  // namespace c10

#include "torch/detail/stream_accessor.h"

namespace c10 {

namespace detail {
/* What every level of a standard accessor holds: the tensor's element 0,
 * this level's flattened origin, the remaining sizes and strides (elements),
 * and the tensor's numel and rank for the bounds check and its message. */
template <typename T>
class AccessorBase {
 public:
    AccessorBase(T* base, int64_t origin, const int64_t* sizes, const int64_t* strides,
                 int64_t numel, int rank)
        : base_(base), origin_(origin), sizes_(sizes), strides_(strides), numel_(numel), rank_(rank) {}
    const int64_t* sizes() const { return sizes_; }
    const int64_t* strides() const { return strides_; }
    int64_t size(size_t d) const { return sizes_[d]; }
    int64_t stride(size_t d) const { return strides_[d]; }
 protected:
    T* base_;
    int64_t origin_;
    const int64_t* sizes_;
    const int64_t* strides_;
    int64_t numel_;
    int rank_;
};
}  // namespace detail

/* Standard accessor (docs/kernel-api.md "Accessors and memory"): chained
 * operator[]; T is const-qualified for a read-only accessor. */
template <typename T, size_t N>
class TensorAccessor : public detail::AccessorBase<T> {
 public:
    using detail::AccessorBase<T>::AccessorBase;
    TensorAccessor<T, N - 1> operator[](int64_t i) const {
        return TensorAccessor<T, N - 1>(this->base_, this->origin_ + i * this->strides_[0],
                                        this->sizes_ + 1, this->strides_ + 1, this->numel_,
                                        this->rank_);
    }
};

template <typename T>
class TensorAccessor<T, 1> : public detail::AccessorBase<T> {
 public:
    using detail::AccessorBase<T>::AccessorBase;
    /* Checked: the flattened offset must lie in [0, numel). */
    T& operator[](int64_t i) const {
        const int64_t off = this->origin_ + i * this->strides_[0];
        if (off < 0 || off >= this->numel_)
            detail::fault_out_of_range("accessor", ElementType<T>::name(), this->rank_, off, 1,
                                       this->numel_);
        return this->base_[off];
    }
};

}  // namespace c10

namespace at {

using c10::IntArrayRef;
using c10::Scalar;
using c10::ScalarType;
using c10::TensorAccessor;
using c10::TensorImpl;
using c10::TensorOptions;
using c10::TypeMeta;
using c10::Q7PtrType;
using c10::AccessorCoherencePolicy;
using c10::ReadStreamAccessor;
using c10::WriteStreamAccessor;

class Tensor;

/* TCM accessor, read-only form (docs/kernel-api.md: tcm_accessor() is read-only
 * from a const tensor): only tensor_to_tcm.  Offsets index the tensor as if
 * flattened; [offset, offset + n) must lie in [0, numel). */
class ConstTcmAccessor {
 public:
    explicit ConstTcmAccessor(TensorImpl* impl);
    ConstTcmAccessor(const ConstTcmAccessor& o);
    ConstTcmAccessor& operator=(const ConstTcmAccessor& o);
    ~ConstTcmAccessor();
    /* Copy n elements starting at tensor element `offset` into tcm[0..n). */
    template <typename T>
    void tensor_to_tcm(T* tcm, size_t offset, size_t n) const {
        static_assert(!std::is_const<T>::value, "tensor_to_tcm writes into the TCM buffer");
        c10::detail::tcm_transfer(impl_, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(),
                                  tcm, offset, n, true);
    }
 protected:
    TensorImpl* impl_;  /* holds one reference */
};

/* Writable TCM accessor: also tcm_to_tensor. */
class TcmAccessor : public ConstTcmAccessor {
 public:
    explicit TcmAccessor(TensorImpl* impl) : ConstTcmAccessor(impl) {}
    /* Copy tcm[0..n) into tensor elements [offset, offset + n). */
    template <typename T>
    void tcm_to_tensor(const T* tcm, size_t offset, size_t n) const {
        c10::detail::tcm_transfer(impl_, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(),
                                  const_cast<T*>(tcm), offset, n, false);
    }
};

/* at::Tensor -- an intrusive refcounted handle (docs/kernel-api.md "Tensor
 * members").  Read-only access from a const Tensor: accessor() returns
 * TensorAccessor<const T,N>, tcm_accessor() a ConstTcmAccessor, and fill_ is
 * non-const. */
class Tensor {
 public:
    Tensor() noexcept : impl_(nullptr) {}
    /* Adopts one reference of impl (runtime use). */
    explicit Tensor(TensorImpl* adopt) noexcept : impl_(adopt) {}
    Tensor(const Tensor& o) noexcept : impl_(o.impl_) { if (impl_) ++impl_->refcount; }
    Tensor(Tensor&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
    Tensor& operator=(const Tensor& o) noexcept {
        if (o.impl_) ++o.impl_->refcount;
        release();
        impl_ = o.impl_;
        return *this;
    }
    Tensor& operator=(Tensor&& o) noexcept {
        if (this != &o) { release(); impl_ = o.impl_; o.impl_ = nullptr; }
        return *this;
    }
    ~Tensor() { release(); }

    int64_t numel() const { return impl("numel")->numel; }
    int64_t dim() const { return impl("dim")->ndim; }
    IntArrayRef sizes() const { const TensorImpl* p = impl("sizes"); return IntArrayRef(p->sizes, size_t(p->ndim)); }
    /* The shipped marshalling ABI's members (docs/kernel-api.md "Tensor
     * members"): the strides (contiguous, in elements) and the storage's
     * Q7PtrType. */
    IntArrayRef strides() const { const TensorImpl* p = impl("strides"); return IntArrayRef(p->strides, size_t(p->ndim)); }
    c10::Q7PtrType q7_data_ptr() const;
    ScalarType scalar_type() const { return impl("scalar_type")->dtype; }
    TypeMeta dtype() const { return TypeMeta(scalar_type()); }

#ifdef GPSIMD_RUNTIME_INTERNAL
    /* The runtime's own (its sources define GPSIMD_RUNTIME_INTERNAL). */
    bool defined() const { return impl_ != nullptr; }
    TensorImpl* unsafeGetTensorImpl() const { return impl_; }
#else
    /* PyTorch members the device's Tensor does not have: a kernel (or shape
     * function) naming one fails to compile with this message. */
#define GPSIMD_NOT_IN_DEVICE_API_(ret, name, params, what)                                               \
    template <typename D_ = void>                                                                      \
    ret name params const {                                                                            \
        static_assert(c10::detail::NotInDeviceApi<D_>::value,                                          \
                      what " is not in the device's API (docs/kernel-api.md \"Tensor members\")");        \
        using R_ = ret;                                                                                \
        return R_();                                                                                   \
    }
    GPSIMD_NOT_IN_DEVICE_API_(bool, defined, (), "Tensor::defined()")
    GPSIMD_NOT_IN_DEVICE_API_(int64_t, ndimension, (), "Tensor::ndimension() (use dim())")
    GPSIMD_NOT_IN_DEVICE_API_(int64_t, size, (int64_t), "Tensor::size(d) (use sizes()[d])")
    GPSIMD_NOT_IN_DEVICE_API_(int64_t, stride, (int64_t), "Tensor::stride(d) (use strides()[d])")
    GPSIMD_NOT_IN_DEVICE_API_(TensorOptions, options, (), "Tensor::options() (use scalar_type())")
    GPSIMD_NOT_IN_DEVICE_API_(size_t, element_size, (), "Tensor::element_size()")
    GPSIMD_NOT_IN_DEVICE_API_(size_t, itemsize, (), "Tensor::itemsize()")
    GPSIMD_NOT_IN_DEVICE_API_(size_t, nbytes, (), "Tensor::nbytes()")
    GPSIMD_NOT_IN_DEVICE_API_(TensorImpl*, unsafeGetTensorImpl, (), "Tensor::unsafeGetTensorImpl()")
#undef GPSIMD_NOT_IN_DEVICE_API_
#endif

    /* Fill every element with v converted to the tensor's dtype. */
    Tensor& fill_(const Scalar& v);

    /* Standard accessor, writable from a non-const tensor. */
    template <typename T, size_t N>
    TensorAccessor<T, N> accessor() & {
        static_assert(N > 0, "accessor() needs N >= 1");
        TensorImpl* p = impl("accessor");
        c10::detail::check_accessor(p, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(), int(N));
        return TensorAccessor<T, N>(static_cast<T*>(p->data), 0, p->sizes, p->strides, p->numel, int(N));
    }
    /* Read-only from a const tensor: writes through it do not compile. */
    template <typename T, size_t N>
    TensorAccessor<const T, N> accessor() const& {
        static_assert(N > 0, "accessor() needs N >= 1");
        TensorImpl* p = impl("accessor");
        c10::detail::check_accessor(p, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(), int(N));
        return TensorAccessor<const T, N>(static_cast<const T*>(p->data), 0, p->sizes, p->strides,
                                          p->numel, int(N));
    }
    template <typename T, size_t N>
    TensorAccessor<T, N> accessor() && = delete;  /* would dangle, as in PyTorch */

    /* Stream accessors: reading is allowed from a const tensor, writing not. */
    template <typename T>
    ReadStreamAccessor<T> read_stream_accessor() const {
        TensorImpl* p = impl("read_stream_accessor");
        c10::detail::check_stream(p, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(), "read_stream_accessor");
        return ReadStreamAccessor<T>(p);
    }
    template <typename T>
    WriteStreamAccessor<T> write_stream_accessor() {
        TensorImpl* p = impl("write_stream_accessor");
        c10::detail::check_stream(p, c10::ElementType<T>::scalar_type, c10::ElementType<T>::name(), "write_stream_accessor");
        return WriteStreamAccessor<T>(p);
    }
    AccessorCoherencePolicy get_accessor_coherence_policy() const { return impl("get_accessor_coherence_policy")->coherence; }
    void set_accessor_coherence_policy(AccessorCoherencePolicy p) { impl("set_accessor_coherence_policy")->coherence = p; }

    TcmAccessor tcm_accessor() & { return TcmAccessor(impl("tcm_accessor")); }
    ConstTcmAccessor tcm_accessor() const& { return ConstTcmAccessor(impl("tcm_accessor")); }

 private:
    TensorImpl* impl(const char* what) const {
        if (!impl_) c10::detail::fault_undefined_tensor(what);
        return impl_;
    }
    void release() noexcept {
        if (impl_ && --impl_->refcount == 0) c10::detail::destroy_tensor_impl(impl_);
        impl_ = nullptr;
    }
    TensorImpl* impl_;
};

}  // namespace at

#endif  // GPSIMD_TORCH_DETAIL_TENSOR_H
