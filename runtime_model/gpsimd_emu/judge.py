"""Judging how a vector's runs ended (``judge_run``): the zygote's reply and
the control block (``RunOutcome``), the cores' reports (faults, capacity
peaks), crashes, time limits and the memory limit; and the warnings of the
reports (``warnings_of``). What the outputs show is ``gpsimd_emu.checks``.
Messages name the core, the op and the run (ARCHITECTURE.md "The checks").
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from gpsimd_device.faults import fault_name
from gpsimd_device.plan import OpPlan, VectorPlan

from . import abi, contain, control
from .budget import exceeded
from .cores import CoreSpec
from .image import DeviceImage
from .control import CANCELLED, EXIT_MODEL_ERROR, LOST, UNFINISHED
from .merge import cores_text
from .records import overwritten

__all__ = ["RunOutcome", "name_arguments", "judge_run", "warnings_of", "output_warnings",
           "report_text", "core_name", "core_no", "running_cores", "expected_shape_hint"]


@dataclass
class RunOutcome:
    """How a vector's runs ended.

    Attributes:
        wait_status: the leader's wait status (None: not known).
        timed_out: the zygote killed the vector at its overall limit.
        oom_kills: processes the memory cgroup killed (0 without one).
        record: the validated control block (``ControlBlock.validate``), or
            None when ``record_error`` says why it is unusable.
        record_error: why the control block cannot be read, or None.
        memory: the memory limit in bytes (for messages).
    """

    wait_status: Optional[int]
    timed_out: bool
    oom_kills: int = 0
    record: Optional[dict] = None
    record_error: Optional[str] = None
    memory: int = 0
    error: Optional[str] = None

    def ran(self, run: int) -> bool:
        """Did run ``run`` go to its end without a fault, after every
        earlier run did too? (Only such runs are judged, so that runs that
        happened to go on side by side with a failing one change nothing.)"""
        return bool(self.record) and all(r["state"] == control.PASS_DONE and not r["faulted"]
                                         for r in self.record["passes"][:run + 1])

    def launches(self) -> int:
        """Launches that ended (every run and core)."""
        return len(_slots(self.record, control.SLOT_DONE))

    def kernel_seconds(self) -> float:
        """Seconds the cores' launchers took, every run and core together."""
        return sum((s["t_end"] - s["t_start"]) / 1e9
                   for _, _, s in _slots(self.record, control.SLOT_DONE))


def _slots(record: Optional[dict], state: int) -> List[Tuple[int, int, dict]]:
    """``(run, core index, slot)`` of every slot of ``record`` (none when
    None) in ``state``, in run order, then core order."""
    return [(p, k, s) for p, row in enumerate(record["slots"] if record else ())
            for k, s in enumerate(row) if s["state"] == state]


def core_no(cores: Sequence[CoreSpec], k: int) -> int:
    """The core number of core index ``k`` (0 single-core)."""
    c = cores[k].core
    return 0 if c is None else c


def core_name(cores: Sequence[CoreSpec], k: int) -> str:
    """``"core 3"`` for core index ``k`` (``"core 0"`` single-core)."""
    return f"core {core_no(cores, k)}"


_ARG_INDEX = re.compile(r"argument index (\d+)")


def name_arguments(message: str, op: Optional[OpPlan]) -> str:
    """``message`` with every ``argument index N`` of the runtime (which knows
    positions only, the device ABI (gpsimd_host/abi.h)) followed by the schema
    argument it is: ``argument index 1 (alpha: Scalar)``. Indices past the
    op's arguments (the ``curr_arg_ < num`` guard) are left as they are."""
    args = op.args if op is not None else ()

    def label(m: "re.Match[str]") -> str:
        i = int(m.group(1))
        return f"{m.group(0)} ({args[i].name}: {args[i].type})" if i < len(args) else m.group(0)
    return _ARG_INDEX.sub(label, message)


