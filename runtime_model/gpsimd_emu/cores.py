"""The core objects of a plan, read and verified once by the worker
(``prepare_cores``): each packed payload checked (gpsimd_device.pack) and
put in a memfd that the zygote ``dlopen``s (``zygote.c``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

from gpsimd_device.plan import TestPlan

from . import abi
from .loader import LoadError, PackedObject, payload_fd, read_object

__all__ = ["CoreSpec", "prepare_cores"]


@dataclass
class CoreSpec:
    """One core object of the plan, read and verified in the parent.

    Attributes:
        core: 0..7, or None for single-core.
        lsp: the linker-spec name the plan expects.
        path: the object file (as given, for messages).
        obj: the verified object (None when ``error``).
        fd: the memfd holding a packed payload (None for a plain ``.so``).
        error: why the object cannot be used, or None.
    """

    core: Optional[int]
    lsp: str
    path: str
    obj: Optional[PackedObject] = None
    fd: Optional[int] = None
    error: Optional[str] = None
    on_close: List[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    def close(self) -> None:
        """Close the memfd, and first whatever registered in ``on_close``
        (e.g. a session's zygote that loaded it). Idempotent."""
        while self.on_close:
            self.on_close.pop()()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def prepare_cores(plan: TestPlan, root: str = ".") -> Tuple[List[CoreSpec], Optional[str]]:
    """Read and verify every core object of a plan; put each packed payload
    in a memfd (kept open until ``CoreSpec.close``).

    Returns:
        ``(cores, error)``: ``error`` is the first problem that makes every
        vector fail (wrong core list, unreadable or corrupt object), else
        None.
    """
    want = list(range(abi.NUM_CORES)) if plan.multicore else [None]
    got = [e.core for e in plan.cores]
    if got != want:
        return [], (f"plan lists cores {got}, a {'multicore' if plan.multicore else 'single-core'} "
                    f"library needs {want}")
    cores: List[CoreSpec] = []
    for e in plan.cores:
        spec = CoreSpec(e.core, e.lsp, e.object)
        if spec.lsp != abi.lsp_name(spec.core):
            spec.error = (f"plan gives core {spec.core} the linker spec {spec.lsp!r}, "
                          f"expected {abi.lsp_name(spec.core)!r}")
        else:
            full = os.path.normpath(os.path.join(root, spec.path))
            try:
                spec.obj = read_object(full, spec.path)
                if spec.obj.packed:
                    spec.fd = payload_fd(spec.obj)
            except LoadError as err:
                spec.error = str(err)
        cores.append(spec)
    return cores, next((c.error for c in cores if c.error), None)

