"""Fault kinds of the host runtime, read from ``gpsimd_host/faults.h``
(the X-macro ``GPSIMD_FAULT_KINDS``: name and stable value of each kind the
runtime writes to ``gpsimd_core_report.fault_kind``)."""

from __future__ import annotations

from typing import Dict

from .headers import xmacro_rows

__all__ = ["FAULT_KINDS", "fault_name", "fault_value"]

#: value -> name, e.g. {0: "NONE", 1: "BINDING", ...}.
FAULT_KINDS: Dict[int, str] = {int(v): n for n, v in xmacro_rows("faults.h", "GPSIMD_FAULT_KINDS")}
_BY_NAME: Dict[str, int] = {n: v for v, n in FAULT_KINDS.items()}


def fault_name(kind: int) -> str:
    """The name of a fault kind value, or ``"UNKNOWN(<n>)"``."""
    return FAULT_KINDS.get(int(kind), f"UNKNOWN({kind})")


def fault_value(name: str) -> int:
    """The value of a fault kind name.

    Raises:
        KeyError: no such kind.
    """
    return _BY_NAME[name]
