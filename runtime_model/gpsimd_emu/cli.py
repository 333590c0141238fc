"""Command line of the device model (ARCHITECTURE.md "Emulator results"):
the supervising process of a test run (``python -m gpsimd_emu``, whose
``__main__`` first offers a ninja step's run to its build's server, and
the ``gpsimd-emu`` command run it; it forks the worker: ``supervise``).

``python -m gpsimd_emu run PLAN.json --results OUT.json [options]``
(``build_parser``) prints one line per vector (``PASS ...`` / ``FAIL
lib::op[vector] (where): message``) and ``lib: N passed, M failed``; with
``--quiet`` (or ``$GPSIMD_EMU_QUIET=1``, the build's ``QUIET=1``) only the
``FAIL`` lines and the ``PASS`` lines that carry a warning, with what core
0 printed for them; writes the results JSON; exits 0 only when every vector passed, 1 when
one failed, 2 when the plan itself cannot be read or the results cannot
be written, 3 when the whole run took longer than the vectors' time
limits allow (an emulator that did not end). What core 0 printed goes
to stderr, prefixed with the vector's name.

With ``--failed-results F``, the results file is the proof of a passing run
(what the build's test node is): both files are removed first, and a run in
which a vector failed writes its results to ``F`` instead.

``python -m gpsimd_emu prestart STAMP``: ``gpsimd_emu.client.served.prestart_step``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import select
import signal
import sys
import time
from typing import List, Optional, Tuple, Union

from gpsimd_device.atomic import remove_leftovers, write_atomically
from gpsimd_device.plan import PlanError, TestPlan
from gpsimd_device.results import VectorResult, format_line

# Only what the supervising process needs is imported here; the worker
# imports the model (numpy) after the fork.
from gpsimd_device import zygote as program

from . import contain
from .client.protocol import RUNS_PER_VECTOR, STOP_SIGNALS, end_by, first_call_right
from .settings import (MAKING_SLACK, QUIET_ENV, RUN_SLACK, VERBOSE_ENV, RunOptions, add_run_options,
                       one_blas_thread, run_options)
from .zygote_client import program_problem     # (stdlib and ctypes: no model)


@functools.lru_cache(maxsize=None)
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m gpsimd_emu`` (made once: the
    emulator server makes it before it forks its runs)."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_emu",
                                description="Run GPSIMD custom-op test plans on the device model.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every vector of a test plan")
    run.add_argument("plan", help="testplan.json written by the build")
    run.add_argument("--results", required=True, help="where to write the results JSON")
    run.add_argument("--failed-results",
                     help="where a failing run writes its results (the --results file is then "
                          "only written by a passing run)")
    run.add_argument("--record-failures", metavar="FILE",
                     help="a run that fails exits 0 once the failure is recorded: its results "
                          "in --failed-results, or, when it has none, its exit status in FILE "
                          "(a ninja build's test step: its summary step reports them and sets "
                          "the build's status; an interrupt still ends the run by its signal)")
    run.add_argument("--stale", metavar="FILE", action="append", default=[],
                     help="a file this run makes out of date, removed as it starts (a ninja "
                          "build's summary and report: an interrupted run leaves none that "
                          "is not true)")
    run.add_argument("--locations",
                     help="JSON {op: {vector: 'FILE:LINE:COL'}} naming where each vector is "
                          "written; kept out of the plan so that moving a vector's lines "
                          "does not re-run its tests")
    add_run_options(run)
    run.add_argument("--quiet", action="store_true", default=None,
                     help="print only failures and passes with warnings, no summary line "
                          f"(default when ${QUIET_ENV} is 1)")
    return p


class _Stopped(BaseException):
    """A signal (``args[0]``) asked the run to stop."""


def _on_signal(sig, frame) -> None:
    raise _Stopped(sig)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI; returns the exit status (module text)."""
    one_blas_thread()      # before the worker imports numpy (settings.one_blas_thread)
    args = parse(argv)
    if isinstance(args, int):
        return args
    loaded = load(args)
    return settle(args, loaded if isinstance(loaded, int) else supervise(args, *loaded))