def report_text(image: DeviceImage, k: int, op: Optional[OpPlan] = None, run: int = 0) -> str:
    """``fault KIND in op NAME: message`` of core ``k``'s report in ``run``
    (faults.h kind names; the op is named when the fault happened in a
    launch), or "" when the core reported nothing."""
    r = image.report(run, k)
    bad = overwritten(r, image.scratch_size)
    if bad:
        return _overwritten_text(bad, op)
    msg = r.message.decode("utf-8", errors="replace").strip()
    if r.status == abi.STATUS_OK and not msg:
        return ""
    where = f" in op {op.name}" if op is not None else ""
    msg = _INPUT_AT.sub(lambda m: _input_at(image, int(m.group(1), 16)), msg)
    return f"fault {fault_name(r.fault_kind)}{where}" + (
        f": {name_arguments(msg, op)}" if msg else "")


_INPUT_AT = re.compile(r"the input at device address 0x([0-9a-f]+)")


def _input_at(image: DeviceImage, addr: int) -> str:
    """The input (its byte offset) or the bytes after one at device address
    ``addr`` (the runtime's read-only regions: stack_switch.cpp)."""
    for name, sbuf, off, n, guard in image.input_spans:
        at = addr - image.arenas[0][sbuf].device_base - off
        if 0 <= at < n:
            return f"input {name!r} at byte offset {at}"
        if n <= at < n + guard:
            return f"input {name!r} at byte offset {at} (past its {n} bytes)"
    return f"the inputs' memory at device address {addr:#x}"


def _overwritten_text(what: str, op: Optional[OpPlan]) -> str:
    """What a report no runtime writes (``records.overwritten``) says."""
    who = f"op {op.name}" if op is not None else "the kernel"
    return (f"its report was overwritten ({what}: no runtime writes that): a stray write of "
            f"{who} reached the model's records")


def _printf_tail(image: DeviceImage, k: int, run: int) -> str:
    text = image.printf_text(run, k)[-300:].replace("\n", "\\n")
    return f"; printf ends with: {text!r}" if text else ""


def running_cores(record: dict, job: Optional[int] = None) -> List[Tuple[int, int]]:
    """``(run, core index)`` of every launch that started and did not end
    (only those of process record ``job`` when given), in run order."""
    return [(p, k) for p, k, s in _slots(record, control.SLOT_STARTED)
            if job is None or s["job"] == job]


def _bad_allocs(image: DeviceImage, record: dict) -> List[int]:
    """Core indices whose launch ended in a ``std::bad_alloc`` (an
    allocation the memory limit refused)."""
    reports = ((k, image.report(p, k)) for p, k, _ in _slots(record, control.SLOT_DONE))
    return [k for k, r in reports if r.status != abi.STATUS_OK
            and fault_name(r.fault_kind) == "CXX_EXCEPTION" and b"std::bad_alloc" in r.message]


#: How a helper's end reads when its leader could not learn it (wait status
#: ``LOST``), or when it exited 0 before its whole run was done (``UNFINISHED``)
_HELPER_END = {
    LOST: (", and how is not known: a kernel waited for the model's processes itself, or had "
           "them reaped (SIGCHLD ignored), so their wait status was lost"),
    UNFINISHED: (" (exit status 0) before its run was done: a kernel ended it between two "
                 "launches (a thread of its own?)")}


def _helper_end_text(image: DeviceImage, cores: Sequence[CoreSpec], record: dict, run: int,
                     job: int, pairs: Sequence[Tuple[int, int]], st: int) -> str:
    """Process record ``job``, a helper of run ``run``, ended as ``st``
    (``_HELPER_END``): named by the core it was running (``pairs``: its
    launches left running), else by those it ran."""
    if pairs:
        p, k = pairs[0]
        return f"{core_name(cores, k)} ended its process{image.runs[p].label}{_HELPER_END[st]}"
    ran = [core_no(cores, k) for p, k, s in _slots(record, control.SLOT_DONE)
           if p == run and s["job"] == job]
    who = f" that ran {cores_text(ran)}" if ran else ""
    return f"the helper process{who}{image.runs[run].label} ended{_HELPER_END[st]}"


