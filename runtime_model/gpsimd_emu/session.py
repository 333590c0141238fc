"""A library session: the one implementation of "run and judge a vector",
used by the CLI (``python -m gpsimd_emu run``) and the pytest plugin's
vector service::

    with LibrarySession(plan, root=".", options=RunOptions(timeout=5)) as s:
        result = s.run_vector("relu_forward", "small")   # VectorResult

The session reads the plan's core objects (``prepare_cores``) while the
zygote (``zygote_client``) starts, and has it load them once. Per vector:
the memory limit (``budget``), its inputs and expected output
(``materials``), its device image (``image``), run by the zygote, then
judged (``judge``, ``checks``); in which order, and why: ARCHITECTURE.md
"Processes and containment".

A session must be closed (``close`` or ``with``): that ends the zygote.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Callable, List, Optional, Sequence, Union

from gpsimd_device.plan import OpPlan, PlanError, TestPlan, VectorPlan
from gpsimd_device.results import CHECKED, LibraryResults, VectorResult

from . import abi, control
from .cores import CoreSpec, loaded_problems, prepare_cores, unregistered
from .memory import ImagePool
from .settings import RunOptions
from .zygote_client import ZygoteClient, ZygoteError, program_problem

__all__ = ["LibrarySession", "RunOptions", "ZygoteClient", "ZygoteError"]

#: Seconds a zygote may take to load the core objects beyond the time limit.
LOAD_SLACK = 5.0
#: Image files kept between vectors (``run_all`` makes one ready while the
#: other runs) and the memory each may hold (ARCHITECTURE.md "The checks").
KEPT_IMAGES, KEPT_IMAGE_BYTES = 2, 16 << 20


class LibrarySession:
    """Runs the vectors of one library's plan (module text).

    Args:
        plan: the test plan.
        root: directory the plan's relative paths start from.
        options: ``RunOptions`` (time limit, checks, memory, parallelism).
        cores, core_error: the core objects, when the caller read them
            already (``prepare_cores``; the caller closes them); default:
            read from the plan (and closed with the session).
    """

    def __init__(self, plan: TestPlan, *, root: str = ".",
                 options: Optional[RunOptions] = None,
                 cores: Optional[Sequence[CoreSpec]] = None,
                 core_error: Optional[str] = None):
        self.plan = plan
        self.root = root
        self.options = options or RunOptions()
        self._own_cores = cores is None
        self.zygote: Optional[ZygoteClient] = None
        self._zygote_error: Optional[str] = None
        self._load_checked: Optional[List[Optional[str]]] = None
        self._answered = False
        #: why an answer was not read: none is after it (the next one read
        #: would be that vector's, not the one queued after it)
        self._unread: Optional[str] = None
        # (the zygote makes its sandbox while the objects are read)
        self._start_zygote(len(plan.cores if cores is None else cores))
        if cores is None:
            try:
                cores, core_error = prepare_cores(plan, root)
            except BaseException:
                self._drop_zygote(None)
                raise
        self.cores: List[CoreSpec] = list(cores)
        self.core_error = core_error
        if core_error or not self.cores:     # (no vector will run)
            self._drop_zygote(None)
        elif self.zygote is not None:
            try:
                self.zygote.load(self.cores)
            except (OSError, ZygoteError) as e:
                self._drop_zygote(e)
        self._nonce = int.from_bytes(os.urandom(8), "little")
        #: ops whose last vector's cores each took longer than spread_after
        #: (their runs get helpers at once)
        self._slow_ops: dict = {}
        #: per op, its last vector made ready with an expected output:
        #: ``(signature, name, inputs, expected, rtol, atol)``; a vector of
        #: the same signature makes its second call with these arguments
        self._last_of: dict = {}
        #: (op, vector) -> its first call was right (it passed, or failed on its
        #: second call alone; why: ARCHITECTURE.md "The checks", the second call)
        self._right: dict = {}
        self._pipelined = False
        self._pool = ImagePool(KEPT_IMAGES, KEPT_IMAGE_BYTES)

    def _start_zygote(self, ncores: int) -> None:
        """Start the zygote for ``ncores`` core objects (none, or more than
        a zygote holds: no zygote, the plan's error says why)."""
        if not 0 < ncores <= control.ZY["MAX_CORES"]:
            return
        from .runs import copies_for   # stdlib only: numpy loads meanwhile
        problem = program_problem(self.options.zygote)
        try:
            if problem:
                raise OSError(problem)
            copies = copies_for(ncores, self.options.checks)
            self.zygote = ZygoteClient(self.options.zygote, ncores, copies)
        except OSError as e:
            self._drop_zygote(e)

    def _drop_zygote(self, error: Optional[Exception], wait: bool = True) -> None:
        """End the zygote, if any (``ZygoteClient.close``); ``error``: why
        it could not start, which every vector then fails with."""
        if self.zygote is not None:
            self.zygote.close(wait)
            self.zygote = None
        if isinstance(error, ZygoteError) and error.said:
            self._zygote_error = error.meaning(self._answered)
        elif error is not None:
            self._zygote_error = f"cannot start the device model process: {error}"

    def __enter__(self) -> "LibrarySession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, wait: bool = True) -> None:
        """End the zygote (``wait``: ``ZygoteClient.close``); close the core
        objects the session read. Idempotent."""
        self._drop_zygote(None, wait)
        self._pool.close()
        if self._own_cores:
            for c in self.cores:
                c.close()

    def _find(self, op: Union[OpPlan, str], vector: Union[VectorPlan, str]):
        if isinstance(op, str):     # (the message names the op asked for, not None)
            name, op = op, next((o for o in self.plan.ops if o.name == op), None)
            if op is None:
                raise KeyError(f"no op {name!r} in the plan of {self.plan.library}")
        if isinstance(vector, str):
            name, vector = vector, next((v for v in op.vectors if v.name == vector), None)
            if vector is None:
                raise KeyError(f"no vector {name!r} of op {op.name}")
        return op, vector

    def run_all(self, on_result: Callable[[VectorResult], None] = lambda r: None,
                prior: Sequence[VectorResult] = (),
                on_make: Callable[[Optional[str], Optional[str]], None] = lambda o, v: None
                ) -> LibraryResults:
        """Every vector of every op, in plan order; ``on_result`` gets each
        result as soon as it is known. The next vector is made ready (inputs,
        reference, image) and queued while the zygote runs the current one,
        so the worker and the cores use two CPUs at once. ``prior``: results
        an earlier worker of the run had (``cli.supervise``; their verdicts
        given to ``record_verdicts``), taken as they are; ``on_make(op,
        vector)`` is called before a vector is made ready, ``(None, None)`` after."""
        results = LibraryResults(self.plan.library,
                                 no_vectors=[op.name for op in self.plan.ops if not op.vectors])
        before = {(r.op, r.vector): r for r in prior}

        def done(r: VectorResult) -> None:
            results.vectors.append(r)
            on_result(r)

        def make(op: Optional[OpPlan], vector: VectorPlan, alone: bool = False):
            if op is None or (op.name, vector.name) in before:
                return op and before[op.name, vector.name]
            on_make(op.name, vector.name)
            ready = self._prepare(op, vector, alone=alone)
            on_make(None, None)
            return ready
        inflight: Optional[_Pending] = None
        self._pipelined = True      # (every vector runs, in order: none is run alone)
        try:
            # (None, None): after the last vector, collect the one in flight
            for op, vector in [(o, v) for o in self.plan.ops for v in o.vectors] + [(None, None)]:
                ready = make(op, vector)
                if inflight is not None:
                    result = self._collect(inflight)
                    if inflight.again:  # (the vector queued after it, made again after it)
                        if isinstance(ready, _Pending):
                            self._outcome(ready)
                            self._release(ready)
                        alone = make(inflight.op, inflight.vector, True)   # (noted too)
                        result = self._collect(alone) if isinstance(alone, _Pending) else alone
                        ready = make(op, vector)
                    done(result)
                inflight = ready if isinstance(ready, _Pending) else None
                if ready is not None and inflight is None:
                    done(ready)
        finally:
            self._pipelined = False
        return results

    def _cores_problem(self, op: OpPlan) -> Optional[str]:
        """Why no core can run ``op`` (objects, loading, registration)."""
        if self.core_error:
            return self.core_error
        if not self.cores:
            return "the plan lists no core objects"
        if self._zygote_error:
            return self._zygote_error
        try:
            ready = self.ready()
        except ZygoteError as e:        # (before its first answer: ZygoteError.meaning)
            self._zygote_error = e.meaning(self._answered)
            return self._zygote_error
        return unregistered(self.cores, ready["cores"], self._load_checked, op)

    def ready(self) -> dict:
        """The zygote's ready message (``zygote_client.ZygoteClient.ready``),
        its objects checked as the device loader checks them; what the
        sandbox lacks here and what the objects' static initialisers wrote
        are printed once, to stderr.

        Raises:
            ZygoteError: the zygote died or did not answer.
        """
        ready = self.zygote.ready(self.options.timeout + LOAD_SLACK)
        if self._load_checked is None:
            self._load_checked = loaded_problems(self.cores, ready["cores"])
            if ready.get("missing"):
                print(f"gpsimd_emu: {self.plan.library}: the vectors are not contained here: "
                      f"{ready['missing']}", file=sys.stderr, flush=True)
            if self.zygote.load_output:
                from gpsimd_device.printable import prefixed    # (the kernels' text)
                lib, text = self.plan.library, self.zygote.load_output.decode("utf-8", "replace")
                print(f"gpsimd_emu: {lib}: what the core objects wrote while loading:",
                      *prefixed(f"[{lib} load] ", text), sep="\n", file=sys.stderr, flush=True)
        return ready

    def run_vector(self, op: Union[OpPlan, str], vector: Union[VectorPlan, str], *,
                   patch_image: Optional[Callable] = None) -> VectorResult:
        """Run one vector on every core and judge it.

        Args:
            op, vector: plan objects, or their names.
            patch_image: fault injection for tests: called with the laid-out
                ``DeviceImage`` before the cores run; it may rewrite
                ``arg_stream`` / ``out_desc`` (bytes) to provoke the runtime's
                guards with descriptors a correct host never writes.

        Returns:
            A ``VectorResult``; never raises for problems of the plan, the
            objects or the kernel.

        Raises:
            KeyError: no such op or vector (names only).
        """
        return self._collect_now(*self._find(op, vector), patch_image)

    def record_verdicts(self, op: str, verdicts: dict) -> None:
        """Record ``{vector name: its first call was right}`` of op ``op``
        as an earlier process of the same run judged them (one that timed
        out there is not run again here for the next vector's second
        call)."""
        for name, right in verdicts.items():
            self._right.setdefault((op, str(name)), bool(right))

    def _right_alone(self, op: OpPlan, name: str) -> bool:
        """Was the first call of vector ``name`` of ``op`` right in this
        session? One that has not run (a pytest run of some vectors: ``-k``,
        ``--lf``, ``-n``, shards) is run now, its second call with its own
        arguments, so that the next vector's second call, made with its
        arguments, is judged against its expected output as in a run of the
        whole plan."""
        if (op.name, name) not in self._right and not self._pipelined:
            self._collect_now(op, self._find(op, name)[1], alone=True)
        return self._right.get((op.name, name), False)

    def _collect_now(self, op: OpPlan, vector: VectorPlan, patch_image=None,
                     alone: bool = False) -> VectorResult:
        ready = self._prepare(op, vector, patch_image, alone)
        if not isinstance(ready, _Pending):
            return ready
        result = self._collect(ready)
        return self._collect_now(op, vector, patch_image, True) if ready.again else result

    def _prepare(self, op: OpPlan, vector: VectorPlan, patch_image: Optional[Callable] = None,
                 alone: bool = False) -> Union[VectorResult, "_Pending"]:
        """Check the memory limit, make the inputs and the expected output,
        lay out the image and queue it in the zygote: a ``_Pending`` (a
        failure to queue kept for ``_collect``), or the failed
        ``VectorResult`` when the vector cannot run. ``alone``: its second
        call repeats its own arguments (``_right_alone``)."""
        from .budget import image_size, inputs_too_big, too_big
        from .image import DeviceImage
        from .materials import materials, second_call_of, signature
        opts = self.options

        def failed(message: str) -> VectorResult:     # (and the result until judged: "")
            if message:         # (it cannot run: it did not pass)
                self._right[(op.name, vector.name)] = False
            return VectorResult(op.name, vector.name, vector.where, "fail", message)
        if vector.output.error:     # the shape function gave no usable output
            return failed(vector.output.error)
        if problem := inputs_too_big(vector, self.root, opts.memory):   # (before anything is made)
            return failed(problem)
        try:
            inputs, out_dtype, expected, shape, rtol, atol, out_location = \
                materials(op, vector, self.root, opts.timeout)
        except PlanError as e:
            return failed(str(e))
        except MemoryError as e:
            return failed(f"the vector's inputs or expected output do not fit in memory ({e})")
        if problem := self._cores_problem(op):
            return failed(problem)
        scratch = abi.scratch_size(self.cores[0].core)
        out_nbytes = math.prod(shape) * out_dtype.itemsize
        sig = signature(inputs, out_dtype, shape, out_location)
        other = second_call_of(op, vector, sig, self._last_of.get(op.name), self.root, opts.timeout,
                               lambda name: self._right_alone(op, name),
                               lambda name: self._right.get((op.name, name)) is False) \
            if opts.checks and not alone else None
        if expected is not None:
            self._last_of[op.name] = (sig, vector.name, inputs, expected, rtol, atol)
        size = image_size([i.array.nbytes for i in inputs], out_nbytes, len(self.cores),
                          scratch, opts.checks, second_inputs=other is not None)
        if size.total > opts.memory:
            return failed(too_big("device image", size.total, opts.memory, size.describe()))
        try:
            image = DeviceImage(inputs, out_dtype, shape, len(self.cores), scratch, out_location,
                                checks=opts.checks, second_inputs=other[2] if other else None,
                                pool=self._pool)
            if other is not None:
                image.second = other[1], other[3], other[4], other[5]
        except (ValueError, MemoryError, OSError) as e:
            return failed(f"cannot lay out device memory: {e}")
        try:
            if patch_image is not None:
                patch_image(image)
                image.write_args()
            self._nonce = (self._nonce + 1) & ((1 << 64) - 1)
            image.ctl.init(self._nonce, len(image.runs), image.num_cores,
                           [list(r.order) for r in image.runs])
        except BaseException as e:
            image.close()
            if not isinstance(e, OSError):      # (sem_init)
                raise
            return failed(f"cannot lay out device memory: {e}")
        request = dict(image.request(), op=op.function, timeout=opts.timeout,
                       parallel=opts.processes(), spread_after=opts.spread_after,
                       spread_now=self._slow_ops.get(op.name, False),
                       memory=opts.memory, image_total=size.total,
                       prefilled=image.prefilled_bytes())
        pending = _Pending(op, vector, failed(""), image, self._nonce, expected, rtol, atol)
        try:
            self.zygote.send(request, image.file.fd)
        except ZygoteError as e:
            self._zygote_error = pending.error = e.meaning(self._answered)
        return pending

    def _collect(self, p: "_Pending") -> VectorResult:
        """Wait for the vector's end, judge it, release its image."""
        from .checks import judge_output
        from .judge import expected_shape_hint, judge_run, output_warnings, warnings_of
        opts, image, result = self.options, p.image, p.result
        if image.second is not None and not self._right.get((p.op.name, image.second[0])):
            # (a vector whose first call was wrong judges no other's second call;
            # run_all gave its arguments before its verdict: its own first call
            # right, this vector runs again alone)
            image.second, p.again = None, True
        try:
            outcome = self._outcome(p)
            problems, fatal, run = judge_run(image, self.cores, outcome, opts.timeout, p.op)
            later: list = []
            if problems and run is not None and image.runs[run].after >= 0:
                # (a fault, crash or time limit of the second call alone: the
                # first call's outputs are judged all the same)
                later, problems, fatal = problems, [], False
            result.printf = image.printf_text(0, 0)
            result.kernel_seconds = outcome.kernel_seconds()
            launches = outcome.launches()
            if launches:
                self._slow_ops[p.op.name] = result.kernel_seconds / launches > opts.spread_after
            if opts.checks:
                result.warnings = warnings_of(image, self.cores)
            result.output = p.output
            result.warnings += output_warnings(p.output)
            if not fatal:
                more, comparison, result.layout, notes, second = judge_output(
                    image, self.cores, outcome, p.expected, p.rtol, p.atol)
                later += second
                result.warnings += notes
                # (a core faulted: say what was written, compare nothing)
                if comparison is not None and not problems:
                    result.max_abs_err, result.mismatches, result.elements = (
                        comparison.max_abs_err, comparison.mismatches, comparison.total)
                    if not comparison.ok:
                        more.append(comparison.message)
                problems += more
            right = not problems
            problems += later
            if problems:
                hint = expected_shape_hint(p.vector, image)
                result.message = "; ".join(problems + ([hint] if hint else []))
            else:
                result.status = CHECKED if p.expected is None else "pass"
            result.second_call_only = right and bool(later) and p.expected is not None
            return result
        finally:
            right = result.passed or result.second_call_only
            self._right[(p.op.name, p.vector.name)] = right
            p.again = p.again and right
            self._release(p)

    def _release(self, p: "_Pending") -> None:
        """Close ``p``'s image, its file kept (``ImagePool``) only once no
        other process can write it: the zygote answered (every process of
        the vector reaped) in a mode whose sweep reaches every one (why:
        ARCHITECTURE.md "The checks")."""
        p.image.close(reuse=p.answered and self.zygote is not None
                      and self.zygote.ready(0)["mode"] != "pgroup")

    def _outcome(self, p: "_Pending"):
        """The zygote's reply to ``p`` and the validated control block."""
        from .judge import RunOutcome, check_runs
        opts, image = self.options, p.image

        def failed(error: str) -> RunOutcome:
            return RunOutcome(None, False, error=error, memory=opts.memory)
        if p.error or self._unread:
            return failed(p.error or self._unread)
        npasses = len(image.runs)
        first = not self._answered     # (the zygote loads the copies past the first before it)
        try:
            reply = self.zygote.receive(opts.timeout * npasses + 10.0
                                        + (LOAD_SLACK + opts.timeout if first else 0.0))
        except ZygoteError as e:
            self._zygote_error = self._unread = e.meaning(self._answered)
            return failed(self._zygote_error)
        self._answered = True
        if "error" in reply:            # (the zygote could not take the vector)
            return failed(f"the device model process failed: {reply['error']}")
        p.answered = True
        p.output = reply["output"]
        outcome = RunOutcome(reply["wait_status"], reply["timed_out"], reply["oom_kills"],
                             memory=opts.memory)
        try:
            outcome.record = image.ctl.validate(p.nonce, npasses, image.num_cores)
            check_runs(outcome.record, [r.after for r in image.runs])
        except control.RecordError as e:
            outcome.record = None
            outcome.record_error = str(e)
        else:   # the run the leader made itself ended as the leader did
            for job in outcome.record["jobs"]:
                if (job["state"] == control.JOB_RUNNING and job["pid"] == reply.get("pid")
                        and outcome.wait_status is not None):
                    job.update(wait_status=outcome.wait_status, state=control.JOB_EXITED)
        return outcome


class _Pending:
    """A vector laid out and queued in the zygote."""

    def __init__(self, op, vector, result, image, nonce, expected, rtol, atol):
        self.op, self.vector, self.result, self.image, self.nonce = op, vector, result, image, nonce
        self.expected, self.rtol, self.atol = expected, rtol, atol
        self.error: Optional[str] = None
        self.again = False               # (to run again: _collect)
        self.answered = False            # (the zygote's reply came: _release)
        self.output: List[dict] = []     # what the cores wrote (ZygoteClient.receive)