def settle(args: argparse.Namespace, status: int) -> int:
    """The exit status of a run that ended with ``status``: with
    ``--record-failures FILE``, a failure (1, 2 or 3) is 0 once recorded
    (results in ``--failed-results``, else ``exit status N`` written to
    FILE); 0 and an interrupt (128 + signal) are kept."""
    if not args.record_failures or status not in (1, 2, 3):
        return status
    if status != 1 or not (args.failed_results and os.path.exists(args.failed_results)):
        try:
            write_atomically(args.record_failures, f"exit status {status}\n")
        except OSError as e:
            say(f"cannot write {args.record_failures}: {e.strerror}")
            return status
    return 0


def say(message: str) -> None:
    """``message`` on stderr, as ``gpsimd_emu: message``."""
    print(f"gpsimd_emu: {message}", file=sys.stderr, flush=True)


def parse(argv: Optional[List[str]]) -> Union[argparse.Namespace, int]:
    """Parse ``argv`` and (given ``--failed-results``) remove both results
    files, and what a killed run left of their writing
    (``atomic.remove_leftovers``), so that no results file from before this
    run is left whatever happens next; an exit status (2, the reason on
    stderr) when a file cannot be removed. Raises SystemExit (argparse) for
    a bad argument."""
    args = build_parser().parse_args(argv)
    if args.quiet is None:      # read now: the parser is made once, maybe in another environment
        args.quiet = os.environ.get(QUIET_ENV) == "1"
    if args.failed_results:
        named = list(filter(None, (args.results, args.failed_results, args.record_failures,
                                   *args.stale)))
        for path in named:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                say(f"cannot remove {path}: {e.strerror} (errno {e.errno})")
                return settle(args, 2)
            remove_leftovers(path)
    return args


def load(args: argparse.Namespace) -> Union[Tuple[TestPlan, RunOptions], int]:
    """The plan (with its locations) and the run's options named by
    ``args`` (``parse``); an exit status (2, the reason on stderr) when the
    plan, its locations or the zygote program cannot be read."""
    try:
        plan = TestPlan.load(args.plan)
    except PlanError as e:
        say(f"{e}")
        return 2
    if args.locations:          # {op: {vector: "FILE:LINE:COL"}}
        try:
            with open(args.locations, encoding="utf-8") as f:
                where = json.load(f)
            if not isinstance(where, dict) or not all(isinstance(v, dict)
                                                      for v in where.values()):
                raise ValueError("not a JSON object of objects")
            plan = plan.with_locations(where)
        except (OSError, ValueError) as e:
            say(f"cannot read locations {args.locations}: {e}")
            return 2
    zygote = args.zygote or program.default_path(args.plan)
    problem = program_problem(zygote)
    if problem:
        say(f"cannot run {args.plan}: {problem}; build it: scons {zygote}")
        return 2
    return plan, run_options(args, zygote)


def supervise(args: argparse.Namespace, plan: TestPlan, options: RunOptions) -> int:
    """This process supervises the run (ARCHITECTURE.md "Processes and
    containment"): as the subreaper, it forks the worker
    (``contain.fork_child``, ``_run_worker``), follows it within the
    run's limit (``_Journal``), ends every descendant left
    (``contain.sweep``) and returns the run's exit status (module text); on
    a stop signal it ends them all and itself by that signal. A worker that
    ends while it makes a vector ready (a reference's ``os._exit`` or
    crash), or makes one ready for longer than a reference may take, fails
    that vector, and a new worker runs the rest (``_Journal.blame``: an end
    is first checked by a new worker that makes that vector ready first)."""
    limit = args.timeout * RUNS_PER_VECTOR * (plan.vector_count() + 1) + RUN_SLACK
    deadline = time.monotonic() + limit
    contain.become_subreaper()
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    pid = None
    journal = _Journal(plan, args.timeout)
    try:
        while True:
            r, w = os.pipe()
            pid = contain.fork_child(lambda: _run_worker(args, plan, options, w, journal.rows,
                                                         journal.probe))
            os.close(w)
            status = journal.follow(pid, r, deadline)       # (None: killed at the deadline)
            pid = None
            contain.sweep()
            if status is None or _wrote_results(args) or not journal.blame(status):
                break
    except _Stopped as stop:
        for sig in STOP_SIGNALS:                    # one stop is enough
            signal.signal(sig, signal.SIG_IGN)
        if pid is not None:     # it and every descendant left, ours to reap (the subreaper)
            contain.kill(pid)
        contain.sweep()
        return end_by(stop.args[0])
    finally:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
    if status is None:
        say(f"{plan.library}: the run did not finish within {limit:g} s "
            f"(the emulator itself did not end: a bug to report)")
        return 3
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        say(f"{plan.library}: the emulator died with signal {-code} and wrote no results")
        return 1
    if code in (0, 1) and not _wrote_results(args):
        say(f"{plan.library}: the emulator exited with status {code} and wrote no results "
            f"(a reference or the emulator itself failed)")
        return 1
    if code in (0, 1) and args.failed_results:  # (the file says; a thread a reference left
        return int(os.path.exists(args.failed_results))    # may end the worker after it)
    return code