def check_runs(record: dict, afters: Sequence[int] = ()) -> None:
    """Check, from the worker's side, that a record which says the leader
    finished has every run the leader had to make: each run is done
    without a fault, every core of it launched and ended (or its binding
    failed, which is judged), until the one that stopped the vector
    (faulted, or left running by a process that ended badly); no run
    before it is skipped, unless a run made right after an earlier one
    (``afters``: each run's ``RunSpec.after``; the second call, made right
    after run 0) stopped the vector: faulted, or left running by a process
    a signal ended.

    Raises:
        control.RecordError: naming the run that was skipped or never made,
            or the core a done run never launched (a kernel wrote over the
            record or over the leader's state, or a kernel's thread ended
            a process of the model between two launches).
    """
    if not record["leader_done"] or record["error"]:
        return                           # (judged as an early end or a model error)
    passes = record["passes"]
    signalled = any(j["state"] == control.JOB_EXITED and os.WIFSIGNALED(j["wait_status"])
                    for j in record["jobs"])
    early = any(a >= 0 and q < len(passes) and (
        passes[q]["state"] == control.PASS_DONE and passes[q]["faulted"]
        or passes[q]["state"] == control.PASS_RUNNING and signalled)
        for q, a in enumerate(afters))
    for p, r in enumerate(passes):
        if r["state"] == control.PASS_DONE and not r["faulted"]:
            for k, s in enumerate(record["slots"][p][:r["ncores"]]):
                if s["state"] not in (control.SLOT_DONE, control.SLOT_BIND_FAILED):
                    raise control.RecordError(
                        f"run {p} is done, but core {k} was never launched in it or did "
                        f"not end; a kernel's thread that ended a process of the model "
                        f"between two launches?")
            continue
        if r["state"] in (control.PASS_SKIPPED, control.PASS_PENDING) and not early:
            what = "skipped" if r["state"] == control.PASS_SKIPPED else "never made"
            raise control.RecordError(f"run {p} was {what} though every run before it "
                                      f"ended without a fault")
        return                           # the run that stopped the vector


def _over_time(record: dict, timeout: float) -> Optional[Tuple[int, int]]:
    """``(run, core)`` of the longest launch of the first process whose
    launches in one run took longer together than the run's time limit,
    which its timer should have ended (a kernel that set a timer of its own,
    e.g. ``alarm()``); None when there is none."""
    limit = int(timeout * 1e9) + 1_000_000           # (1 ms: the clocks' rounding)
    per_job: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}     # (run, job) -> launches
    for p, k, s in _slots(record, control.SLOT_DONE):
        per_job.setdefault((p, s["job"]), []).append((s["t_end"] - s["t_start"], k))
    for (p, _), launches in per_job.items():
        if sum(d for d, _ in launches) > limit:
            return p, max(launches)[1]
    return None


