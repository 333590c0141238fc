/*
 * neuron/wrapper_api.h -- what the generated wrapper.cpp includes
 * (ARCHITECTURE.md "The generated wrapper"); what each entry does, in the
 * order of one launch: ARCHITECTURE.md "The device's marshalling".  The
 * customop_* entries have C++ linkage, as in the shipped wrapper_api.o.
 */
#ifndef GPSIMD_NEURON_WRAPPER_API_H
#define GPSIMD_NEURON_WRAPPER_API_H

#include <stdint.h>

#include "torch/torch.h"
#include "stack_switch.hpp"

/* Clear the get_dst_tensor_called flag, bind the argument parser to
 * the core's argument stream.  has_return is always true from the codegen. */
void customop_setup(bool has_return);
/* The next argument as an input tensor borrowing the descriptor's storage. */
at::Tensor customop_next_tensor();
/* The next argument as a boxed Scalar (exactly one element). */
at::Scalar customop_next_scalar();
/* The next argument's first element read raw as int / long long / float. */
int customop_next_int();
long long customop_next_longlong();
float customop_next_float();
/* Write t back to the output descriptor (no-op after get_dst_tensor). */
void customop_return_tensor(at::Tensor& t);
/* Drain the DMA queues. */
void customop_cleanup();
/* The output, to write in place (also declared in torch/torch.h). */
at::Tensor get_dst_tensor();

/* The launcher type the registration trio returns (wrapper_api.h:6). */
typedef int (*wrapper_fn)();

/* ---- Argument positions (host model) --------------------------------------
 * The generated wrapper pulls its arguments inside one call expression,
 *     at::Tensor output = axpy( customop_next_tensor(), customop_next_tensor(),
 *                               customop_next_scalar() );
 * and relies on them being evaluated left to right (the Neuron SDK's build driver, build_custom_op.py:
 * "arg #k of the kernel is fed by the k-th customop_next_<type>() call").
 * C++ leaves that order unspecified; the device compiler (clang) goes left
 * to right, but g++ on x86-64/aarch64 evaluates call arguments RIGHT TO
 * LEFT, which would feed the kernel its arguments reversed.
 *
 * So that the generated text stays identical between profiles, this header
 * (which only generated wrappers include) tags every entry with its TEXTUAL
 * position: __COUNTER__ increases with each expansion in the translation
 * unit, customop_setup(...) records the wrapper's base tag, and each
 * customop_next_*() reads argument (tag - base - 1), whatever the order the
 * compiler evaluates them in.  The untagged functions above keep the
 * device's cursor semantics (k-th call reads argument k) for any other
 * caller.  Define GPSIMD_NO_ARG_POSITION_TAGS to get the plain cursor. */
void customop_setup_tagged(bool has_return, unsigned tag);
at::Tensor customop_next_tensor_tagged(unsigned tag);
at::Scalar customop_next_scalar_tagged(unsigned tag);
int customop_next_int_tagged(unsigned tag);
long long customop_next_longlong_tagged(unsigned tag);
float customop_next_float_tagged(unsigned tag);

#ifndef GPSIMD_NO_ARG_POSITION_TAGS
#define customop_setup(has_return) customop_setup_tagged((has_return), __COUNTER__)
#define customop_next_tensor() customop_next_tensor_tagged(__COUNTER__)
#define customop_next_scalar() customop_next_scalar_tagged(__COUNTER__)
#define customop_next_int() customop_next_int_tagged(__COUNTER__)
#define customop_next_longlong() customop_next_longlong_tagged(__COUNTER__)
#define customop_next_float() customop_next_float_tagged(__COUNTER__)
#endif

#endif  // GPSIMD_NEURON_WRAPPER_API_H
