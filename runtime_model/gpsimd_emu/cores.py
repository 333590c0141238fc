"""The core objects of a plan, read and verified once by the worker
(``prepare_cores``): each packed payload checked (gpsimd_device.pack) and
put in a memfd that the zygote ``dlopen``s (``zygote.c``); then the copies
the zygote loaded checked as the device loader checks them
(``loaded_problems``) and for an op's kernel (``unregistered``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from gpsimd_device.plan import OpPlan, TestPlan

from . import abi
from .loader import LoadError, PackedObject, check_lsp, payload_fd, read_object

__all__ = ["CoreSpec", "prepare_cores", "loaded_problems", "unregistered"]


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



def loaded_problems(cores: Sequence[CoreSpec], entries: Sequence[dict]) -> List[Optional[str]]:
    """Per core object, why the zygote's copy of it cannot run, else None:
    the zygote could not load it, or its linker spec is not the one the
    device loader expects (``loader.check_lsp``). ``entries``: the
    ``cores`` of the zygote's ready message (``ZygoteClient.ready``)."""
    problems: List[Optional[str]] = []
    for spec, entry in zip(cores, entries):
        try:
            check_lsp(spec.obj, entry.get("lsp"), spec.lsp, spec.core)
            problems.append(entry.get("error"))     # (it did not load)
        except LoadError as e:
            problems.append(str(e))
    return problems


def unregistered(cores: Sequence[CoreSpec], entries: Sequence[dict],
                 problems: Sequence[Optional[str]], op: OpPlan) -> Optional[str]:
    """Why no core can run ``op``: the first of ``problems``
    (``loaded_problems``), or a core object whose registration lacks the
    op's kernel (the ``ops`` of its ready entry), else None."""
    for spec, entry, problem in zip(cores, entries, problems):
        if problem:
            return problem
        if op.function not in entry["ops"]:
            kernel = f"kernel {op.function!r} of op {op.name!r}" if op.function != op.name \
                else f"op {op.name!r}"
            return (f"{spec.path}: {kernel} is not registered (get_func_name gives "
                    f"{', '.join(entry['ops']) or 'nothing'})")
    return None