def judge_run(image: DeviceImage, cores: Sequence[CoreSpec], outcome: RunOutcome,
              timeout: float, op: Optional[OpPlan] = None
              ) -> Tuple[List[str], bool, Optional[int]]:
    """Failures from the way the runs ended and from the core reports.

    Returns ``(problems, fatal, run)``: ``fatal`` when the outputs cannot
    be judged at all (time limit, crash, memory limit, model error, a
    corrupt record); faults reported by the runtime are not fatal (the
    outputs still tell which elements were written), but the output is
    then not compared. ``run`` is the index in ``image.runs`` of the run
    whose end or faults every problem describes (its label is in their
    text), None when they are not one run's.
    """
    if outcome.error:
        return [outcome.error], True, None
    rec = outcome.record
    if rec is None:
        st = outcome.wait_status
        why = outcome.record_error or "no record"
        if st is not None and os.WIFSIGNALED(st):
            return [f"the device model process died with "
                    f"{contain.signal_name(os.WTERMSIG(st))}"], True, None
        return [f"the vector's processes left no valid record of the run ({why}): a kernel "
                f"wrote over the model's memory"], True, None

    def running_text(pairs: Sequence[Tuple[int, int]]) -> str:
        """Who was running in the first run of ``pairs`` (in run order)."""
        if not pairs:
            return ""
        names = {core_no(cores, k) for p, k in pairs if p == pairs[0][0]}
        verb = "was" if len(names) == 1 else "were"
        return f" ({cores_text(names)} {verb} running{image.runs[pairs[0][0]].label})"

    def timed_out(pairs: Sequence[Tuple[int, int]]):
        return ([f"timed out after {timeout:g} s{running_text(pairs)}"], True,
                pairs[0][0] if pairs else None)

    if outcome.timed_out:
        return timed_out(running_cores(rec))
    bad_alloc = _bad_allocs(image, rec)
    if bad_alloc:
        return [exceeded(core_name(cores, bad_alloc[0]), outcome.memory)], True, None
    # the processes that ended badly, the first run's first (several may go
    # on side by side: the lowest core of the lowest run is named)
    bad = []
    for job in rec["jobs"]:
        st = job["wait_status"]
        if job["state"] != control.JOB_EXITED or st == CANCELLED:
            continue
        pairs = running_cores(rec, job["index"])
        if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0 and not pairs:
            continue
        bad.append((job["pass"], min((k for _, k in pairs), default=1 << 30), st, pairs,
                    job["index"]))
    bad.sort(key=lambda b: b[:2])
    if bad and not (rec["error"] and all(
            os.WIFEXITED(b[2]) and os.WEXITSTATUS(b[2]) == EXIT_MODEL_ERROR for b in bad)):
        run = bad[0][0]
        if any(os.WIFSIGNALED(b[2]) and os.WTERMSIG(b[2]) == signal.SIGALRM
               for b in bad if b[0] == run):
            # (the launches of that run left running, and of a run made right
            # after it in the same processes: the second call's)
            return timed_out([x for x in running_cores(rec)
                              if run in (x[0], image.runs[x[0]].after)])
        run, _, st, pairs, job = bad[0]
        if st in _HELPER_END:
            return ([_helper_end_text(image, cores, rec, run, job, pairs, st)], True,
                    pairs[0][0] if pairs else run)
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            if sig == signal.SIGKILL and outcome.oom_kills:
                who = core_name(cores, pairs[0][1]) if pairs else "a core"
                return [exceeded(who, outcome.memory)], True, None
            if pairs:
                p, k = pairs[0]
                detail = report_text(image, k, op, p)
                msg = (f"{core_name(cores, k)} crashed with {contain.signal_name(sig)}"
                       f"{image.runs[p].label}")
                if detail:
                    msg += f" ({detail})"
                return [msg + _printf_tail(image, k, p)], True, p
            return [f"the device model process died with {contain.signal_name(sig)}"], True, None
        code = os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1
        if pairs:
            p, k = pairs[0]
            if code != 0:
                return [f"{core_name(cores, k)} exited the process with status {code}"
                        f"{image.runs[p].label}"], True, p
            return [f"{core_name(cores, k)} ended the process (exit status 0)"
                    f"{image.runs[p].label}{_printf_tail(image, k, p)}"], True, p
        if not rec["error"]:
            return [f"the device model process exited with status {code}"], True, None
    if rec["error"]:
        return [rec["error"][2]], True, None
    st = outcome.wait_status
    if st is not None and os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        pairs = running_cores(rec)
        if sig == signal.SIGKILL and outcome.oom_kills and pairs:
            return [exceeded(core_name(cores, pairs[0][1]), outcome.memory)], True, None
        return [f"the device model process died with {contain.signal_name(sig)}"], True, None
    if not rec["leader_done"]:
        return ["the device model process ended early"], True, None
    late = _over_time(rec, timeout)
    if late:
        return timed_out([late])
    for p, k, _ in _slots(rec, control.SLOT_DONE) + _slots(rec, control.SLOT_BIND_FAILED):
        bad = overwritten(image.report(p, k), image.scratch_size)
        if bad:
            return [f"{core_name(cores, k)}{image.runs[p].label}: {_overwritten_text(bad, op)}"], \
                True, p

    # Faults of the first run that has any (a later one runs only when
    # the earlier ones had none), grouped: identical texts of several cores
    # are listed once.
    faults: Dict[str, List[int]] = {}
    for p, row in enumerate(rec["slots"]):
        state = rec["passes"][p]["state"]
        if state == control.PASS_SKIPPED:
            continue
        if state != control.PASS_DONE:
            break
        label = image.runs[p].label
        for k, s in enumerate(row):
            if s["state"] == control.SLOT_BIND_FAILED:
                detail = report_text(image, k, None, p)
                text = f"gpsimd_bind_core returned {s['bind_rc']}" + (
                    f" ({detail})" if detail else "")
            elif s["state"] == control.SLOT_DONE and (
                    s["status"] != 0 or image.report(p, k).status != abi.STATUS_OK):
                text = report_text(image, k, op, p) or "launcher returned a fault"
            else:
                continue
            faults.setdefault(text + label, []).append(core_no(cores, k))
        if faults:
            break
    problems = [f"{cores_text(nums)}: {text}" for text, nums in faults.items()]
    return problems, False, p if faults else None


