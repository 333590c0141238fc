"""A library's vectors run one at a time, each bounded in time, in a
process of their own (``python -m gpsimd_emu.vector_service``): what the
pytest plugin runs its vectors through (:class:`VectorClient`),
:func:`run_explore` (a library's explore, for the plugin's explore items).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import List, Optional, Tuple

from .protocol import DEFAULT_TIMEOUT, MODEL_ROOT, RUNS_PER_VECTOR, first_call_right
from .process import end_group, run_group, start_group

__all__ = ["run_explore", "VectorClient", "RUNS_PER_VECTOR", "START_SLACK", "DEFAULT_TIMEOUT"]

#: Seconds a request may take beyond one more time limit (for the
#: reference, the inputs and the judging): for the first request, the
#: service's start (an interpreter, numpy, the library's zygote), on a
#: loaded machine.
START_SLACK = 10.0


def run_explore(plan: str, argv: List[str], timeout: float) -> Tuple[Optional[int], str]:
    """Run ``python -m gpsimd_explore PLAN ARGV`` (``scons explore``'s
    command) in a process group of its own that dies with this process:
    ``(exit status, its output)``, or ``(None, why)`` when it took
    more than ``timeout`` seconds or this process was interrupted (then
    re-raised); either way its whole group is ended (SIGKILL)."""
    ended = run_group([sys.executable, "-m", "gpsimd_explore", plan, *argv],
                      timeout, env=_model_env(None), grace=0)
    return ended.status, ended.out if ended.status is not None else f"explore: {ended.err}"


def _model_env(base: Optional[dict]) -> dict:
    """``base`` (default: this process's environment) with the folder that
    holds this package first on ``PYTHONPATH``: a child imports the model
    this process would, whatever is installed."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([MODEL_ROOT] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    return env


class VectorClient:
    """The vectors of one test plan, run in a process of their own
    (``python -m gpsimd_emu.vector_service``, in its own process group and
    dying with this process), one request at a time. A request that takes
    longer than ``timeout`` seconds for each of :data:`RUNS_PER_VECTOR`
    runs and one more (the reference, inputs and judging), plus
    :data:`START_SLACK` (a reference that never returns, say), ends the
    service's whole group; the next request starts a new one, told the
    verdicts of the vectors before (a vector that timed out is not run
    again there for the next vector's second call). A service that ends
    while it runs a vector after others (``os._exit``) runs it again in a
    new one, where it is the first: what an earlier vector's reference left
    running (a thread, a timer) ended it as well as that vector's own may.

    ``argv``: the service's arguments after the plan (``--root``,
    ``--timeout``, ``--no-checks``, ``--zygote``); ``env``: its
    environment (default: this process's).
    """

    def __init__(self, plan: str, argv: List[str], timeout: float,
                 env: Optional[dict] = None):
        self.plan = plan
        self.argv = list(argv)
        self.limit = timeout * (RUNS_PER_VECTOR + 1) + START_SLACK
        self.env = env
        self._proc: Optional[subprocess.Popen] = None
        self._buffer = b""
        #: op -> {vector: its first call was right}, for every vector this client ran
        self._verdicts: dict = {}
        self._ended = False     # (the service ended without answering the last request)

    def run(self, op: str, vector: str) -> dict:
        """The result of one vector (``VectorResult.to_json``), or ``{"error":
        TEXT}`` when the service failed to give one: it overran
        (``timed out after N s``), died (a new service, in which this
        vector is the first, died too), or could not read the plan."""
        fresh = self._proc is None
        doc = self._ask(op, vector)
        if self._ended and not fresh:
            doc = self._ask(op, vector)
        self._verdicts.setdefault(op, {})[vector] = first_call_right(doc)
        return doc

    def _ask(self, op: str, vector: str) -> dict:
        self._ended = False
        proc = self._proc or self._start()
        if isinstance(proc, dict):
            return proc
        verdicts = self._verdicts.setdefault(op, {})
        try:
            proc.stdin.write((json.dumps({"op": op, "vector": vector, "verdicts": verdicts})
                              + "\n").encode())
            proc.stdin.flush()
        except OSError:
            self._ended = True
            doc = self._lost("ended before the request")
        else:
            doc = self._reply(time.monotonic() + self.limit)
        return doc

    def close(self) -> None:
        """End the service (end of its input, then its whole group)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
        end_group(proc, grace=0)        # (and whatever is left of its group)

    def _start(self):
        self._buffer = b""
        self._proc = start_group(
            [sys.executable, "-m", "gpsimd_emu.vector_service", self.plan, *self.argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_model_env(self.env))
        first = self._reply(time.monotonic() + self.limit)
        if "ready" in first:
            return self._proc
        self._proc = None
        return first

    def _reply(self, deadline: float) -> dict:
        proc = self._proc
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                end_group(proc, grace=0)
                self._proc = None
                return {"error": f"timed out after {self.limit:g} s (a reference or the "
                                 f"emulator that never returns?); its processes were ended"}
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 20)
            if not chunk:
                self._ended = True
                return self._lost("ended", " (a reference that calls os._exit or crashes the "
                                           "process?)")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return self._lost(f"answered {line[:200]!r}")

    def _lost(self, what: str, why: str = "") -> dict:
        proc, self._proc = self._proc, None
        end_group(proc, grace=0)
        code = proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return {"error": f"the emulator's process {what} ({how}) without a result{why}"}
