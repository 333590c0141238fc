"""Shape libraries, run as the device runtime uses them: read the
registration, and ask each op's shape function for each test vector's
output (docs/shape-functions.md). Two build steps::

    python -m gpsimd_emu.shapes registration LIB.so -o registration.json
    python -m gpsimd_emu.shapes outputs LIB.so REGISTRATION PLAN_IN -o PLAN_OUT

What each writes: ARCHITECTURE.md "Shape functions"; when a vector gets
``output.error`` instead of an output: docs/shape-functions.md "What the
emulator does with it", or a result that is no shape the device holds.

Native code may crash or hang: loading and calls run in a child process
(one for the whole plan, a new one after a crash or a time limit of
:data:`CALL_TIMEOUT` seconds per call), so neither takes the build down.
Stdlib only. Exit status 0 when the file was written (a vector's error is
in the plan, not a failure of the step), 1 with one ``gpsimd: <path>:
<why>`` line otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from gpsimd_device.atomic import write_atomically
from gpsimd_device.limits import shape_problem
from gpsimd_device.plan import OpPlan, OutputSpec, PlanError, ScalarSpec, TestPlan, VectorPlan
from gpsimd_device.shapes import Registration, RegisteredOp

from . import contain

__all__ = ["CALL_TIMEOUT", "LOAD_TIMEOUT", "read_registration", "shaped_plan", "main"]

#: Seconds a shape library may take to load (its static initialisers).
LOAD_TIMEOUT = 30.0
#: Seconds one shape-function call may take.
CALL_TIMEOUT = 10.0


class StepError(Exception):
    """The step cannot produce its file (message: why)."""


class _Child:
    """A forked process that runs ``work(emit)``, where ``emit(obj)`` sends
    one JSON line to the parent; its stderr is kept for messages."""

    def __init__(self, work: Callable[[Callable[[Any], None]], None]):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()

        def body() -> int:      # (contain.fork_child: it dies with this process)
            os.close(out_r)
            os.close(err_r)
            os.dup2(err_w, 2)
            try:
                work(lambda obj: os.write(out_w, (json.dumps(obj) + "\n").encode("utf-8")))
            except Exception as e:      # a Python-level problem: say it
                print(f"{type(e).__name__}: {e}", file=sys.stderr)
                return 3
            return 0
        self.pid = contain.fork_child(body)
        os.close(out_w)
        os.close(err_w)
        self.out, self.err = out_r, err_r
        self.buffer = b""
        self.errors = b""
        self.timed_out = False

    def next(self, timeout: float) -> Optional[Any]:
        """The next line's object; None when the child ended (or timed out:
        then it is killed and ``timed_out`` is set)."""
        self.timed_out = False
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                contain.kill(self.pid)
                return None
            ready, _, _ = select.select([self.out, self.err], [], [], left)
            if self.err in ready:
                self._read_err()
            if self.out in ready:
                chunk = os.read(self.out, 65536)
                if not chunk:
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line.decode("utf-8"))

    def _read_err(self) -> bool:
        """Keep a chunk of the child's stderr (8 KiB at most); False at its end."""
        chunk = os.read(self.err, 4096)
        if len(self.errors) < 8192:
            self.errors += chunk
        return bool(chunk)

    def end(self) -> str:
        """Reap the child; why it ended, or "" for a clean exit."""
        _, status = os.waitpid(self.pid, 0)
        try:
            while len(self.errors) < 8192 and select.select([self.err], [], [], 0)[0] \
                    and self._read_err():
                pass
        except OSError:
            pass
        os.close(self.out)
        os.close(self.err)
        said = self.errors.decode("utf-8", "replace").strip().splitlines()
        tail = f" ({said[-1][:400]})" if said else ""
        if os.WIFSIGNALED(status):
            return f"crashed with {contain.signal_name(os.WTERMSIG(status))}{tail}"
        if os.WEXITSTATUS(status) != 0:
            return f"exited with status {os.WEXITSTATUS(status)}{tail}"
        return ""


def read_registration(library: str) -> Registration:
    """Load ``library`` in a child process and return what it registered.

    Raises:
        StepError: it could not be loaded or read (crash, time limit, not a
            shape library).
    """
    def work(emit: Callable[[Any], None]) -> None:
        from .shapelib import ShapeError, ShapeLibrary
        try:
            emit({"registration": ShapeLibrary(library).registration().dumps()})
        except ShapeError as e:
            emit({"error": str(e)})

    child = _Child(work)
    got = child.next(LOAD_TIMEOUT)
    why = child.end()
    if child.timed_out:
        raise StepError(f"loading the shape library took more than {LOAD_TIMEOUT:g} s "
                        "(its NEURON_LIBRARY blocks or static initialisers do not return)")
    if got is None:
        raise StepError(f"loading the shape library {why or 'failed'} (its NEURON_LIBRARY "
                        "blocks or static initialisers)")
    if "error" in got:
        raise StepError(got["error"])
    return Registration.loads(got["registration"])


def _call_args(op: OpPlan, vector: VectorPlan) -> List[Any]:
    """The arguments of a shape-function call: per schema argument,
    ``("tensor", dtype, shape)`` or ``("int"|"float", value)``."""
    out: List[Any] = []
    for arg in op.args:
        spec = vector.inputs.get(arg.name)
        if spec is None:
            raise PlanError(f"no input for argument {arg.name!r}")
        if isinstance(spec, ScalarSpec):
            is_float = spec.dtype == "float32" or isinstance(spec.value, float)
            out.append(("float", float(spec.value)) if is_float else ("int", int(spec.value)))
        else:
            if spec.shape is None:
                raise PlanError(f"input {arg.name!r} has no shape")
            out.append(("tensor", spec.dtype, list(spec.shape)))
    return out