def _wrote_results(args: argparse.Namespace) -> bool:
    return any(os.path.exists(p) for p in (args.results, args.failed_results) if p)


class _Journal:
    """What the workers of a run tell the supervisor through a pipe, one
    JSON document a line: each result (``{"result": VectorResult JSON}``,
    kept as it came and read into ``rows`` only when a next worker takes
    them as done: ``blame``) and the vector
    being made ready (``{"making": [op, vector] or null}``: its inputs and
    its references, each within the vector's time limit, which a reference
    that catches or blocks SIGALRM defeats; ``MAKING_SLACK``).

    A worker that ended while it made a vector ready may have been ended
    by what a reference made before it left running (a thread, a timer, a
    child process): the next worker first makes that vector ready alone
    (``probe``, its result not kept), and the vector fails only when that
    ends the worker too, or when the worker ends again as it makes it
    after the others (its message then names the vectors made before it)."""

    def __init__(self, plan: TestPlan, timeout: float) -> None:
        self.plan, self.rows, self.making, self.since = plan, [], None, 0.0
        self.limit = 2 * timeout + MAKING_SLACK     # (its reference, and the one before's)
        self.overran, self._text, self._results = False, b"", []
        #: the vector the next worker makes ready first, alone; the vectors
        #: a worker ended while making ready once; those the current one made
        self.probe: Optional[list] = None
        self.suspected: set = set()
        self.made: List[list] = []

    def follow(self, pid: int, fd: int, deadline: float) -> Optional[int]:
        """Read worker ``pid``'s lines on ``fd`` (closed after) until it
        ends: its wait status. A vector made ready for longer than
        ``limit`` kills it (``overran``); at ``deadline`` it is killed and
        None returned."""
        pidfd = os.pidfd_open(pid)
        try:
            while not select.select([pidfd], [], [], 0)[0]:
                end = deadline if self.making is None else min(deadline, self.since + self.limit)
                if time.monotonic() >= end:
                    contain.kill(pid)
                    status = os.waitpid(pid, 0)[1]
                    self.overran = end < deadline
                    return status if self.overran else None
                if fd in select.select([pidfd, fd], [], [], end - time.monotonic())[0]:
                    self._take(os.read(fd, 1 << 16))
            for _ in range(1 << 10):    # (what it wrote before it ended; bounded: a
                if not (select.select([fd], [], [], 0)[0]     # process it left may hold
                        and self._take(os.read(fd, 1 << 16))):  # the pipe)
                    break
            return os.waitpid(pid, 0)[1]
        finally:
            os.close(pidfd)
            os.close(fd)

    def _take(self, data: bytes) -> bool:
        *lines, self._text = (self._text + data).split(b"\n")
        for line in lines:
            if line.startswith(b'{"result": '):     # (_note's form; read if needed: blame)
                self._results.append(line)
                continue
            try:
                making, self.since = json.loads(line)["making"], time.monotonic()
            except (ValueError, TypeError, KeyError):
                continue
            if making is None and self.making == self.probe:    # (it did not end the worker)
                self.probe = None
            elif making is not None and making != self.probe:
                self.made.append(making)
            self.making = making
        return bool(data)

    def blame(self, status: int) -> bool:
        """After a worker ended without results (wait ``status``): when it
        was making a vector ready, that vector fails, its line printed and
        its result kept; True then (a new worker runs the vectors left).
        One that ended while it made none ready (what a reference left
        running, a stream of the worker's it closed) gave results first:
        they are kept, and True (no vector is blamed; each worker ended so
        keeps one result more, at least)."""
        making, self.making, self._text = self.making, None, b""
        made, self.made = [m for m in self.made if m != making], []
        probed, self.probe = making is not None and making == self.probe, None
        vectors = {(op.name, v.name): v for op in self.plan.ops for v in op.vectors}
        results, self._results = self._results, []
        for line in results:
            with contextlib.suppress(ValueError, TypeError, KeyError):
                self.rows.append(VectorResult.from_json(json.loads(line)["result"]))
        code = os.waitstatus_to_exitcode(status)
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        if making is None and results:
            say(f"{self.plan.library}: the emulator's worker ended ({how}) while it made no "
                f"vector ready; its results ({len(results)}) are kept and the vectors left run "
                f"in a new worker")
            return True
        if not isinstance(making, list) or tuple(making) not in vectors:
            return False
        if not (self.overran or probed or tuple(making) in self.suspected):
            self.suspected.add(tuple(making))
            self.probe = making         # (the next worker makes it ready first)
            return True
        before = ", ".join(f"{op}[{vector}]" for op, vector in made) or "none"
        why = (f"was not ready within {self.limit:g} s (a reference that catches or blocks "
               f"the time limit's SIGALRM?): its worker was ended" if self.overran else
               f"ended the emulator's worker ({how}) while it made its inputs and expected "
               f"output, twice, the second time made ready first in a new worker (a "
               f"reference that calls os._exit or crashes the process?)" if probed else
               f"was being made ready when the emulator's worker ended ({how}), twice, "
               f"though made ready first in a new worker it did not end it: what a reference "
               f"made ready before it left running (a thread, a timer, a child process) may "
               f"have (made before it there: {before})")
        row = VectorResult(making[0], making[1], vectors[tuple(making)].where, "fail",
                           f"this vector {why}; the vectors after it ran in a new worker")
        self.overran = False
        print(format_line(self.plan.library, row), flush=True)
        self.rows.append(row)
        return True


