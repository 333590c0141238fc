/*
 * custom_op.h -- the runtime device calls a kernel may use
 * (docs/kernel-api.md "Headers"; how the marshalling calls them:
 * ARCHITECTURE.md "The device's marshalling").  C++ linkage:
 * the device's neuron_translate is _Z16neuron_translatePvy, i.e.
 * neuron_translate(void*, unsigned long long).
 *
 * Address spaces: a uint64_t / unsigned long long is a DEVICE address (HBM
 * regions the model mapped, or this core's scratch window); a void* is a
 * host pointer into the core's dataram window (neuron_dataram_allocate) or
 * one returned by neuron_translate.
 */
#ifndef GPSIMD_CUSTOM_OP_H
#define GPSIMD_CUSTOM_OP_H

#include <stddef.h>
#include <stdint.h>

/* The translation context of this core (never null).  The marshalling
 * fetches it before every neuron_translate. */
void* neuron_translate_ctx();

/* Host pointer of device address hbm_addr (an HBM region of the binding or
 * the scratch window).  An unmapped address is a GPSIMD_FAULT_UNMAPPED
 * fault naming it.  (The spec's pseudo code writes the arguments the other
 * way round; the mangled name fixes (ctx, addr).) */
void* neuron_translate(void* ctx, unsigned long long hbm_addr);

/* nbytes from this core's HBM scratch window (first fit, 64-byte aligned);
 * returns the device address.  A full window is a GPSIMD_FAULT_SCRATCH_FULL
 * fault naming the request and the window.  Everything allocated is
 * released at the next launch. */
uint64_t neuron_hbm_allocate(size_t nbytes);
/* (No neuron_hbm_deallocate: the device's custom_op.h has none; every
 * block is released at the next launch.) */

/* neuron_dataram_allocate(want, &stage, align), as the writeback calls it:
 * nbytes of the 48 KiB
 * dataram staging area (the 64 KiB window minus the 16 KiB TCM pool).
 * Returns 0 and sets *ptr, or returns -1 and sets *ptr = nullptr when no
 * free block fits.  alignment: a power of two (0 means 4). */
int neuron_dataram_allocate(uint32_t nbytes, void** ptr, uint32_t alignment = 4);
/* Release a block; a pointer not from neuron_dataram_allocate is a
 * GPSIMD_FAULT_DATARAM fault.  Returns 0. */
int neuron_dataram_deallocate(void* ptr);
/* neuron_dataram_max_free_space(&bytes, ...): the largest block
 * neuron_dataram_allocate could return now at this alignment.  Returns 0. */
int neuron_dataram_max_free_space(uint32_t* nbytes, uint32_t alignment = 4);

/* The two directions (the writeback stages through dataram with both);
 * the void* side is dataram, the uint64_t side is
 * HBM, the first argument is the destination.  The HBM range must be mapped
 * (GPSIMD_FAULT_UNMAPPED otherwise).  Return 0. */
int neuron_memcpy(void* dataram_dst, uint64_t hbm_src, size_t nbytes);   /* HBM -> dataram */
int neuron_memcpy(uint64_t hbm_dst, const void* dataram_src, size_t nbytes);  /* dataram -> HBM */

#endif  // GPSIMD_CUSTOM_OP_H
