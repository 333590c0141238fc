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

import errno
import fcntl
import os
import stat
import sys
import time

__all__ = ["LOCK_NAME", "LockBusy", "UnsafeLock", "acquire"]

LOCK_NAME = ".gpsimd-lock"

#: The open lock files of this process, by folder (held until exit).
_HELD = {}


class LockBusy(Exception):
    """Another process holds the build folder's lock (``wait=False``); the
    message names it."""


class UnsafeLock(Exception):
    """The lock's path holds a link or a file this build did not make; the
    message says which and what to do."""


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
        UnsafeLock: the lock's path is a symbolic link, a hard link, not a
            regular file, or another user's file (never written through).
        OSError: the folder or the lock file cannot be created.
    """
    key = os.path.realpath(build_dir)
    if key in _HELD:
        return
    os.makedirs(build_dir, exist_ok=True)
    path = os.path.join(build_dir, LOCK_NAME)
    # (a link planted in its place is refused, not followed: O_NOFOLLOW for
    # a symbolic link, the link count and the owner for a hard one)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeLock(f"{path} is a symbolic link, which this build did not make: "
                             f"remove it (and see who made it)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
        os.close(fd)
        why = ("is not a regular file" if not stat.S_ISREG(st.st_mode) else
               f"has {st.st_nlink} hard links" if st.st_nlink != 1 else
               f"is owned by uid {st.st_uid}")
        raise UnsafeLock(f"{path} {why}, which this build did not make: remove it "
                         f"(and see who made it)")
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
