"""ctypes mirrors of the host-model structures of
``runtime_model/include/gpsimd_host/abi.h``: ``gpsimd_region``,
``gpsimd_core_report``, ``gpsimd_core_binding`` and ``gpsimd_lsp_info``
(the model fills a binding and reads a report; every size and offset is
compared with the C compiler's ``sizeof``/``offsetof`` by
tests/unit/test_emu_abi.py, which compiles abi.h).
"""

from __future__ import annotations

import ctypes

from gpsimd_device import limits as _limits

__all__ = ["GpsimdRegion", "GpsimdCoreReport", "GpsimdCoreBinding", "GpsimdLspInfo",
           "check_layout"]

_ABI = _limits.ABI
MAX_REGIONS = _ABI["MAX_REGIONS"]
MESSAGE_CAPACITY = _ABI["MESSAGE_CAPACITY"]
WARNINGS_CAPACITY = _ABI["WARNINGS_CAPACITY"]


class GpsimdRegion(ctypes.Structure):
    """``gpsimd_region`` (32 bytes): HBM ``[device_addr, device_addr + size)``
    (bytes) is backed by host memory at ``host`` (a pointer as an integer)."""

    _fields_ = [
        ("device_addr", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("host", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class GpsimdCoreReport(ctypes.Structure):
    """``gpsimd_core_report`` (3136 bytes), written by the runtime: status,
    fault_kind, printf byte counts (total / kept / ring head offset), peak
    bytes used of the TCM pool, scratch window and dataram, a NUL-terminated
    fault message of at most 2048 bytes, ``flags`` (``REPORT_*`` bits), the
    number of warnings raised and the kept ones (``"text\\n"`` each, at most
    1024 bytes)."""

    _fields_ = [
        ("status", ctypes.c_uint32),
        ("fault_kind", ctypes.c_uint32),
        ("printf_total", ctypes.c_uint64),
        ("printf_len", ctypes.c_uint64),
        ("printf_head", ctypes.c_uint64),
        ("tcm_peak", ctypes.c_uint64),
        ("scratch_peak", ctypes.c_uint64),
        ("dataram_peak", ctypes.c_uint64),
        ("message", ctypes.c_char * MESSAGE_CAPACITY),
        ("flags", ctypes.c_uint32),
        ("warning_count", ctypes.c_uint32),
        ("warnings", ctypes.c_char * WARNINGS_CAPACITY),
    ]


class GpsimdCoreBinding(ctypes.Structure):
    """``gpsimd_core_binding`` (2144 bytes), passed to ``gpsimd_bind_core``:
    ABI version, core id/count, up to 64 HBM regions, and host pointers of the
    core's scratch window, dataram (64 KiB), argument stream, 48-byte output
    descriptor, printf buffer (128 KiB) and report; ``stack_scale`` multiplies
    the launcher's stack size (bytes) for the host; ``checks`` (``CHECK_*``
    bits, 0 for the device's behaviour) and ``poison`` (the byte
    ``torch::empty()`` storage is filled with, and that never-written output
    elements hold); ABI 2: ``tcm_poison`` (the byte the dataram window is
    filled with at each launch), ``read_map_host`` (one bit per output
    element read before this core wrote it, 0: off) and ``out_itemsize``
    (bytes per output element)."""

    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("core_id", ctypes.c_uint32),
        ("core_count", ctypes.c_uint32),
        ("num_regions", ctypes.c_uint32),
        ("regions", GpsimdRegion * MAX_REGIONS),
        ("scratch_host", ctypes.c_uint64),
        ("dataram_host", ctypes.c_uint64),
        ("sbuf_window_base", ctypes.c_uint64),
        ("arg_stream_host", ctypes.c_uint64),
        ("retval_host", ctypes.c_uint64),
        ("printf_host", ctypes.c_uint64),
        ("report_host", ctypes.c_uint64),
        ("stack_scale", ctypes.c_uint32),
        ("checks", ctypes.c_uint16),
        ("poison", ctypes.c_uint8),
        ("tcm_poison", ctypes.c_uint8),
        ("read_map_host", ctypes.c_uint64),
        ("out_itemsize", ctypes.c_uint32),
        ("reserved2", ctypes.c_uint32),
    ]


class GpsimdLspInfo(ctypes.Structure):
    """``gpsimd_lsp_info`` (56 bytes): the linker spec a core object was
    linked with: core id (0..7 or ``LSP_SINGLE``), scratch window origin
    (device address) and size (bytes), and its name (NUL-terminated, 32 bytes)."""

    _fields_ = [
        ("core_id", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("scratch_origin", ctypes.c_uint64),
        ("scratch_size", ctypes.c_uint64),
        ("name", ctypes.c_char * 32),
    ]


def check_layout() -> None:
    """Check what Python can tell of the ctypes mirrors from abi.h itself:
    the fixed-size arrays have the header's capacities. (Every size and
    offset is compared with the C compiler's own ``sizeof``/``offsetof`` by
    tests/test_emu_abi.py, which compiles abi.h.)

    Raises:
        AssertionError: naming the struct and field that disagree.
    """
    for cls, field, want in ((GpsimdCoreReport, "message", MESSAGE_CAPACITY),
                             (GpsimdCoreReport, "warnings", WARNINGS_CAPACITY),
                             (GpsimdCoreBinding, "regions", MAX_REGIONS * ctypes.sizeof(GpsimdRegion)),
                             (GpsimdLspInfo, "name", 32)):
        if getattr(cls, field).size != want:
            raise AssertionError(f"{cls.__name__}.{field} is {getattr(cls, field).size} bytes, "
                                 f"abi.h says {want}")


check_layout()
