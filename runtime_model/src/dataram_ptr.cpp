/*
 * dataram_ptr.cpp -- what a pointer given as dataram points to, when it is
 * not in the dataram window (docs/kernel-api.md "Accessors and memory").
 *
 * neuron_memcpy's `void*` side and the buffer of tensor_to_tcm /
 * tcm_to_tensor are the core's local memory: the dataram window
 * [0x80000, 0x90000) (tcm_malloc, neuron_dataram_allocate) or the
 * launcher's default stack, which the device keeps there (a local array).
 * A static or global variable, a malloc / new block, HBM (a tensor's
 * storage, neuron_hbm_allocate, neuron_translate) or a stack moved into
 * device memory (a stack_size larger than the default) is not: on the
 * device the transfer goes to the wrong memory.  The host has them all in
 * one address space, so the model names which one it was.
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <dlfcn.h>
#include <stdio.h>

#include "runtime.h"

namespace gpsimd_rt {

/* Does host pointer p lie in one of the binding's HBM regions or the
 * scratch window? */
static bool in_hbm(const char* p) {
    CoreState& c = core();
    if (!c.bound) return false;
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        const char* h = reinterpret_cast<const char*>(static_cast<uintptr_t>(r.host));
        if (p >= h && uint64_t(p - h) < r.size) return true;
    }
    const char* s = reinterpret_cast<const char*>(static_cast<uintptr_t>(c.binding.scratch_host));
    return p >= s && uint64_t(p - s) < scratch_size();
}

void fault_outside_dataram(const void* host, uint64_t nbytes, const char* what) {
    const char* p = static_cast<const char*>(host);
    char kind[160];
    Dl_info info;
    if (stack_place(p) == 2)
        snprintf(kind, sizeof kind, "a local variable on a %u-byte stack, which the device keeps in device memory "
                 "(only the default %u-byte stack is in the core's local memory)", stack_size_of_launch(),
                 unsigned(GPSIMD_DEFAULT_STACK_SIZE));
    else if (in_hbm(p))
        snprintf(kind, sizeof kind, "HBM (a tensor's storage, neuron_hbm_allocate or neuron_translate)");
    else if (dladdr(host, &info) && info.dli_fbase)
        snprintf(kind, sizeof kind, "a static or global variable (the kernel's loaded object)");
    else
        snprintf(kind, sizeof kind, "the heap or other memory (malloc, new)");
    gpsimd_fault(GPSIMD_FAULT_DATARAM,
                 "%s of %llu bytes: the pointer is %s, not dataram: it must lie in the dataram window "
                 "[0x%x, 0x%x) (tcm_malloc, neuron_dataram_allocate) or on the default stack", what,
                 (unsigned long long)nbytes, kind, unsigned(GPSIMD_DATARAM_BASE),
                 unsigned(GPSIMD_DATARAM_BASE + GPSIMD_DATARAM_SIZE));
}

}  // namespace gpsimd_rt
