/*
 * gpsimd_host/lsp.h -- the host form of a core's linker spec (LSP).
 *
 * On the device, `-mlsp=lsp_fll_load_cpu<i|_single>` fixes the core's HBM
 * scratch window at link time (ARCHITECTURE.md "The vendor driver's commands": origin
 * 0x84000000 + i * 0x200000, 2 MiB per core multicore; 32 MiB single-core).
 * On the host (ARCHITECTURE.md), each core object is linked
 * with one tiny generated translation unit that DEFINES the constant
 * declared below; the runtime (libneuroncustomop.a) only DECLARES it, so a
 * core object carries its own identity and gpsimd_bind_core() can check it.
 *
 * The build generates, for core 3 of a multicore library:
 *
 *     #include "gpsimd_host/lsp.h"
 *     GPSIMD_DEFINE_LSP(3u, 0x84000000ull + 3ull * 0x200000ull, 0x200000ull,
 *                       "lsp_fll_load_cpu3");
 *
 * and for a single-core library:
 *
 *     #include "gpsimd_host/lsp.h"
 *     GPSIMD_DEFINE_LSP(GPSIMD_LSP_SINGLE, 0x84000000ull, 0x2000000ull,
 *                       "lsp_fll_load_cpu_single");
 *
 * which expands to exactly
 *
 *     extern "C" const gpsimd_lsp_info gpsimd_linker_spec =
 *         {3u, 0u, 0x84000000ull + 3ull * 0x200000ull, 0x200000ull, "lsp_fll_load_cpu3"};
 *
 * (the TU must be compiled as C++; in C write the same initializer without
 * `extern "C"`).  Exactly one definition per linked core object.
 */
#ifndef GPSIMD_HOST_LSP_H
#define GPSIMD_HOST_LSP_H

#include "gpsimd_host/abi.h"

#ifdef __cplusplus
extern "C" const gpsimd_lsp_info gpsimd_linker_spec;
#define GPSIMD_DEFINE_LSP(core_id, origin, size, name)                      \
    extern "C" const gpsimd_lsp_info gpsimd_linker_spec =                   \
        {(core_id), 0u, (origin), (size), name}
#else
extern const gpsimd_lsp_info gpsimd_linker_spec;
#define GPSIMD_DEFINE_LSP(core_id, origin, size, name)                      \
    const gpsimd_lsp_info gpsimd_linker_spec =                              \
        {(core_id), 0u, (origin), (size), name}
#endif

#endif /* GPSIMD_HOST_LSP_H */
