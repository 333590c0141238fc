"""Device limits and memory map, read from ``gpsimd_host/abi.h``.

Each value is the ``#define GPSIMD_<NAME>`` of that header (the C++ runtime
uses the same lines), with its source:

* cores and windows (docs/kernel-api.md, Limits, the Neuron SDK's build driver, build_custom_op.py):
  ``NUM_CORES`` 8; per-core HBM scratch window ``SCRATCH_BASE`` 0x84000000 +
  i x ``SCRATCH_CORE_SIZE`` (2 MiB) multicore, ``SCRATCH_SINGLE_SIZE``
  (32 MiB) single-core; dataram/TCM window ``DATARAM_BASE`` 0x80000 of
  ``DATARAM_SIZE`` 64 KiB, of which the ``TCM_POOL_SIZE`` 16 KiB pool, 4 KiB
  (``STREAM_TCM_BYTES``) per active stream accessor; ``PRINTF_CAPACITY``
  128 KiB;
* a library (docs/kernel-api.md "Limits", ARCHITECTURE.md "The generated
  wrapper"): at most ``MAX_OPS_PER_LIBRARY`` 10 ops, op names shorter than
  ``MAX_NAME_LENGTH`` 32 characters, the library name
  ``RESERVED_LIBRARY_NAME`` ("builtin") reserved, launcher stack
  ``DEFAULT_STACK_SIZE`` 4196 bytes by default and at most
  ``MAX_STACK_SIZE`` (400 KB);
* a tensor (docs/kernel-api.md "Limits", the shape forms of abi.h): at most
  ``MAX_DIMS_4D`` 4 dimensions of up to ``MAX_DIM_SIZE_4D`` (2**32 - 1) each
  (INLINE_4D), or at most ``MAX_DIMS`` 8 dimensions of at most
  ``MAX_DIM_SIZE`` 65535 each (INLINE_8D); in both cases at most
  ``MAX_ELEMENTS`` (2**32 - 1, the descriptor's u32 ``num_elem``) elements.
  :func:`shape_problem` states the rule once for every Python user;
* the host ABI (abi.h HOST-MODEL): ``MAX_ARGS`` arguments in a stream,
  ``LSP_SINGLE`` the core id of the single-core linker spec.

Units: bytes for sizes and addresses, elements for tensor extents.
"""

from __future__ import annotations

from .headers import HeaderError, defines, header_path

__all__ = [
    "NUM_CORES", "SCRATCH_BASE", "SCRATCH_CORE_SIZE", "SCRATCH_SINGLE_SIZE",
    "DATARAM_BASE", "DATARAM_SIZE", "TCM_POOL_SIZE", "STREAM_TCM_BYTES", "PRINTF_CAPACITY",
    "DEFAULT_STACK_SIZE", "MAX_STACK_SIZE", "MAX_OPS_PER_LIBRARY", "MAX_NAME_LENGTH",
    "RESERVED_LIBRARY_NAME", "MAX_DIMS", "MAX_DIM_SIZE", "MAX_DIMS_4D", "MAX_DIM_SIZE_4D",
    "MAX_ELEMENTS", "MAX_ARGS", "LSP_SINGLE", "ABI", "max_dim_size", "shape_problem",
]

#: Every ``GPSIMD_*`` number or string of abi.h, by name without the prefix.
ABI = defines("abi.h")


def _get(name: str):
    try:
        return ABI[name]
    except KeyError:
        raise HeaderError(f"{header_path('abi.h')}: no #define GPSIMD_{name}") from None


NUM_CORES: int = _get("NUM_CORES")
SCRATCH_BASE: int = _get("SCRATCH_BASE")
SCRATCH_CORE_SIZE: int = _get("SCRATCH_CORE_SIZE")
SCRATCH_SINGLE_SIZE: int = _get("SCRATCH_SINGLE_SIZE")
DATARAM_BASE: int = _get("DATARAM_BASE")
DATARAM_SIZE: int = _get("DATARAM_SIZE")
TCM_POOL_SIZE: int = _get("TCM_POOL_SIZE")
STREAM_TCM_BYTES: int = _get("STREAM_TCM_BYTES")
PRINTF_CAPACITY: int = _get("PRINTF_CAPACITY")
DEFAULT_STACK_SIZE: int = _get("DEFAULT_STACK_SIZE")
MAX_STACK_SIZE: int = _get("MAX_STACK_SIZE")
MAX_OPS_PER_LIBRARY: int = _get("MAX_OPS_PER_LIBRARY")
MAX_NAME_LENGTH: int = _get("MAX_NAME_LENGTH")
RESERVED_LIBRARY_NAME: str = _get("RESERVED_LIBRARY_NAME")
MAX_DIMS: int = _get("MAX_DIMS")
MAX_DIM_SIZE: int = _get("MAX_DIM_SIZE")
MAX_DIMS_4D: int = _get("MAX_DIMS_4D")
MAX_DIM_SIZE_4D: int = _get("MAX_DIM_SIZE_4D")
MAX_ELEMENTS: int = _get("MAX_ELEMENTS")
MAX_ARGS: int = _get("MAX_ARGS")
LSP_SINGLE: int = _get("LSP_SINGLE")


def max_dim_size(rank: int) -> int:
    """The largest dimension (elements) a tensor of ``rank`` dimensions may
    have: ``MAX_DIM_SIZE_4D`` up to rank ``MAX_DIMS_4D``, else
    ``MAX_DIM_SIZE``."""
    return MAX_DIM_SIZE_4D if rank <= MAX_DIMS_4D else MAX_DIM_SIZE


def shape_problem(shape) -> "str | None":
    """Why a tensor of ``shape`` (a sequence of non-negative ints, elements)
    cannot exist on the device, as a phrase ("has 9 dimensions; a tensor has
    at most 8"), or None when it can. The order of the checks: rank, each
    dimension (the first too large), the element count."""
    dims = list(shape)
    if len(dims) > MAX_DIMS:
        return f"has {len(dims)} dimensions; a tensor has at most {MAX_DIMS}"
    largest = max_dim_size(len(dims))
    for d, size in enumerate(dims):
        if size > largest:
            if largest == MAX_DIM_SIZE:
                return (f"has dimension {d} of {size}; a tensor of {MAX_DIMS_4D + 1} to "
                        f"{MAX_DIMS} dimensions has dimensions of at most {MAX_DIM_SIZE} "
                        f"(at most {MAX_DIMS_4D} dimensions: up to {MAX_DIM_SIZE_4D})")
            return (f"has dimension {d} of {size}; a dimension is at most "
                    f"{MAX_DIM_SIZE_4D}")
    count = 1
    for size in dims:
        count *= size
    if count > MAX_ELEMENTS:
        return (f"has {count} elements; a tensor has at most {MAX_ELEMENTS} (the "
                "descriptor's 32-bit element count)")
    return None
