"""Run a test plan on the device model and report per vector.

For each vector of each op (ARCHITECTURE.md "The test plan"):

1. make the inputs and the expected output (``gpsimd_emu.vectors``), in the
   parent; any plan problem is that vector's failure line;
2. lay out device memory (``gpsimd_emu.image.DeviceImage``);
3. run every core in a forked child (``gpsimd_emu.sandbox``);
4. judge what the cores did and compare the merged output with the expected
   one (``gpsimd_emu.judge``).

Results are ``gpsimd_device.results`` objects: one printed line per vector
and a JSON file (ARCHITECTURE.md "Emulator results").
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from gpsimd_device.faults import FAULT_KINDS, fault_name
from gpsimd_device.limits import MAX_DIMS
from gpsimd_device.plan import OpPlan, PlanError, TestPlan, VectorPlan
from gpsimd_device.results import LibraryResults, VectorResult, format_line

from . import abi
from . import dtypes as dt
from .cores import CoreSpec, prepare_cores
from .image import DeviceImage
from .judge import judge_output, judge_run, name_arguments, warnings_of
from .sandbox import run_child
from .settings import DEFAULT_STACK_SCALE, DEFAULT_TIMEOUT
from .vectors import expected_output, location_of, make_inputs, output_shape, tolerances

__all__ = [
    "DEFAULT_TIMEOUT", "DEFAULT_STACK_SCALE", "FAULT_KINDS", "VectorResult", "LibraryResults",
    "CoreSpec", "DeviceImage", "load_plan", "prepare_cores", "run_vector", "run_plan",
    "format_line", "write_results", "fault_name", "fault_kinds", "name_arguments",
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


def run_vector(library: str, op: OpPlan, vector: VectorPlan,
               cores: Sequence[CoreSpec], core_error: Optional[str] = None, *,
               root: str = ".", timeout: float = DEFAULT_TIMEOUT,
               stack_scale: int = DEFAULT_STACK_SCALE,
               patch_image: Optional[Callable[[DeviceImage], None]] = None,
               checks: bool = True) -> VectorResult:
    """Run one vector on every core and judge it.

    Args:
        library: the library name.
        op: the plan's op.
        vector: one of its vectors.
        cores: from ``prepare_cores`` (one, or eight in core order).
        core_error: a problem with the core objects: the vector fails with it.
        root: directory plan paths are relative to.
        timeout: seconds for all cores of the vector together.
        stack_scale: host stack bytes per device stack byte.
        patch_image: fault injection for tests: called with the laid-out
            ``DeviceImage`` before the cores run; it may rewrite
            ``arg_stream`` / ``out_desc`` (bytes) to provoke the runtime's
            guards with descriptors a correct host never writes.
        checks: False runs as the device does (``DeviceImage``): no poison,
            no second pass, no write-set / uninitialised-output checks, the
            runtime's extra checks off; crashes, timeouts and the runtime's
            own faults are still reported.

    Returns:
        A ``VectorResult``; never raises for problems of the plan, the
        objects or the kernel.
    """
    result = VectorResult(op.name, vector.name, vector.where, "fail")
    try:
        inputs = make_inputs(op, vector, root)
        try:
            out_dtype = dt.by_name(vector.output.dtype)
        except KeyError as e:
            raise PlanError(f"output: {e.args[0]}") from None
        expected = expected_output(vector, inputs, out_dtype, root)
        shape = output_shape(vector, expected)
        rtol, atol = tolerances(vector, out_dtype)
        out_location = location_of(vector.output.location, "output")
        if len(shape) > MAX_DIMS:
            raise PlanError(f"output rank {len(shape)} > {MAX_DIMS}")
    except PlanError as e:
        result.message = str(e)
        return result
    except MemoryError as e:
        result.message = f"the vector's inputs or expected output do not fit in memory ({e})"
        return result
    if core_error:
        result.message = core_error
        return result
    if not cores:
        result.message = "the plan lists no core objects"
        return result

    multicore = cores[0].core is not None
    scratch = abi.SCRATCH_CORE_SIZE if multicore else abi.SCRATCH_SINGLE_SIZE
    try:
        image = DeviceImage(inputs, out_dtype, shape, len(cores), scratch, out_location,
                            checks=checks)
    except (ValueError, MemoryError, OSError) as e:
        result.message = f"cannot lay out device memory: {e}"
        return result
    try:
        if patch_image is not None:
            patch_image(image)
        try:
            outcome = run_child(image, cores, result.op, stack_scale, timeout)
        except OSError as e:    # fork/pipe failed: a host problem, not the kernel's
            result.message = f"cannot start the device model process: {e}"
            return result
        problems, fatal = judge_run(image, cores, outcome, timeout, op)
        result.printf = image.cores[0].printf_text()
        if checks:
            result.warnings = warnings_of(image, cores)
        comparison = None
        if not fatal:
            passes = 1 + any(e.get("event") == "start" and e.get("pass") == 1
                             for e in outcome.events)
            more, comparison = judge_output(image, cores, expected, rtol, atol, passes)
            if problems:        # a core faulted: say what was written, compare nothing
                comparison = None
            problems += more
        if comparison is not None:
            result.max_abs_err = comparison.max_abs_err
            result.mismatches = comparison.mismatches
            result.elements = comparison.total
            if not comparison.ok:
                problems.append(comparison.message)
        if problems:
            hint = _expected_shape_hint(vector, shape, image)
            result.message = "; ".join(problems + ([hint] if hint else []))
        else:
            result.status = "pass"
        return result
    finally:
        image.close()


def _expected_shape_hint(vector: VectorPlan, shape: Sequence[int],
                         image: DeviceImage) -> Optional[str]:
    """When the output descriptor's size was taken from the expected result
    (no ``output.shape`` in the vector) and the kernel's result does not fit
    it (a core's report has ``REPORT_OUTPUT_SIZE``), say where that size
    came from: the reference or the inline values may be what is wrong, not
    the kernel."""
    if vector.output.shape is not None:
        return None
    if not any(cm.report.flags & abi.REPORT_OUTPUT_SIZE for cm in image.cores):
        return None
    return (f"the output descriptor's shape {list(shape)} comes from {vector.expected.source} "
            f"(give output.shape to fix it, or check the reference)")


def run_plan(plan: TestPlan, *, root: str = ".", timeout: float = DEFAULT_TIMEOUT,
             stack_scale: int = DEFAULT_STACK_SCALE,
             on_result: Optional[Callable[[VectorResult], None]] = None,
             checks: bool = True) -> LibraryResults:
    """Run every vector of every op of a plan.

    Args:
        plan: the plan (``load_plan``).
        root: directory the plan's relative paths are resolved against
            (where SCons runs: the project top).
        timeout: seconds per vector.
        stack_scale: host stack bytes per device stack byte.
        on_result: called with each ``VectorResult`` as soon as it is known
            (the CLI prints its line).
        checks: False for ``--no-checks`` (see ``run_vector``).

    Returns:
        The ``LibraryResults``.
    """
    results = LibraryResults(plan.library)
    cores, core_error = prepare_cores(plan, root)
    try:
        for op in plan.ops:
            for vector in op.vectors:
                r = run_vector(plan.library, op, vector, cores, core_error,
                               root=root, timeout=timeout, stack_scale=stack_scale,
                               checks=checks)
                results.vectors.append(r)
                if on_result is not None:
                    on_result(r)
    finally:
        for c in cores:
            c.close()
    return results
