/*
 * torch/torch.h -- the tensor library a GPSIMD kernel compiles against
 * (docs/kernel-api.md "Headers"): a host implementation of the
 * small part of ATen/c10 the device offers, at the level of PyTorch 1.12,
 * C++14.  Anything outside that subset is simply not declared, so a kernel
 * that uses it fails to compile.
 *
 * Namespaces: c10 (ScalarType, Scalar, Half, BFloat16, Float8_*, TypeMeta,
 * IntArrayRef), at (Tensor, TensorOptions, factories, element-wise ops), and
 * torch, which exposes all of at (torch::Tensor, torch::kFloat,
 * torch::zeros, torch::TensorOptions().dtype(...)) plus
 * torch::neuron::tcm_malloc / tcm_free.
 */
#ifndef GPSIMD_TORCH_TORCH_H
#define GPSIMD_TORCH_TORCH_H

#include <cstddef>
#include <cstdint>

#include "torch/detail/scalar_type.h"
#include "torch/detail/scalar.h"
#include "torch/detail/tensor.h"
#include "torch/detail/ops.h"

namespace at {
using c10::BFloat16;
using c10::Half;
using c10::Float8_e3m4;
using c10::Float8_e4m3;
using c10::Float8_e5m2;
using c10::kByte;
using c10::kChar;
using c10::kShort;
using c10::kInt;
using c10::kLong;
using c10::kHalf;
using c10::kFloat;
using c10::kBFloat16;
using c10::kUInt16;
using c10::kUInt32;
using c10::kUInt64;
using c10::kFloat8_e3m4;
using c10::kFloat8_e4m3;
using c10::kFloat8_e5m2;
using c10::elementSize;
using c10::isFloatingType;
using c10::isIntegralType;
using c10::toString;

/* Shorthand for TensorOptions().dtype(t). */
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
}  // namespace at

namespace torch {
using namespace at;

namespace neuron {
using c10::AccessorCoherencePolicy;
using c10::COHERENT;
using c10::INCOHERENT_VERBOSE;
using c10::INCOHERENT_QUIET;

/* docs/kernel-api.md "Accessors and memory": the core's 16 KiB TCM pool (the
 * first 16 KiB of the dataram window).  tcm_malloc returns nullptr when the
 * pool cannot fit nbytes; tcm_free of a pointer not from tcm_malloc, or a
 * second tcm_free of the same pointer, is a GPSIMD_FAULT_TCM fault. */
void* tcm_malloc(size_t nbytes);
void tcm_free(void* ptr);
}  // namespace neuron
}  // namespace torch

/* docs/kernel-api.md / the device ABI (gpsimd_host/abi.h): the op's output tensor,
 * writable, over the output descriptor's storage.  Once called, the value
 * the kernel returns is ignored (the one-claim protocol). */
at::Tensor get_dst_tensor();

#endif  // GPSIMD_TORCH_TORCH_H