def _note(fd: int, doc: dict) -> None:
    data = (json.dumps(doc) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _run_worker(args: argparse.Namespace, plan: TestPlan, options: RunOptions,
                journal: int, prior: List[VectorResult], probe: Optional[list] = None) -> int:
    """The worker: run every vector but those of ``prior`` (an earlier
    worker's), print the lines, tell the supervisor each result and the
    vector being made ready (``_Journal``, on fd ``journal``), write the
    results; ``probe``, ``[op, vector]``: first make that vector ready
    alone, its result not kept (``_Journal``)."""
    for sig in STOP_SIGNALS:    # (the worker's own, before it imports the model)
        signal.signal(sig, signal.SIG_DFL)
    from .session import LibrarySession
    library = plan.library
    verbose = os.environ.get(VERBOSE_ENV) == "1"
    shown = {id(r) for r in prior}      # (their lines were printed)

    def show(r) -> None:
        from gpsimd_device.printable import prefixed
        if id(r) in shown:
            return
        _note(journal, {"result": r.to_json()})
        if args.quiet and (r.passed or r.checked) and not r.warnings:
            return
        if r.printf:    # (the kernel's text: its control characters made visible)
            for line in prefixed(f"[{library}::{r.op}[{r.vector}] core 0] ", r.printf):
                print(line, file=sys.stderr)
        print(format_line(library, r), flush=True)
        if r.output and (verbose or not r.passed or r.warnings):
            for o in r.output:
                prefix = f"[{library}::{r.op}[{r.vector}] core {o['core']} {o['stream']}] "
                for line in prefixed(prefix, o["text"]):
                    print(line, file=sys.stderr)
            sys.stderr.flush()

    with LibrarySession(plan, root=args.root, options=options) as session:
        for r in prior:
            session.record_verdicts(r.op, {r.vector: first_call_right(r.to_json())})
        if probe is not None:       # (only whether it ends this worker matters)
            from .materials import materials
            op = next(o for o in plan.ops if o.name == probe[0])
            _note(journal, {"making": probe})
            with contextlib.suppress(Exception):
                materials(op, next(v for v in op.vectors if v.name == probe[1]), args.root,
                          options.timeout)
            _note(journal, {"making": None})
        results = session.run_all(show, prior, lambda op, vector: _note(
            journal, {"making": None if op is None else [op, vector]}))
        session.close(wait=False)       # (the supervisor reaps the zygote: ZygoteClient.close)
    if not args.quiet:   # (the build prints the summary)
        print(results.summary_line(), flush=True)
    out = args.results if results.ok or not args.failed_results else args.failed_results
    try:
        results.write(out)
    except OSError as e:
        say(f"cannot write {out}: {e.strerror or e} (errno {e.errno})")
        return 2
    return 0 if results.ok else 1

