"""A child process as the front ends start one: in a process group of
its own, dying with this process (:func:`tied_to_me`), bounded in time,
and ended whole (SIGTERM to its group, then SIGKILL) whatever happens,
interrupts included (:func:`run_group`). Standard library only."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
from typing import Callable, List, NamedTuple, Optional

__all__ = ["libc", "die_with_parent", "tied_to_me", "children", "start_group", "end_group",
           "Ended", "run_group"]

#: prctl(2)'s option: a signal when the parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1

@functools.lru_cache(maxsize=None)
def libc():
    """The C library (``ctypes.CDLL(None)``), loaded once."""
    return ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> bool:
    """``prctl(option, arg)``: True when it succeeded."""
    try:
        return libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0
    except (AttributeError, OSError):
        return False


def children(pid: int) -> List[int]:
    """Pids of process ``pid``'s live children (every thread's), from
    ``/proc/PID/task/*/children``; [] where that file does not exist."""
    out: List[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError), \
                open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(p) for p in f.read().split()]
    return out


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Ask for signal ``sig`` (default SIGKILL) when our parent dies
    (``PR_SET_PDEATHSIG``); exit at once (status 1) if ``parent``, the pid
    that forked us, is already gone. (As PID 1 of a new namespace our
    parent is outside it: ``getppid()`` is 0 and cannot be compared.) Safe
    between ``fork`` and ``exec`` (a ``preexec_fn``) once :func:`libc` was
    called before the fork."""
    prctl(PR_SET_PDEATHSIG, sig)
    ppid = os.getppid()
    if ppid != parent and not (ppid == 0 and os.getpid() == 1):
        os._exit(1)


def tied_to_me(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess``: the child gets ``sig`` when the
    process that calls this dies (``PR_SET_PDEATHSIG``, ``kill -9``
    included), and exits at once if it already has. The C library is
    loaded here, before the fork (:func:`libc`)."""
    libc()
    me = os.getpid()
    return lambda: die_with_parent(me, sig)


def start_group(argv: List[str], **popen) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen)`` in a group of its own, tied to
    this process (SIGKILL when it dies); OSError when it cannot start."""
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=tied_to_me(signal.SIGKILL),
                            **popen)


def end_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End ``proc``'s process group (it leads one): SIGTERM, then SIGKILL
    after ``grace`` seconds (0: SIGKILL at once); reaps ``proc`` and
    closes its pipes."""
    with contextlib.suppress(ProcessLookupError):       # (the group is gone)
        if grace > 0:
            os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
        if grace <= 0 or proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for stream in filter(None, (proc.stdin, proc.stdout, proc.stderr)):
        with contextlib.suppress(OSError):  # (what stdin held for a reader now gone)
            stream.close()


class Ended(NamedTuple):
    """How a :func:`run_group` child ended: ``status``, its exit status
    (None: it ran out of time, and ``err`` says so); ``out``, its standard
    output as text (with its standard error unless asked apart); ``err``,
    its standard error when asked apart, else ""."""
    status: Optional[int]
    out: str
    err: str


def run_group(argv: List[str], timeout: float, *, cwd: Optional[str] = None,
              env: Optional[dict] = None, stdin_path: Optional[str] = None,
              text_in: Optional[str] = None, apart: bool = False,
              grace: float = 5.0) -> Ended:
    """Run ``argv`` in a group of its own tied to this process, with
    ``text_in`` (UTF-8) or the file ``stdin_path`` (else nothing) on its
    standard input, and wait at most ``timeout`` seconds; its standard
    error goes with its output unless ``apart``. Its group is then ended
    (:func:`end_group`, ``grace`` seconds between SIGTERM and SIGKILL),
    whether it outlived the time limit or this process was interrupted
    (the interrupt is raised again).

    Raises:
        OSError: it cannot start.
    """
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = start_group(argv, stdin=subprocess.PIPE if text_in is not None else stdin,
                           stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE if apart else subprocess.STDOUT,
                           cwd=cwd, env=env)
    with proc:                          # (its pipes closed, whatever happens)
        try:
            out, err = proc.communicate(None if text_in is None else text_in.encode("utf-8"),
                                        timeout=timeout)
            return Ended(proc.returncode, out.decode("utf-8", "replace"),
                         (err or b"").decode("utf-8", "replace"))
        except subprocess.TimeoutExpired:
            return Ended(None, "", f"it took more than {timeout:g} s; its processes were ended")
        finally:
            if proc.returncode is None:
                end_group(proc, grace)
