"""The per-core linker specs (LSPs) and the names of linked objects.

the Neuron SDK's build driver, build_custom_op.py: a multicore library is linked eight times, once per
core against ``lsp_fll_load_cpu<i>`` (scratch window origin ``0x84000000 +
i * 0x200000``, 2 MiB), into ``<base>_cpu<i>.so`` (the ``xxx_cpuX.so``
naming contract); a single-core library once against
``lsp_fll_load_cpu_single`` (32 MiB at 0x84000000) into ``<base>.so``. The
numbers are ``gpsimd_device.limits`` (abi.h).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .limits import NUM_CORES, SCRATCH_BASE, SCRATCH_CORE_SIZE, SCRATCH_SINGLE_SIZE

__all__ = ["LinkerSpec", "MULTICORE_LSPS", "SINGLE_LSP", "linker_specs", "linked_names",
           "lsp_name", "scratch_origin", "scratch_size"]


def lsp_name(core: Optional[int]) -> str:
    """``lsp_fll_load_cpu<i>``, or ``lsp_fll_load_cpu_single`` for None."""
    return "lsp_fll_load_cpu_single" if core is None else f"lsp_fll_load_cpu{core}"


def scratch_origin(core: Optional[int]) -> int:
    """Device address (bytes) of a core's HBM scratch window.

    Raises:
        ValueError: core outside 0..7.
    """
    if core is None:
        return SCRATCH_BASE
    if not 0 <= core < NUM_CORES:
        raise ValueError(f"core {core} outside 0..{NUM_CORES - 1}")
    return SCRATCH_BASE + core * SCRATCH_CORE_SIZE


def scratch_size(core: Optional[int]) -> int:
    """Bytes of a core's scratch window: 2 MiB multicore, 32 MiB single-core."""
    return SCRATCH_SINGLE_SIZE if core is None else SCRATCH_CORE_SIZE


@dataclass(frozen=True)
class LinkerSpec:
    """One linker spec: ``core`` 0..7, or None for the single-core one;
    ``scratch_origin`` / ``scratch_size`` the core's HBM scratch window in
    bytes."""

    name: str
    core: Optional[int]
    scratch_origin: int
    scratch_size: int


def _spec(core: Optional[int]) -> LinkerSpec:
    return LinkerSpec(lsp_name(core), core, scratch_origin(core), scratch_size(core))


MULTICORE_LSPS: Tuple[LinkerSpec, ...] = tuple(_spec(i) for i in range(NUM_CORES))
SINGLE_LSP: LinkerSpec = _spec(None)


def linker_specs(multicore: bool) -> Tuple[LinkerSpec, ...]:
    """The LSPs a library links against: eight for multicore, one otherwise."""
    return MULTICORE_LSPS if multicore else (SINGLE_LSP,)


def linked_names(base: str, multicore: bool) -> Tuple[str, ...]:
    """Base names of the linked objects, without ``.so``: ``<base>_cpu0`` ..
    ``<base>_cpu7`` for multicore, ``<base>`` otherwise."""
    if multicore:
        return tuple(f"{base}_cpu{i}" for i in range(NUM_CORES))
    return (base,)
