/*
 * stack_switch.hpp -- the launcher half of the stack-switch handoff
 * (the Neuron SDK's build driver, build_custom_op.py: stack_switch.hpp:4 switched_stack,
 * stack_switch.hpp:16 STACK_SIZE, stack_switch.hpp:20
 * switch_stack_or_call_wrapper).
 *
 * Host model: switch_stack_or_call_wrapper always runs the wrapper on a
 * fresh stack of stack_size * binding.stack_scale bytes (ucontext) with a
 * PROT_NONE guard below it, and switchBack() returns to the launcher (on
 * the device the wrapper ends with `asm("j switchBack")`; the generated host
 * text calls switchBack() instead).
 */
#ifndef GPSIMD_STACK_SWITCH_HPP
#define GPSIMD_STACK_SWITCH_HPP

#include <stdint.h>

/* True while a wrapper runs on the switched stack (set by the launcher). */
extern bool switched_stack;

/* The launcher's default stack size in device bytes; -DSTACK_SIZE=N
 * overrides it for the translation unit of the generated wrapper. */
#ifndef STACK_SIZE
#define STACK_SIZE 4196
#endif

/* Run the void() function at wrapper_fn_ptr on a switched stack of
 * stack_size device bytes; returns a gpsimd_status (abi.h):
 * GPSIMD_STATUS_OK, or GPSIMD_STATUS_FAULT with the report filled. */
int switch_stack_or_call_wrapper(uintptr_t wrapper_fn_ptr, uint32_t stack_size = STACK_SIZE);

/* Return from the switched stack to the launcher (never returns). */
[[noreturn]] void switchBack();

#endif  // GPSIMD_STACK_SWITCH_HPP
