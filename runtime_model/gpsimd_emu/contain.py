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
* ``MemoryCgroup``: a child memory cgroup of our own (cgroup v1 ``memory``
  or v2) whose limit is shared by every process of a vector, and whose
  ``oom_kill`` count tells a memory-limit breach from any other SIGKILL;
  ``limit_data``: ``RLIMIT_DATA``, the fallback (and a second fence).

Every function degrades to a weaker mechanism instead of failing where the
kernel or the privileges do not allow a stronger one; ``enter_namespace``'s
result and ``MemoryCgroup.create() is None`` say which one is in force. The
environment variable ``GPSIMD_EMU_CONTAIN`` (``pidns``, ``userns``,
``pgroup``) forces a mode (tests use it to cover each path).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
import time
from typing import Callable, List, Optional

__all__ = [
    "libc", "die_with_parent", "become_subreaper", "set_name", "children", "sweep", "kill_group",
    "wait_until",
    "enter_namespace", "sweep_namespace", "MemoryCgroup", "limit_data", "data_bytes",
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


class MemoryCgroup:
    """A child memory cgroup of our own cgroup, for one vector at a time.

    ``create`` returns None where no child cgroup can be made (no
    privileges, no memory controller, cgroup v2 without the controller
    delegated); callers then rely on ``limit_data`` alone.
    """

    def __init__(self, path: str, version: int):
        self.path = path
        self.version = version
        self._limit: Optional[int] = None

    @classmethod
    def create(cls, tag: str = "") -> Optional["MemoryCgroup"]:
        """Make ``gpsimd-emu-<pid><tag>`` under this process's memory cgroup
        (and remove siblings of that name whose process is gone)."""
        try:
            with open("/proc/self/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            return None
        v1 = [l.split(":", 2)[2] for l in lines if l.split(":")[1:2] and "memory" in l.split(":")[1].split(",")]
        candidates = []
        if v1:
            candidates.append(("/sys/fs/cgroup/memory" + v1[0], 1))
        v2 = [l.split(":", 2)[2] for l in lines if l.startswith("0::")]
        if v2 and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            candidates.append(("/sys/fs/cgroup" + v2[0], 2))
        for base, version in candidates:
            if version == 2:
                try:
                    with open(os.path.join(base, "cgroup.subtree_control")) as f:
                        if "memory" not in f.read().split():
                            continue
                except OSError:
                    continue
            _remove_stale(base)
            path = os.path.join(base, f"gpsimd-emu-{os.getpid()}{tag}")
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except OSError:
                continue
            cg = cls(path, version)
            try:
                cg.set_limit(1 << 40)
            except OSError:
                cg.close()
                continue
            return cg
        return None

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def set_limit(self, nbytes: int) -> None:
        """Limit the memory of the processes in the cgroup to ``nbytes``
        (swap included where the kernel accounts it).

        Raises:
            OSError: the limit files cannot be written.
        """
        if nbytes == self._limit:
            return
        if self.version == 1:
            memsw = os.path.join(self.path, "memory.memsw.limit_in_bytes")
            has_memsw = os.path.exists(memsw)
            if has_memsw:
                self._write("memory.memsw.limit_in_bytes", "-1")
            self._write("memory.limit_in_bytes", str(nbytes))
            if has_memsw:
                self._write("memory.memsw.limit_in_bytes", str(nbytes))
        else:
            self._write("memory.max", str(nbytes))
            try:
                self._write("memory.swap.max", "0")
            except OSError:
                pass
        self._limit = nbytes

    def oom_kills(self) -> int:
        """Processes the kernel killed so far for exceeding the limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def usage(self) -> int:
        """Bytes charged to the cgroup now (0 if it cannot be read)."""
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def procs_path(self) -> str:
        """The file a process writes its pid to, to join the cgroup."""
        return os.path.join(self.path, "cgroup.procs")

    def join(self) -> bool:
        """Move the calling process into the cgroup; False if that failed."""
        try:
            self._write("cgroup.procs", str(os.getpid()))
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Remove the cgroup (its processes must be gone; idempotent)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    return
                time.sleep(0.01)


def _remove_stale(base: str) -> None:
    """Remove ``gpsimd-emu-<pid>...`` cgroups under ``base`` whose process
    is gone (a run that was SIGKILLed could not remove its own)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith("gpsimd-emu-"):
            continue
        digits = name[len("gpsimd-emu-"):].split("-")[0]
        if not digits.isdigit() or os.path.exists(f"/proc/{digits}"):
            continue
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            pass


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