def warnings_of(image: DeviceImage, cores: Sequence[CoreSpec]) -> List[str]:
    """What the cores' reports of the first run show that does not fail a
    vector, grouped like faults (``"cores 0-7: text"``):

    * each warning the runtime raised (abi.h ``gpsimd_core_report.warnings``,
      e.g. stream coherence under INCOHERENT_VERBOSE), and how many more
      did not fit its buffer (abi.h ``GPSIMD_WARNINGS_CAPACITY`` bytes);
    * a printf ring that wrapped: more than ``abi.PRINTF_CAPACITY`` (128 KiB)
      printed, the oldest bytes dropped (docs/kernel-api.md, Limits).
    """
    grouped: Dict[str, List[int]] = {}
    for k in range(image.num_cores):
        r = image.report(0, k)
        texts = [t for t in r.warnings.decode("utf-8", errors="replace").split("\n") if t]
        if r.warning_count > len(texts):
            texts.append(f"{r.warning_count - len(texts)} more warning(s) not kept")
        if r.printf_total > abi.PRINTF_CAPACITY:
            texts.append(f"printf output wrapped: {r.printf_total} bytes printed, the "
                         f"{abi.PRINTF_CAPACITY}-byte buffer kept the last {abi.PRINTF_CAPACITY} "
                         f"(the oldest {r.printf_total - abi.PRINTF_CAPACITY} dropped; "
                         f"docs/kernel-api.md \"Limits\")")
        for t in texts:
            grouped.setdefault(t, []).append(core_no(cores, k))
    return [f"{cores_text(nums)}: {t}" for t, nums in grouped.items()]


def output_warnings(output: List[dict]) -> List[str]:
    """A warning per stream a core wrote more to than the zygote keeps
    (``ZygoteClient.receive``'s ``output``), e.g. ``core 0: wrote 2.0 GiB
    to stdout (64 KiB kept)``."""
    from .settings import format_size
    keep = 2 * control.ZY["OUTPUT_KEEP"]
    return [f"core {o['core']}: wrote {format_size(o['bytes'])} to {o['stream']} "
            f"({format_size(keep)} kept)" for o in output if o["bytes"] > keep]


def expected_shape_hint(vector: VectorPlan, image: DeviceImage) -> Optional[str]:
    """When the output descriptor's size was taken from the expected result
    (no ``output.shape`` in the vector) and the kernel's result does not fit
    it (a core's report has ``REPORT_OUTPUT_SIZE``), say where that size
    came from: the reference or the inline values may be what is wrong, not
    the kernel."""
    if vector.output.shape is not None:
        return None
    if not any(image.report(0, k).flags & abi.REPORT_OUTPUT_SIZE for k in range(image.num_cores)):
        return None
    return (f"the output descriptor's shape {list(image.out_shape)} comes from "
            f"{vector.expected.source} (give output.shape to fix it, or check the reference)")
