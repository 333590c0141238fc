"""Containment of the processes a test run starts (stdlib and ctypes only).

What this module gives the supervisor, the zygote and a vector's processes
(ARCHITECTURE.md "Processes and containment"):

* ``die_with_parent``: ``PR_SET_PDEATHSIG`` (SIGKILL when the parent dies),
  checked against the parent that forked us, so a parent that died before
  the call is noticed too;
* ``become_subreaper`` / ``children`` / ``sweep``: a
  ``PR_SET_CHILD_SUBREAPER`` process inherits every orphaned descendant, so
  that it can kill and reap whatever a vector left behind;
* ``enter_namespace``: the zygote becomes PID 1 of a new PID namespace
  (root: ``unshare(CLONE_NEWPID)``; else inside an unprivileged user
  namespace), so that every process of its vectors dies with it and is
  swept after each vector (``sweep_namespace``); without one, each vector
  has its own process group (``killpg``) and the zygote is a subreaper;
* ``limit_data``: ``RLIMIT_DATA``, the fallback of the memory cgroup
  (``gpsimd_emu.cgroup``) and a second fence; ``prefer_for_oom``: the
  vector, not the zygote sharing its cgroup, is the OOM killer's pick.

Every function degrades to a weaker mechanism instead of failing where the
kernel or the privileges do not allow a stronger one; ``enter_namespace``'s
result and ``cgroup.MemoryCgroup.create() is None`` say which one is in
force. The
environment variable ``GPSIMD_EMU_CONTAIN`` (``pidns``, ``userns``,
``pgroup``) forces a mode (tests use it to cover each path).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from typing import Callable, List, Optional

__all__ = [
    "libc", "die_with_parent", "become_subreaper", "set_name", "children", "sweep", "kill_group",
    "wait_until",
    "enter_namespace", "sweep_namespace", "prefer_for_oom", "limit_data", "data_bytes",
]

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000

_libc = None


def libc():
    """The C library (``ctypes.CDLL(None)``), loaded once."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _prctl(option: int, arg: int) -> bool:
    try:
        return libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0
    except (AttributeError, OSError):
        return False


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Ask for signal ``sig`` (default SIGKILL) when our parent dies
    (``PR_SET_PDEATHSIG``); exit at once (status 1) if ``parent``, the pid
    that forked us, is already gone. (As PID 1 of a new namespace our
    parent is outside it: ``getppid()`` is 0 and cannot be compared.) Safe
    between ``fork`` and ``exec`` (a ``preexec_fn``) once :func:`libc` was
    called before the fork."""
    _prctl(PR_SET_PDEATHSIG, sig)
    ppid = os.getppid()
    if ppid != parent and not (ppid == 0 and os.getpid() == 1):
        os._exit(1)


def become_subreaper() -> bool:
    """Make orphaned descendants our children (``PR_SET_CHILD_SUBREAPER``).
    Returns False where the kernel does not allow it."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_name(name: str) -> None:
    """The process name ``ps`` and ``/proc/PID/comm`` show (15 bytes kept)."""
    buf = ctypes.create_string_buffer(name.encode()[:15])
    try:
        libc().prctl(PR_SET_NAME, buf, 0, 0, 0)
    except (AttributeError, OSError):
        pass


def children() -> List[int]:
    """Pids of this process's children (every thread's), from
    ``/proc/self/task/*/children``; [] where that file does not exist."""
    out: List[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def wait_until(pid: int, deadline: float, poll: float = 0.001) -> Optional[int]:
    """The wait status of child ``pid`` once it has ended (reaped), or None
    when ``deadline`` (``time.monotonic()``) comes first (it is left
    running, not reaped). Waits on a pidfd where the kernel has them, else
    polls every ``poll`` seconds.

    Raises:
        ChildProcessError: ``pid`` is not a child of this process.
    """
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
    try:
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                return status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)
            else:
                time.sleep(min(poll, remaining))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (nothing if it is gone)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def sweep(keep: tuple = (), limit: float = 5.0) -> int:
    """Kill (SIGKILL, with its process group) and reap every child but
    ``keep``, again until none is left (a subreaper keeps inheriting
    orphans while their parents die), for at most ``limit`` seconds.
    Returns how many processes were killed."""
    killed = 0
    deadline = time.monotonic() + limit
    while True:
        pids = [p for p in children() if p not in keep]
        for pid in pids:
            kill_group(pid)
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        reaped = _reap_others(keep)
        if not pids and not reaped:
            return killed
        if time.monotonic() > deadline:
            return killed
        if pids and not reaped:
            time.sleep(0.001)


def _reap_others(keep: tuple) -> int:
    """Reap exited children that are not in ``keep``; returns how many."""
    n = 0
    for pid in children():
        if pid in keep:
            continue
        try:
            got, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        n += bool(got)
    return n


def enter_namespace(keep_out: tuple = (), on_exit: Optional[Callable[[], None]] = None) -> str:
    """Make the calling process (the zygote, at its start) PID 1 of a new
    PID namespace, so that every process a vector starts is in it, is an
    orphan of it when its parent dies, and dies with it: ``unshare`` and a
    fork; the process that called stays outside, closes the descriptors
    ``keep_out``, relays the namespace's end as its own (after calling
    ``on_exit``, e.g. to remove a cgroup) and never returns.

    Modes, returned: ``"pidns"`` (``CLONE_NEWPID``: root), ``"userns"``
    (an unprivileged user namespace around it), ``"pgroup"`` (neither can
    be made: each vector has its process group and this process becomes a
    subreaper). ``$GPSIMD_EMU_CONTAIN`` forces one (tests).
    """
    forced = os.environ.get("GPSIMD_EMU_CONTAIN", "")
    tries = {"pidns": [CLONE_NEWPID], "userns": [CLONE_NEWUSER | CLONE_NEWPID],
             "pgroup": []}.get(forced, [CLONE_NEWPID, CLONE_NEWUSER | CLONE_NEWPID])
    for flags in tries:
        if libc().unshare(flags) != 0:
            continue
        outside = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(outside)
            return "pidns" if flags == CLONE_NEWPID else "userns"
        for fd in keep_out:
            try:
                os.close(fd)
            except OSError:
                pass
        _relay(pid, on_exit)
    become_subreaper()
    return "pgroup"


def _relay(pid: int, on_exit: Optional[Callable[[], None]] = None) -> None:
    """Wait for ``pid`` and end as it ended (its exit status or signal),
    calling ``on_exit`` first."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    while True:
        try:
            _, st = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
    if on_exit is not None:
        try:
            on_exit()
        except Exception:
            pass
    if os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(st) & 0xFF)


def sweep_namespace() -> int:
    """As PID 1 of a PID namespace: SIGKILL every other process of it and
    reap them all (``kill(-1)`` reaches exactly the namespace). Returns the
    number reaped."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    n = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return n
        except InterruptedError:
            continue
        n += 1


def prefer_for_oom() -> None:
    """Make the calling process the first the kernel's OOM killer picks
    (``oom_score_adj`` 1000: a process may always raise its own), so that
    the vector, not the zygote that shares its memory cgroup, is killed."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def data_bytes() -> int:
    """Bytes of private data mappings of this process (``VmData``), the
    quantity ``RLIMIT_DATA`` bounds; 0 when unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def limit_data(limit: int) -> None:
    """Limit this process's private data (``RLIMIT_DATA``: heap and private
    mappings; the shared device image does not count) to ``limit`` bytes
    (0: no change). Failure is ignored (the cgroup, where there is one,
    still holds)."""
    if limit <= 0:
        return
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
