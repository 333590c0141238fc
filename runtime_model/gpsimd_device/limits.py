"""Device limits and memory map, read from ``gpsimd_host/abi.h``.

Each value is the ``#define GPSIMD_<NAME>`` of that header (the C++ runtime
uses the same lines), with its source:

* cores and windows (device-api.md "Limits", build-front-end.txt §6):
  ``NUM_CORES`` 8; per-core HBM scratch window ``SCRATCH_BASE`` 0x84000000 +
  i x ``SCRATCH_CORE_SIZE`` (2 MiB) multicore, ``SCRATCH_SINGLE_SIZE``
  (32 MiB) single-core; dataram/TCM window ``DATARAM_BASE`` 0x80000 of
  ``DATARAM_SIZE`` 64 KiB, of which the ``TCM_POOL_SIZE`` 16 KiB pool, 4 KiB
  (``STREAM_TCM_BYTES``) per active stream accessor; ``PRINTF_CAPACITY``
  128 KiB;
* a library (device-api.md "Limits", build-front-end.txt §3c/§4): at most
  ``MAX_OPS_PER_LIBRARY`` 10 ops, op names shorter than ``MAX_NAME_LENGTH``
  32 characters, the library name ``RESERVED_LIBRARY_NAME`` ("builtin")
  reserved, launcher stack ``DEFAULT_STACK_SIZE`` 4196 bytes by default and
  at most ``MAX_STACK_SIZE`` (400 KB);
* a tensor: at most ``MAX_DIMS`` 8 dimensions of at most ``MAX_DIM_SIZE``
  65535 each, at most ``MAX_ELEMENTS`` (2**32 - 1, the u32 ``num_elem`` of
  customop-marshalling.txt §2) elements;
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
    "RESERVED_LIBRARY_NAME", "MAX_DIMS", "MAX_DIM_SIZE", "MAX_ELEMENTS", "MAX_ARGS",
    "LSP_SINGLE", "ABI",
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
MAX_ELEMENTS: int = _get("MAX_ELEMENTS")
MAX_ARGS: int = _get("MAX_ARGS")
LSP_SINGLE: int = _get("LSP_SINGLE")