def _evaluate(library: str, calls: List[Tuple[int, List[Any]]],
              emit: Callable[[Any], None]) -> None:  # pragma: no cover - runs in the child
    from .shapelib import ShapeLibrary
    lib = ShapeLibrary(library)
    for index, args in calls:
        emit(lib.call(index, args))


def _conflict(vector: VectorPlan, dtype: str, shape: Tuple[int, ...],
              source: str) -> Optional[str]:
    """Why the vector's own output (manifest ``output:``) disagrees with
    the shape function's result, or None."""
    given = vector.output
    given_shape = None if given.shape is None else list(given.shape)
    for what, mine, theirs in (("dtype", given.dtype, dtype), ("shape", given_shape, list(shape))):
        if mine is not None and mine != theirs:
            return (f"the vector's output gives {what} {mine}, but {source} gives {theirs} "
                    "(the runtime allocates the output from the shape function)")
    return None


def shaped_plan(plan: TestPlan, library: str, registration: Registration) -> TestPlan:
    """``plan`` with every vector's output from its op's shape function
    (module text). Ops without a registration keep their outputs."""
    index: Dict[str, Tuple[int, RegisteredOp]] = {}
    for i, o in enumerate(registration.ops):
        index.setdefault(o.op, (i, o))
    calls: List[Tuple[int, List[Any]]] = []
    slots: List[Tuple[int, int, str]] = []      # (op index, vector index, source)
    #: (op index, vector index) -> the vector's new output
    outputs: Dict[Tuple[int, int], OutputSpec] = {}

    def fail(oi: int, vi: int, error: str) -> None:
        outputs[(oi, vi)] = replace(plan.ops[oi].vectors[vi].output, error=error)

    for oi, op in enumerate(plan.ops):
        if op.name not in index:
            continue
        ri, reg = index[op.name]
        source = f"the shape function {reg.function_name} (m.def at {reg.where})"
        for vi, vector in enumerate(op.vectors):
            try:
                calls.append((ri, _call_args(op, vector)))
                slots.append((oi, vi, source))
            except PlanError as e:
                fail(oi, vi, f"{source} cannot be called: {e}")
    results: List[Dict[str, Any]] = []
    while len(results) < len(calls):
        start = len(results)
        child = _Child(lambda emit, rest=calls[start:]: _evaluate(library, rest, emit))
        while len(results) < len(calls):
            limit = LOAD_TIMEOUT if len(results) == start else CALL_TIMEOUT     # (a load first)
            got = child.next(limit)
            if got is None:
                break
            results.append(got)
        why = child.end()
        if len(results) < len(calls):
            if child.timed_out:
                why = f"did not return within {limit:g} s"
            results.append({"fault": f"the call {why or 'ended without an answer'}"})
    for (oi, vi, source), got in zip(slots, results):
        vector = plan.ops[oi].vectors[vi]
        if got.get("fault"):
            fail(oi, vi, f"{source} faulted: {got['fault']}")
            continue
        dtype, shape = got["dtype"], tuple(got["shape"])
        problem = shape_problem(shape)
        problem = (_conflict(vector, dtype, shape, source) if problem is None
                   else f"{source} gives shape {list(shape)}, which {problem}")
        if problem is not None:
            fail(oi, vi, problem)
        else:
            outputs[(oi, vi)] = OutputSpec(dtype, shape, vector.output.location, source=source)
    return replace(plan, ops=tuple(
        replace(op, vectors=tuple(replace(v, output=outputs.get((oi, vi), v.output))
                                  for vi, v in enumerate(op.vectors)))
        for oi, op in enumerate(plan.ops)))


def _registration(args: argparse.Namespace) -> None:
    write_atomically(args.output, read_registration(args.library).dumps())


def _outputs(args: argparse.Namespace) -> None:
    plan = TestPlan.load(args.plan)
    try:        # (the registration step's: the library is not loaded twice for it)
        with open(args.registration, encoding="utf-8") as f:
            registration = Registration.loads(f.read())
    except ValueError as e:
        raise PlanError(f"{args.registration}: {e}") from None
    write_atomically(args.output, shaped_plan(plan, args.library, registration).dumps())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one step; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_emu.shapes",
                                description="Read a shape library's registration, or fill a "
                                            "test plan's outputs from its shape functions.")
    sub = p.add_subparsers(dest="step", required=True)
    rg = sub.add_parser("registration", help="write what the shape library registers")
    rg.add_argument("library")
    rg.add_argument("-o", "--output", required=True)
    rg.set_defaults(run=_registration)
    ou = sub.add_parser("outputs", help="fill each vector's output from its shape function")
    ou.add_argument("library")
    ou.add_argument("registration", help="what the registration step wrote")
    ou.add_argument("plan")
    ou.add_argument("-o", "--output", required=True)
    ou.set_defaults(run=_outputs)
    args = p.parse_args(argv)
    try:
        args.run(args)
        return 0
    except StepError as e:
        why = f"{args.library}: {e}"
    except PlanError as e:
        why = str(e)
    except OSError as e:
        why = f"{e.filename or args.output}: {e.strerror or e}"
    print(f"gpsimd: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
