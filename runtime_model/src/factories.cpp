/*
 * factories.cpp -- the tensor factories of torch/detail/ops.h
 * (docs/kernel-api.md "Making tensors", "Limits"): empty, zeros, ones,
 * full, eye.  The dtype must be given and must be one a kernel may create
 * (gpsimd_host/dtypes.h GPSIMD_KERNEL_DTYPES); the storage and the shape
 * limits are make_scratch_tensor's (tensor.cpp).
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <string.h>

#include "gpsimd_host/dtypes.h"
#include "runtime.h"
#include "tensor_impl.h"

using namespace gpsimd_rt;

namespace at {

/* ---- factories (docs/kernel-api.md "Making tensors") ------------------------ */

/* gpsimd_host/dtypes.h GPSIMD_KERNEL_DTYPES: what a kernel may create. */
static bool kernel_creatable(ScalarType t) {
    switch (t) {
#define GPSIMD_KERNEL_DTYPE_CASE_(name, st) case ScalarType::st: return true;
        GPSIMD_KERNEL_DTYPES(GPSIMD_KERNEL_DTYPE_CASE_)
#undef GPSIMD_KERNEL_DTYPE_CASE_
    default: return false;
    }
}
#define GPSIMD_KERNEL_DTYPE_NAME_(name, st) #name ", "
static const char kKernelDtypes[] = GPSIMD_KERNEL_DTYPES(GPSIMD_KERNEL_DTYPE_NAME_);
#undef GPSIMD_KERNEL_DTYPE_NAME_

static ScalarType required_dtype(const char* who, const TensorOptions& o) {
    /* a shape function runs with the host's PyTorch, whose default is float32
     * and which makes every dtype (the output's may be any descriptor dtype) */
    if (shape_call_active()) return o.has_dtype() ? o.dtype().toScalarType() : ScalarType::Float;
    if (!o.has_dtype())
        gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "%s: TensorOptions without a dtype (the device requires one)", who);
    const ScalarType t = o.dtype().toScalarType();
    if (c10::elementSize(t) != 0 && !kernel_creatable(t))
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "%s: a kernel cannot create %s %s tensor on the device (it may create %.*s)",
                     who, article(c10::dtype_name(t)), c10::dtype_name(t), int(sizeof kKernelDtypes) - 3, kKernelDtypes);
    return t;
}

/* docs/kernel-api.md "Making tensors": uninitialised.  Under
 * GPSIMD_CHECK_POISON_EMPTY the storage is filled with the binding's poison
 * byte (the same byte as the pass's output copies), so an element never
 * written that reaches the output through the copy path (ARCHITECTURE.md
 * "The device's marshalling") is seen by
 * the model as never written. */
Tensor empty(IntArrayRef sizes, const TensorOptions& options) {
    Tensor t = make_scratch_tensor("torch::empty", sizes, required_dtype("torch::empty", options));
    TensorImpl* p = t.unsafeGetTensorImpl();
    if (p->nbytes && check_enabled(GPSIMD_CHECK_POISON_EMPTY)) {
        memset(p->data, core().binding.poison, p->nbytes);
        report_flag(GPSIMD_REPORT_EMPTY_USED);
    }
    return t;
}

Tensor zeros(IntArrayRef sizes, const TensorOptions& options) {
    Tensor t = make_scratch_tensor("torch::zeros", sizes, required_dtype("torch::zeros", options));
    TensorImpl* p = t.unsafeGetTensorImpl();
    if (p->nbytes && p->data) memset(p->data, 0, p->nbytes);
    return t;
}

Tensor ones(IntArrayRef sizes, const TensorOptions& options) {
    Tensor t = make_scratch_tensor("torch::ones", sizes, required_dtype("torch::ones", options));
    fill_elements(t.unsafeGetTensorImpl(), Scalar(1));
    return t;
}

Tensor full(IntArrayRef sizes, const Scalar& fill_value, const TensorOptions& options) {
    Tensor t = make_scratch_tensor("torch::full", sizes, required_dtype("torch::full", options));
    fill_elements(t.unsafeGetTensorImpl(), fill_value);
    return t;
}

Tensor eye(int64_t n, const TensorOptions& options) { return eye(n, n, options); }

Tensor eye(int64_t n, int64_t m, const TensorOptions& options) {
    Tensor t = make_scratch_tensor("torch::eye", IntArrayRef({n, m}), required_dtype("torch::eye", options));
    TensorImpl* p = t.unsafeGetTensorImpl();
    if (!p->data) return t;   /* (a meta tensor of a shape function) */
    if (p->nbytes) memset(p->data, 0, p->nbytes);
    for (int64_t i = 0; i < n && i < m; ++i) store_int(p->dtype, p->data, i * m + i, 1);
    return t;
}

}  // namespace at
