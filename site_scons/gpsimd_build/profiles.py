"""Target profiles: the toolchain facts of each way a library can be built.

``host`` (the default) builds shared objects for this machine with the
project's own runtime (``runtime_model/``), which the emulator loads.
``xtensa`` (issue 6) issues the vendor driver's commands.

Everything that differs between the host and the device in the *generated
text* is in :class:`WrapperDialect`, and nowhere else.
"""

from dataclasses import dataclass
from typing import Tuple

#: Version metadata pinned by the driver (build-front-end.txt §1).
VERSIONS = {
    "version": "0.21.2.0",
    "ulib_to_ucode_version": "1.21.1.0",
    "ulib_to_isa_version": "1.0.2520.0",
}

#: Cores of the SPMD model (build-front-end.txt §6, NUM_CPUS = 8).
NUM_CPUS = 8


@dataclass(frozen=True)
class WrapperDialect:
    """The two places where the host wrapper text must differ from the device.

    ``fnptr_cast``: the type the launcher casts ``<fn>_wrapper`` to. The
    device is a 32-bit core, so the driver casts to ``uint32_t``
    (build-front-end.txt §3c); a 64-bit host would truncate the pointer, so
    the host casts to ``uintptr_t``.

    ``switch_back``: the statement that ends a wrapper that ran on a switched
    stack. The device emits the Xtensa jump ``asm("j switchBack");``
    (§3b/§3c); the host has no such instruction and calls the runtime's
    ``switchBack()``, which returns to the launcher the same way.
    """

    fnptr_cast: str
    switch_back: str


DEVICE_DIALECT = WrapperDialect(fnptr_cast="uint32_t",
                                switch_back='asm("j switchBack");')
HOST_DIALECT = WrapperDialect(fnptr_cast="uintptr_t",
                              switch_back="switchBack();")


@dataclass(frozen=True)
class LinkerSpec:
    """One per-core linker spec (LSP), build-front-end.txt §6.

    ``core`` is 0..7 for the multicore specs and None for the single-core
    one; ``scratch_origin`` / ``scratch_size`` are the core's HBM scratch
    window in bytes (device-api.md "Limits": 0x84000000 + i * 2 MiB, or
    32 MiB single-core).
    """

    name: str
    core: "int | None"
    scratch_origin: int
    scratch_size: int


SCRATCH_BASE = 0x84000000
SCRATCH_CORE_SIZE = 0x200000
SCRATCH_SINGLE_SIZE = 0x2000000

MULTICORE_LSPS: Tuple[LinkerSpec, ...] = tuple(
    LinkerSpec(f"lsp_fll_load_cpu{i}", i, SCRATCH_BASE + i * SCRATCH_CORE_SIZE,
               SCRATCH_CORE_SIZE)
    for i in range(NUM_CPUS))
SINGLE_LSP = LinkerSpec("lsp_fll_load_cpu_single", None, SCRATCH_BASE,
                        SCRATCH_SINGLE_SIZE)


def linker_specs(multicore: bool) -> Tuple[LinkerSpec, ...]:
    """The LSPs a library links against: eight for multicore, one otherwise."""
    return MULTICORE_LSPS if multicore else (SINGLE_LSP,)


def linked_names(base: str, multicore: bool) -> Tuple[str, ...]:
    """Base names of the linked objects, without ``.so``.

    ``<base>_cpu0`` .. ``<base>_cpu7`` for multicore (the ``xxx_cpuX.so``
    naming contract of build-front-end.txt §6), ``<base>`` otherwise.
    """
    if multicore:
        return tuple(f"{base}_cpu{i}" for i in range(NUM_CPUS))
    return (base,)


def lsp_source(spec: LinkerSpec) -> str:
    """C++ text of the host LSP object that carries a core's link-time facts.

    It defines ``gpsimd_linker_spec`` (runtime_model/include/gpsimd_host/abi.h),
    which the host runtime checks against the core it is bound to.
    """
    core = "GPSIMD_LSP_SINGLE" if spec.core is None else f"{spec.core}u"
    return (
        "// WARNING: AUTO GENERATED DO NOT EDIT\n"
        f"// Host linker spec {spec.name}: the link-time identity of one core.\n"
        '#include "gpsimd_host/abi.h"\n'
        'extern "C" const gpsimd_lsp_info gpsimd_linker_spec = {\n'
        f"    {core}, 0u, 0x{spec.scratch_origin:x}ull, 0x{spec.scratch_size:x}ull,\n"
        f'    "{spec.name}"\n'
        "};\n"
    )


#: Host compile flags: the device's (build-front-end.txt §5b) where they
#: mean the same on the host, -O2 for a fast emulator and -fPIC for the
#: loadable object.
HOST_CXXFLAGS = ("-g", "-std=c++14", "-O2", "-Wall", "-Werror", "-fPIC",
                 "-fno-jump-tables")
HOST_LINKFLAGS = ("-shared", "-Wl,-Bsymbolic")
