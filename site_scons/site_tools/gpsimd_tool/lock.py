"""One build per build folder at a time.

Two builds writing the same outputs and the same ``.sconsign`` interleave
their writes (a test run reading an object the other build is relinking,
records of one build overwriting the other's). :func:`acquire` takes an
exclusive ``flock`` on ``<BUILD_DIR>/.gpsimd-lock`` for the life of the
process: a second build of the same folder waits, saying which process holds
it (or, with ``wait=False``, stops at once). The kernel releases the lock when
its holder exits or dies, so a killed build never leaves a stale lock;
builds of different folders do not wait for each other. A build started by
the build that holds the lock (ninja's regeneration of ``build.ninja``
under ``scons --experimental=ninja``, which holds it while its ninja
runs) goes on without it: that build waits for this one.
"""

import fcntl
import os
import sys
import time
__all__ = ["LOCK_NAME", "LockBusy", "acquire"]

LOCK_NAME = ".gpsimd-lock"

#: The open lock files of this process, by folder (held until exit).
_HELD = {}


class LockBusy(Exception):
    """Another process holds the build folder's lock (``wait=False``); the
    message names it."""


def _ancestor(text: str) -> bool:
    """Is the process the lock file ``text`` names (``process PID (...)``)
    an ancestor of this one?"""
    words = text.split()
    if len(words) < 2 or words[0] != "process" or not words[1].isdigit():
        return False
    holder, pid = int(words[1]), os.getppid()
    for _ in range(64):
        if pid == holder:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"


def acquire(build_dir: str, wait: bool = True, say=None) -> None:
    """Hold the lock of ``build_dir`` (created if missing) until this process
    ends. ``say(text)`` reports that it waits (default: stderr).

    Raises:
        LockBusy: ``wait`` is False and another process holds it.
        OSError: the folder or the lock file cannot be created.
    """
    key = os.path.realpath(build_dir)
    if key in _HELD:
        return
    os.makedirs(build_dir, exist_ok=True)
    path = os.path.join(build_dir, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        if _ancestor(holder):           # (it waits for us: waiting would never end)
            os.close(fd)
            _HELD[key] = None
            return
        if not wait:
            os.close(fd)
            raise LockBusy(f"the build folder {build_dir} is in use by {holder}") from None
        (say or (lambda t: sys.stderr.write(t + "\n")))(
            f"scons: waiting for the build folder {build_dir}, in use by {holder}")
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    who = " ".join(["scons"] + sys.argv[1:])
    os.write(fd, f"process {os.getpid()} ({who}, since {time.strftime('%H:%M:%S')})".encode())
    _HELD[key] = fd


def release_all() -> None:
    """Release every lock of this process (tests; exit does it anyway)."""
    for fd in _HELD.values():
        try:
            if fd is not None:
                os.close(fd)
        except OSError:
            pass
    _HELD.clear()
