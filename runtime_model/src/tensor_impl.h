/*
 * tensor_impl.h -- runtime-internal tensor helpers shared by tensor.cpp,
 * factories.cpp, ops.cpp and wrapper_api.cpp.
 */
#ifndef GPSIMD_TENSOR_IMPL_H
#define GPSIMD_TENSOR_IMPL_H

#include <stdint.h>

#include "torch/torch.h"

#pragma GCC visibility push(hidden)

namespace gpsimd_rt {

/* A tensor over storage the kernel does not own (Q7Deleter::delete_nothing,
 * the device ABI (gpsimd_host/abi.h)): descriptor inputs and the output. */
at::Tensor make_borrowed_tensor(c10::ScalarType dtype, const int64_t* sizes, int ndim, void* host,
                                uint64_t device_addr);

/* A tensor with storage from the scratch window, freed with the last
 * handle; checks the dtype and the device limits (<= 8 dims, each <=
 * 65535).  `who` names the caller in fault messages ("torch::zeros"). */
at::Tensor make_scratch_tensor(const char* who, const c10::IntArrayRef& sizes, c10::ScalarType dtype);

/* Element i of a buffer of dtype t, as double / int64, and back.  Stores
 * convert like Scalar::to<T>() (floats through float, RNE; integers
 * saturate from double, wrap from int64). */
double load_double(c10::ScalarType t, const void* base, int64_t i);
int64_t load_int(c10::ScalarType t, const void* base, int64_t i);
void store_double(c10::ScalarType t, void* base, int64_t i, double v);
void store_int(c10::ScalarType t, void* base, int64_t i, int64_t v);

/* Fill every element of p with v converted to its dtype (nothing for a
 * meta tensor of a shape function). */
void fill_elements(c10::TensorImpl* p, const c10::Scalar& v);

/* Under GPSIMD_CHECK_COHERENCE, `what` ("accessor<float,1>",
 * "tensor_to_tcm<float>") on a tensor with an open write stream: a
 * COHERENCE fault under COHERENT, a warning under INCOHERENT_VERBOSE
 * (streams.cpp). */
void check_open_write_stream(const c10::TensorImpl* impl, const char* what);

/* "[2, 3]" */
const char* shape_string(const c10::TensorImpl* impl, char* buf, size_t n);

}  // namespace gpsimd_rt

#pragma GCC visibility pop

#endif  // GPSIMD_TENSOR_IMPL_H
