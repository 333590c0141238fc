"""Whether a core's report (abi.h ``gpsimd_core_report``) can be what the
runtime wrote (``overwritten``): a stray write far from any tensor may land
on it, and the judge reads no fault, count or flag from a report no runtime
could have written (``judge.judge_run``; ARCHITECTURE.md "The checks").
"""

from __future__ import annotations

from typing import Optional

from gpsimd_device.faults import FAULT_KINDS

from . import abi

__all__ = ["overwritten"]

_STATUSES = set(abi.enum_values("abi.h", "gpsimd_status", "GPSIMD_STATUS_").values())
#: every ``GPSIMD_REPORT_*`` bit abi.h defines
_FLAGS = sum(v for k, v in abi._ABI.items() if k.startswith("REPORT_"))


def overwritten(r: abi.GpsimdCoreReport, scratch_size: int) -> Optional[str]:
    """What in report ``r`` no runtime writes (``"fault code 1109917696"``),
    or None when every field is one the runtime may have written. A core's
    scratch window holds ``scratch_size`` bytes."""
    if r.status not in _STATUSES:
        return f"status {r.status}"
    if r.fault_kind not in FAULT_KINDS or (r.status == abi.STATUS_OK) != (r.fault_kind == 0):
        return f"fault code {r.fault_kind} with status {r.status}"
    if r.flags & ~_FLAGS:
        return f"flags {r.flags:#x}"
    for what, used, cap in (("TCM pool", r.tcm_peak, abi.TCM_POOL_SIZE),
                            ("dataram", r.dataram_peak, abi.DATARAM_SIZE),
                            ("scratch window", r.scratch_peak, scratch_size)):
        if used > cap:
            return f"{used} bytes of the {what} in use (capacity {cap})"
    cap = abi.PRINTF_CAPACITY
    if r.printf_len > min(cap, r.printf_total) or r.printf_head >= max(cap, 1):
        return (f"a printf ring of {r.printf_len} bytes from offset {r.printf_head} "
                f"({r.printf_total} printed, capacity {cap})")
    kept = r.warnings.count(b"\n")
    if r.warning_count < kept:
        return f"{r.warning_count} warnings counted, {kept} kept"
    return None
