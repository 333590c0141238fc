"""Judging one vector: what the way the child ended, the cores' reports and
the output copies say (faults, capacity peaks, crashes and time limits,
writes past the end, modified inputs, holes / overlaps / idle cores), and
the comparison of the merged output with the expected one
(``gpsimd_emu.compare``). Messages name the core, the op and element
ranges (ARCHITECTURE.md "The checks").
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from gpsimd_device.faults import fault_name
from gpsimd_device.plan import OpPlan

from . import abi
from .compare import Comparison, compare
from .cores import CoreSpec
from .image import DeviceImage
from .memory import POISON_A
from .merge import cores_text, format_ranges, guard_writes, merge_core_outputs
from .sandbox import ChildOutcome

__all__ = ["name_arguments", "judge_run", "warnings_of", "judge_output", "report_text"]


def _running_core(events: Sequence[Dict[str, Any]]) -> Optional[Tuple[int, int]]:
    """(core index, pass) started but not finished, if any."""
    done = {(e["core"], e["pass"]) for e in events if e.get("event") == "done"}
    for e in reversed(events):
        if e.get("event") == "start" and (e["core"], e["pass"]) not in done:
            return e["core"], e["pass"]
    return None


def _core_name(cores: Sequence[CoreSpec], k: int) -> str:
    c = cores[k].core
    return f"core {0 if c is None else c}"


_ARG_INDEX = re.compile(r"argument index (\d+)")


def name_arguments(message: str, op: Optional[OpPlan]) -> str:
    """``message`` with every ``argument index N`` of the runtime (which knows
    positions only, customop-marshalling.txt §2.1) followed by the schema
    argument it is: ``argument index 1 (alpha: Scalar)``. Indices past the
    op's arguments (the ``curr_arg_ < num`` guard) are left as they are."""
    args = op.args if op is not None else ()

    def label(m: "re.Match[str]") -> str:
        i = int(m.group(1))
        if i < len(args):
            return f"{m.group(0)} ({args[i].name}: {args[i].type})"
        return m.group(0)
    return _ARG_INDEX.sub(label, message)


def report_text(image: DeviceImage, k: int, op: Optional[OpPlan] = None) -> str:
    """``fault KIND in op NAME: message`` of core ``k``'s report (faults.h
    kind names; the op is named when the fault happened in a launch), or ""
    when the core reported nothing."""
    r = image.cores[k].report
    msg = r.message.decode("utf-8", errors="replace").strip()
    if r.status == abi.STATUS_OK and not msg:
        return ""
    where = f" in op {op.name}" if op is not None else ""
    return f"fault {fault_name(r.fault_kind)}{where}" + (
        f": {name_arguments(msg, op)}" if msg else "")


def _printf_tail(image: DeviceImage, k: int, limit: int = 300) -> str:
    text = image.cores[k].printf_text()
    if not text:
        return ""
    text = text[-limit:].replace("\n", "\\n")
    return f"; printf ends with: {text!r}"


def judge_run(image: DeviceImage, cores: Sequence[CoreSpec], outcome: ChildOutcome,
              timeout: float, op: Optional[OpPlan] = None) -> Tuple[List[str], bool]:
    """Failures from the way the child ended and from the core reports.

    Returns ``(problems, fatal)``: ``fatal`` when the outputs cannot be
    judged at all (timeout, crash, model error); faults reported by the
    runtime are not fatal (the outputs still tell which elements were
    written), but the output is then not compared.
    """
    events = outcome.events
    running = _running_core(events)
    again = lambda p: " (second run)" if p else ""
    if outcome.timed_out:
        where = (f" ({_core_name(cores, running[0])} was running{again(running[1])})"
                 if running else "")
        return [f"timed out after {timeout:g} s{where}"], True
    st = outcome.wait_status
    if st is not None and os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if running:
            k = running[0]
            detail = report_text(image, k, op)
            msg = f"{_core_name(cores, k)} crashed with {name}{again(running[1])}"
            if detail:
                msg += f" ({detail})"
            return [msg + _printf_tail(image, k)], True
        return [f"the device model process died with {name}"], True
    errors = [e for e in events if e.get("event") == "error"]
    if errors:
        return [errors[0].get("message", "device model error")], True
    if st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) != 0:
        who = _core_name(cores, running[0]) if running else "the device model"
        return [f"{who} exited the process with status {os.WEXITSTATUS(st)}"], True
    if running:
        return [f"{_core_name(cores, running[0])} ended the process "
                f"(exit status {os.WEXITSTATUS(st) if st is not None else '?'})"
                + _printf_tail(image, running[0])], True
    if not any(e.get("event") == "end" for e in events):
        return ["the device model process ended early"], True

    # Faults, grouped: identical texts of several cores are listed once.
    faults: Dict[str, List[int]] = {}
    for e in events:
        if e.get("event") != "done":
            continue
        k = e["core"]
        if e.get("bind", 0) != 0:
            detail = report_text(image, k)
            text = f"gpsimd_bind_core returned {e['bind']}" + (f" ({detail})" if detail else "")
        elif e.get("status", 0) != abi.STATUS_OK or image.cores[k].report.status != abi.STATUS_OK:
            text = report_text(image, k, op) or f"launcher returned {e.get('status')}"
        else:
            continue
        core_no = cores[k].core if cores[k].core is not None else 0
        faults.setdefault(text, [])
        if core_no not in faults[text]:
            faults[text].append(core_no)
    problems = [f"{cores_text(nums)}: {text}" for text, nums in faults.items()]

    for k in range(image.num_cores):
        r = image.cores[k].report
        name = _core_name(cores, k)
        for what, used, cap in (("TCM pool", r.tcm_peak, abi.TCM_POOL_SIZE),
                                ("dataram", r.dataram_peak, abi.DATARAM_SIZE),
                                ("scratch window", r.scratch_peak, image.cores[k].scratch.size)):
            if used > cap:
                problems.append(f"{name} used {used} bytes of the {what} (capacity {cap})")
    return problems, False


