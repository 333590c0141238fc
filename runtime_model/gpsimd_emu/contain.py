"""Containment of the processes a test run starts, for the supervisor,
the servers and the worker (stdlib, ctypes and the zygote program's name,
``gpsimd_device.zygote``, only; ARCHITECTURE.md "Processes and
containment"): children that die with their parent (``die_with_parent``,
``fork_child``), a subreaper's end of every orphaned descendant
(``become_subreaper``, ``children``, ``sweep``), a child's end within a
time limit (``end_within``). The vectors' own containment (namespaces,
the memory cgroup, privileges) is the zygote's, in C (``sandbox.c``).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from typing import Callable, Optional

from gpsimd_device.zygote import PROGRAM_NAME

# (the client's, which the front ends use without the rest of the emulator)
from .client.process import children, die_with_parent, libc, prctl
from .client.protocol import proc_stat

__all__ = [
    "libc", "die_with_parent", "fork_child", "become_subreaper", "set_name", "children", "sweep",
    "kill", "end_within", "signal_name", "TERM_GRACE",
]

PR_SET_CHILD_SUBREAPER = 36


def signal_name(sig: int) -> str:
    """``SIGSEGV`` for 11; ``signal N`` for a number with no name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def become_subreaper() -> bool:
    """Make orphaned descendants our children (``PR_SET_CHILD_SUBREAPER``).
    Returns False where the kernel does not allow it."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_name(name: str) -> None:
    """The process name ``ps`` and ``/proc/PID/comm`` show (the kernel
    keeps 15 bytes), written to ``/proc/self/comm``."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as f:
        f.write(name)


def fork_child(body: Callable[[], int]) -> int:
    """Fork a child that dies with this process (:func:`die_with_parent`),
    runs ``body`` and exits with what it returns (a ``SystemExit``'s code;
    130 for a Ctrl-C, quietly; 2 for another exception, its traceback
    printed: a model bug is never a silent exit); returns its pid. Never returns in the child."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 2
    try:
        die_with_parent(parent)
        code = body()
    except SystemExit as e:             # argparse: a bad argument
        code = e.code if isinstance(e.code, int) else 2
    except KeyboardInterrupt:           # (Ctrl-C before ``body`` took its signals)
        code = 128 + signal.SIGINT
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def kill(pid: int, sig: int = signal.SIGKILL, group: bool = False) -> None:
    """Send ``sig`` to ``pid`` (``group``: to the process group it leads);
    nothing if it is gone."""
    with contextlib.suppress(OSError):
        (os.killpg if group else os.kill)(pid, sig)


def end_within(pid: int, seconds: float) -> Optional[int]:
    """Child ``pid``'s wait status once it ends (reaped) within ``seconds``;
    else SIGKILL it, reap it and return None.

    Raises:
        ChildProcessError: ``pid`` is not a child of this process.
    """
    deadline = time.monotonic() + seconds
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return status
        if time.monotonic() >= deadline:
            kill(pid)
            os.waitpid(pid, 0)
            return None
        _wait_any([pid], deadline - time.monotonic())


#: Seconds ``sweep`` gives a zygote's relay (``sandbox.c``, named as the
#: program) to end on SIGTERM, removing its memory cgroup, before SIGKILL.
TERM_GRACE = 1.0


def _wait_any(pids: list, seconds: float) -> None:
    """Until one of the children ``pids`` ends (their pidfds; 1 ms at most
    where the kernel has none), or ``seconds`` pass."""
    fds = []
    try:
        for pid in pids:
            with contextlib.suppress(OSError):
                fds.append(os.pidfd_open(pid))
        seconds = max(0.0, seconds)
        select.select(fds, [], [], seconds if len(fds) == len(pids) else min(seconds, 0.001))
    finally:
        for fd in fds:
            os.close(fd)


def sweep(limit: float = 5.0, grace: float = TERM_GRACE) -> int:
    """End and reap every child, again until none is left (a
    subreaper keeps inheriting orphans while their parents die), for at
    most ``grace`` + ``limit`` seconds: a zygote's relay gets SIGTERM and
    ``grace`` seconds (``TERM_GRACE``) to end, every other child (and a
    relay left after them) SIGKILL, with its process group. Returns how
    many processes it signalled."""
    start = time.monotonic()
    signalled: set = set()
    while True:
        patient = time.monotonic() - start < grace
        pids = children(os.getpid())
        relays = 0
        for pid in pids:
            if patient and (proc_stat(pid) or ("",))[0] == PROGRAM_NAME:
                relays += 1
                if pid not in signalled:
                    kill(pid, signal.SIGTERM)
            else:
                kill(pid, group=True)
                kill(pid)
            signalled.add(pid)
        reaped = _reap_exited()
        if (not pids and not reaped) or time.monotonic() - start > grace + limit:
            return len(signalled)
        if pids and not reaped:     # (a killed child takes a moment; a relay, its grace)
            _wait_any(pids, grace - (time.monotonic() - start) if relays == len(pids)
                      else 0.001)


def _reap_exited() -> int:
    """Reap exited children; returns how many."""
    n = 0
    for pid in children(os.getpid()):
        try:
            got, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        n += bool(got)
    return n
