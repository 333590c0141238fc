"""Running a plan's vectors in this process, for the tests: the
functional helpers over ``gpsimd_emu.session.LibrarySession`` (which holds
the one implementation of running and judging a vector) that the
emulator's integration tests call. (Not a way into the product: the build,
the CLI, ninja steps and the pytest plugin all run vectors through
``gpsimd_emu.client``.)"""

from __future__ import annotations

import atexit
from typing import Callable, Dict, Optional, Sequence, Tuple

from gpsimd_device.faults import FAULT_KINDS, fault_name
from gpsimd_device.plan import OpPlan, TestPlan, VectorPlan
from gpsimd_device.results import LibraryResults, VectorResult, format_line

from gpsimd_emu.cores import CoreSpec, prepare_cores
from gpsimd_emu.image import DeviceImage
from gpsimd_emu.judge import name_arguments
from gpsimd_emu.session import LibrarySession
from gpsimd_emu.settings import DEFAULT_STACK_SCALE, DEFAULT_TIMEOUT, RunOptions

__all__ = [
    "DEFAULT_TIMEOUT", "DEFAULT_STACK_SCALE", "FAULT_KINDS", "VectorResult", "LibraryResults",
    "CoreSpec", "DeviceImage", "RunOptions", "LibrarySession", "load_plan", "prepare_cores",
    "run_vector", "run_plan", "format_line", "write_results", "fault_name", "fault_kinds",
    "name_arguments",
]


def fault_kinds() -> dict:
    """{value: name} of the fault kinds (``gpsimd_host/faults.h``)."""
    return dict(FAULT_KINDS)


def load_plan(path: str) -> TestPlan:
    """Read a plan file (``TestPlan.load``).

    Raises:
        PlanError: unreadable, not JSON, not an object, an unknown ``format``
            or a bad structure.
    """
    return TestPlan.load(path)


def write_results(results: LibraryResults, path: str) -> None:
    """Write the results JSON to ``path`` atomically (``LibraryResults.write``).

    Raises:
        OSError: the file cannot be written.
    """
    results.write(path)


#: Sessions of ``run_vector`` calls, by the identity of the core list they
#: were given (one zygote per set of objects, ended at exit or when the
#: objects are closed).
_SESSIONS: Dict[Tuple, LibrarySession] = {}


def _close_sessions() -> None:
    for s in _SESSIONS.values():
        s.close()
    _SESSIONS.clear()


atexit.register(_close_sessions)


def run_vector(library: str, op: OpPlan, vector: VectorPlan,
               cores: Sequence[CoreSpec], core_error: Optional[str] = None, *,
               root: str = ".", timeout: float = DEFAULT_TIMEOUT,
               patch_image: Optional[Callable[[DeviceImage], None]] = None,
               checks: bool = True, zygote: Optional[str] = None,
               options: Optional[RunOptions] = None) -> VectorResult:
    """Run one vector on every core and judge it (``LibrarySession.run_vector``).

    Args:
        library: the library name.
        op: the plan's op; vector: one of its vectors.
        cores: from ``prepare_cores`` (one, or eight in core order); the
            caller closes them (their zygote ends with them).
        core_error: a problem with the core objects: the vector fails with it.
        root: directory plan paths are relative to.
        timeout, checks, zygote: see ``RunOptions`` (ignored
            when ``options`` is given).
        patch_image: fault injection for tests (``LibrarySession.run_vector``).

    Returns:
        A ``VectorResult``; never raises for problems of the plan, the
        objects or the kernel.
    """
    if options is None:
        options = RunOptions(timeout=timeout, checks=checks, zygote=zygote)
    key = (tuple(id(c) for c in cores), core_error, root, options)
    session = _SESSIONS.get(key)
    if session is None:
        plan = TestPlan(library, bool(cores) and cores[0].core is not None, (), ())
        session = LibrarySession(plan, root=root, options=options, cores=cores,
                                 core_error=core_error)
        _SESSIONS[key] = session

        def forget(key=key) -> None:
            s = _SESSIONS.pop(key, None)
            if s is not None:
                s.close()
        for c in cores:
            c.on_close.append(forget)
    return session.run_vector(op, vector, patch_image=patch_image)


def run_plan(plan: TestPlan, *, root: str = ".", timeout: float = DEFAULT_TIMEOUT,
             on_result: Optional[Callable[[VectorResult], None]] = None,
             checks: bool = True, zygote: Optional[str] = None,
             options: Optional[RunOptions] = None) -> LibraryResults:
    """Run every vector of every op of a plan (``LibrarySession.run_all``).

    Args:
        plan: the plan (``load_plan``).
        root: directory the plan's relative paths are resolved against
            (where SCons runs: the project top).
        timeout, checks, zygote: see ``RunOptions`` (ignored
            when ``options`` is given).
        on_result: called with each ``VectorResult`` as soon as it is known
            (the CLI prints its line).

    Returns:
        The ``LibraryResults``.
    """
    if options is None:
        options = RunOptions(timeout=timeout, checks=checks, zygote=zygote)
    with LibrarySession(plan, root=root, options=options) as session:
        return session.run_all(on_result or (lambda r: None))
