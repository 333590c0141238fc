"""Running the cores of one vector in a forked child process.

The child loads each core object (RTLD_LOCAL, from its memfd), registers its
ops, checks its linker spec, binds the core (``gpsimd_bind_core``) and calls
the op's launcher, core after core, for pass 0 and, when the written masks
need it, pass 1; it reports progress to the parent. A crash (signal) or a
run past the time limit fails only that vector; the parent names the signal
and the running core (``gpsimd_emu.judge``).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from . import abi
from .cores import CoreSpec
from .image import DeviceImage
from .loader import LoadError, load_object

__all__ = ["ChildOutcome", "run_child"]


def _child_main(wfd: int, image: DeviceImage, cores: Sequence[CoreSpec],
                op_name: str, stack_scale: int) -> None:
    """Runs in the forked child: every core of pass 0 (and pass 1 when
    needed); one JSON line per event on ``wfd``. Never returns."""
    def emit(event: Dict[str, Any]) -> None:
        data = (json.dumps(event) + "\n").encode()
        while data:
            data = data[os.write(wfd, data):]

    current = -1
    try:
        try:  # a crashing kernel is an expected outcome: no core file,
            import faulthandler  # no Python traceback of the model
            import resource
            faulthandler.disable()
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        loaded = []
        keep = []
        for pass_index in (0, 1):
            if pass_index == 1:
                if not image.needs_second_pass():
                    break
                image.prepare_second_pass()
            faulted = False
            for k, spec in enumerate(cores):
                current = k
                emit({"event": "start", "core": k, "pass": pass_index})
                if pass_index == 0:
                    obj = load_object(spec.obj, spec.fd)
                    obj.check_lsp(spec.lsp, spec.core)
                    obj.register_ops()
                    loaded.append(obj)
                obj = loaded[k]
                launcher = obj.ops.get(op_name)
                if launcher is None:
                    raise LoadError(f"{spec.path}: op {op_name!r} is not registered "
                                    f"(get_func_name gives {', '.join(obj.ops) or 'nothing'})")
                cm = image.cores[k]
                cm.reset_report()
                arg_buf = ctypes.create_string_buffer(image.arg_stream, len(image.arg_stream))
                ret_buf = ctypes.create_string_buffer(image.out_desc, len(image.out_desc))
                keep.append((arg_buf, ret_buf))
                binding = image.binding(pass_index, k, 0 if spec.core is None else spec.core,
                                        stack_scale, ctypes.addressof(arg_buf),
                                        ctypes.addressof(ret_buf))
                keep.append(binding)
                rc = obj.bind_core(binding)
                if rc != 0:
                    emit({"event": "done", "core": k, "pass": pass_index, "bind": rc})
                    faulted = True
                    continue
                status = int(launcher())
                emit({"event": "done", "core": k, "pass": pass_index, "bind": 0,
                      "status": status})
                if status != abi.STATUS_OK or cm.report.status != abi.STATUS_OK:
                    faulted = True
            current = -1
            if faulted:
                break
        emit({"event": "end"})
    except LoadError as e:
        _safe_emit(emit, {"event": "error", "core": current, "message": str(e)})
    except BaseException as e:  # a model bug: report it, never hang the parent
        _safe_emit(emit, {"event": "error", "core": current,
                          "message": f"device model error: {type(e).__name__}: {e}"})
    finally:
        os._exit(0)


def _safe_emit(emit, event) -> None:
    try:
        emit(event)
    except BaseException:
        pass


@dataclass
class ChildOutcome:
    """How the child ended: the events it reported (``start`` / ``done`` /
    ``error`` / ``end``, each a dict with ``core`` and ``pass``), whether it
    was killed at the time limit, its wait status, and its run time in
    seconds."""

    events: List[Dict[str, Any]]
    timed_out: bool
    wait_status: Optional[int]
    elapsed: float


def run_child(image: DeviceImage, cores: Sequence[CoreSpec], op_name: str,
              stack_scale: int, timeout: float) -> ChildOutcome:
    """Fork a child that runs ``op_name`` on every core of ``image``; wait at
    most ``timeout`` seconds for it (then kill it).

    Raises:
        OSError: the pipe or the fork failed (a host problem).
    """
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        _child_main(wfd, image, cores, op_name, stack_scale)
    os.close(wfd)
    events: List[Dict[str, Any]] = []
    pending = b""
    timed_out = False
    deadline = start + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            try:
                ready, _, _ = select.select([rfd], [], [], remaining)
            except InterruptedError:
                continue
            if not ready:
                continue
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
        status = None
        if not timed_out:
            # EOF: the child is exiting; give it until the deadline. Wait on
            # a pidfd (readable when the child has exited) where the kernel
            # has one (Linux >= 5.3), else poll.
            pidfd = None
            if hasattr(os, "pidfd_open"):
                try:
                    pidfd = os.pidfd_open(pid)
                except OSError:
                    pidfd = None
            try:
                while True:
                    got, st = os.waitpid(pid, os.WNOHANG)
                    if got:
                        status = st
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        timed_out = True
                        break
                    if pidfd is not None:
                        try:
                            select.select([pidfd], [], [], remaining)
                        except InterruptedError:
                            pass
                    else:
                        time.sleep(0.002)
            finally:
                if pidfd is not None:
                    os.close(pidfd)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as e:
                if e.errno != errno.ESRCH:
                    raise
            _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    finally:
        os.close(rfd)
    return ChildOutcome(events, timed_out, status, time.monotonic() - start)