def warnings_of(image: DeviceImage, cores: Sequence[CoreSpec]) -> List[str]:
    """What the cores' reports show that does not fail a vector, grouped
    like faults (``"cores 0-7: text"``):

    * each warning the runtime raised (abi.h ``gpsimd_core_report.warnings``,
      e.g. stream coherence under INCOHERENT_VERBOSE), and how many more
      did not fit the 1024-byte buffer;
    * a printf ring that wrapped: more than ``abi.PRINTF_CAPACITY`` (128 KiB)
      printed, the oldest bytes dropped (device-api.md "Limits").
    """
    grouped: Dict[str, List[int]] = {}
    for k in range(image.num_cores):
        r = image.cores[k].report
        texts = [t for t in r.warnings.decode("utf-8", errors="replace").split("\n") if t]
        if r.warning_count > len(texts):
            texts.append(f"{r.warning_count - len(texts)} more warning(s) not kept")
        if r.printf_total > abi.PRINTF_CAPACITY:
            texts.append(f"printf output wrapped: {r.printf_total} bytes printed, the "
                         f"{abi.PRINTF_CAPACITY}-byte buffer kept the last {abi.PRINTF_CAPACITY} "
                         f"(the oldest {r.printf_total - abi.PRINTF_CAPACITY} dropped; "
                         f"device-api.md \"Limits\")")
        core_no = cores[k].core if cores[k].core is not None else 0
        for t in texts:
            nums = grouped.setdefault(t, [])
            if core_no not in nums:
                nums.append(core_no)
    return [f"{cores_text(nums)}: {t}" for t, nums in grouped.items()]


def judge_output(image: DeviceImage, cores: Sequence[CoreSpec], expected: np.ndarray,
                 rtol: float, atol: float, passes: int) -> Tuple[List[str], Optional[Comparison]]:
    """Problems the output shows, and the comparison with ``expected`` (None
    when elements were never written). With checks: writes past the end
    (guard zones), modified inputs, holes / overlaps / idle cores from the
    written masks of both passes; without checks, only the comparison of
    the one shared output."""
    problems: List[str] = []
    if not image.checks:
        actual = image.output_bytes(0, 0).view(image.out_dtype.numpy).reshape(image.out_shape)
        return problems, compare(actual, expected, image.out_dtype, rtol, atol)
    core_ids = [0 if c.core is None else c.core for c in cores]
    for k in range(image.num_cores):
        beyond = guard_writes(image.guard_bytes(0, k), POISON_A, image.itemsize, image.num_elem)
        if beyond:
            problems.append(f"{_core_name(cores, k)} wrote past the end of the output: "
                            f"elements {format_ranges(beyond)} (the output has "
                            f"{image.num_elem} elements)")
    for name, n in image.modified_inputs():
        problems.append(f"input {name!r} was modified ({n} bytes changed)")

    masks = image.masks(0)
    if passes > 1:
        masks = [a | b for a, b in zip(masks, image.masks(1))]
    outputs = [image.output_bytes(0, k) for k in range(image.num_cores)]
    merged = merge_core_outputs(outputs, image.itemsize, image.num_elem,
                                masks=masks, core_ids=core_ids)
    holes = bool(merged.holes)
    merge_problems = list(merged.problems)
    if (image.num_cores == 1 and holes
            and image.cores[0].report.flags & abi.REPORT_COPY_PATH):
        # the copy path wrote every element (§6.4): the holes are elements of
        # the returned tensor the kernel never wrote (empty() is poisoned
        # with the pass's poison byte, abi.h GPSIMD_CHECK_POISON_EMPTY)
        merge_problems = [
            "uninitialised elements reached the output through the copy path (the returned "
            "tensor, copied by customop_return_tensor, was never written there; e.g. "
            f"torch::empty() storage): {format_ranges(merged.holes)}"]
    if image.num_cores > 1 and image.num_elem < image.num_cores and merged.idle_cores:
        # fewer elements than cores: a fair split leaves some cores idle
        merge_problems.remove(merged.idle_text)
    problems += merge_problems
    if holes:
        return problems, None
    actual = merged.merged.view(image.out_dtype.numpy).reshape(image.out_shape)
    return problems, compare(actual, expected, image.out_dtype, rtol, atol)

