/*
 * torch/detail/ops.h -- the tensor factories and the element-wise operations
 * of docs/kernel-api.md ("Tensor factories", "Element-wise operations").
 *
 * Factories: the dtype must be given (a TensorOptions without one faults
 * with GPSIMD_FAULT_BAD_ARGUMENT); storage comes from the core's HBM scratch
 * window (neuron_hbm_allocate) and is freed with the last handle.  At most 8
 * dims, each at most 65535 (docs/kernel-api.md "Limits"), else GPSIMD_FAULT_SHAPE.
 *
 * Element-wise: no broadcasting (mismatched shapes fault), no type
 * promotion between tensor operands (mismatched dtypes fault).  The
 * allocating form returns the dtype of `self`, except that the
 * floating-point functions (sin.., exp, log.., pow with a floating exponent,
 * div) of an integral tensor return float32, as PyTorch does.  `_out` forms
 * require result to have the operands' shape and convert into its dtype.
 * Bitwise operations need integral tensors.
 */
#ifndef GPSIMD_TORCH_DETAIL_OPS_H
#define GPSIMD_TORCH_DETAIL_OPS_H

#include "torch/detail/tensor.h"

namespace at {

/* ---- factories --------------------------------------------------------- */
Tensor empty(IntArrayRef sizes, const TensorOptions& options);   /* uninitialised */
Tensor zeros(IntArrayRef sizes, const TensorOptions& options);
Tensor ones(IntArrayRef sizes, const TensorOptions& options);
Tensor full(IntArrayRef sizes, const Scalar& fill_value, const TensorOptions& options);
Tensor eye(int64_t n, int64_t m, const TensorOptions& options);  /* n x m, ones on the diagonal */
/* eye(n, opts) is host PyTorch's, not the device's (a shape source gets it
 * from torchneuron/register.h; a kernel must give both sizes). */
template <typename D_ = void>
Tensor eye(int64_t, const TensorOptions&) {
    static_assert(c10::detail::NotInDeviceApi<D_>::value,
                  "torch::eye(n, options) is not in the device's API: it has eye(n, m, options) "
                  "(docs/kernel-api.md \"Making tensors\")");
    return Tensor();
}

/* ---- element-wise, unary ---------------------------------------------- */
#define GPSIMD_UNARY_OP_(name)                           \
    Tensor name(const Tensor& self);                     \
    Tensor& name##_out(Tensor& result, const Tensor& self);
GPSIMD_UNARY_OP_(abs)
GPSIMD_UNARY_OP_(ceil)
GPSIMD_UNARY_OP_(floor)
GPSIMD_UNARY_OP_(sin)
GPSIMD_UNARY_OP_(cos)
GPSIMD_UNARY_OP_(tan)
GPSIMD_UNARY_OP_(log)
GPSIMD_UNARY_OP_(log2)
GPSIMD_UNARY_OP_(log10)
GPSIMD_UNARY_OP_(exp)
GPSIMD_UNARY_OP_(bitwise_not)
#undef GPSIMD_UNARY_OP_

/* pow: tensor^scalar, scalar^tensor, tensor^tensor */
Tensor pow(const Tensor& self, const Scalar& exponent);
Tensor pow(const Scalar& self, const Tensor& exponent);
Tensor pow(const Tensor& self, const Tensor& exponent);
Tensor& pow_out(Tensor& result, const Tensor& self, const Scalar& exponent);
Tensor& pow_out(Tensor& result, const Scalar& self, const Tensor& exponent);
Tensor& pow_out(Tensor& result, const Tensor& self, const Tensor& exponent);

/* clamp(self, min, max): both bounds required (no c10::optional in C++14) */
Tensor clamp(const Tensor& self, const Scalar& min, const Scalar& max);
Tensor& clamp_out(Tensor& result, const Tensor& self, const Scalar& min, const Scalar& max);

/* add/sub: self +/- alpha * other */
Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor add(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& add_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& add_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha = 1);

#define GPSIMD_BINARY_OP_(name)                                                   \
    Tensor name(const Tensor& self, const Tensor& other);                         \
    Tensor name(const Tensor& self, const Scalar& other);                         \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Tensor& other);  \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Scalar& other);
GPSIMD_BINARY_OP_(mul)
GPSIMD_BINARY_OP_(div)
GPSIMD_BINARY_OP_(bitwise_and)
GPSIMD_BINARY_OP_(bitwise_or)
#undef GPSIMD_BINARY_OP_

}  // namespace at

#endif  // GPSIMD_TORCH_DETAIL_OPS_H
