"""One build per build folder at a time, whichever front end runs it.

Two builds writing the same outputs and the same records interleave their
writes (a test run reading an object the other build is relinking, the
other build's results or summary written over this one's). :func:`acquire`
takes an exclusive ``flock`` on ``<BUILD_DIR>/.gpsimd-lock`` for the life
of the process: a second ``scons`` of the same folder waits, saying which
process holds it (or, with ``wait=False``, stops at once). The kernel
releases the lock when its holder exits or dies, so a killed build never
leaves a stale lock; builds of different folders do not wait for each
other. A build started by the build that holds the lock (ninja's
regeneration of ``build.ninja``; under ``scons --experimental=ninja``,
which holds it while its ninja runs, every ninja step) goes on without
it: that build waits for this one.

A ``ninja`` run holds the same lock for its whole life
(:func:`hold_for_ninja`, the ``lock`` step every step of the ninja file
but the two that run on every run goes through first): the first of its
steps that does any work takes it, and leaves a process holding it until
that ninja process ends, however it ends; the lock file names the ninja
process. Another build of the folder (``scons``, ``scons -c``, a second
``ninja``) then waits or stops as above; a ninja step that finds the
folder held by a build that is not its own stops its run at once, naming
that build, before it writes anything.
"""

import errno
import fcntl
import os
import stat
import sys
import time

from . import buildfolder

__all__ = ["LOCK_NAME", "LockBusy", "UnsafeLock", "RunEnded", "acquire", "hold_for_ninja",
           "runs_ninja_file", "when_gone"]

LOCK_NAME = ".gpsimd-lock"

#: The open lock files of this process, by folder (held until exit).
_HELD = {}


class LockBusy(Exception):
    """Another process holds the build folder's lock (``wait=False``); the
    message names it."""


class RunEnded(Exception):
    """The ninja run a step was started by has ended (``kill -9`` of
    ninja as it started the step): the message names the process the step
    now belongs to."""


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


def acquire(build_dir: str, wait: bool = True, say=None, owner=None) -> None:
    """Hold the lock of ``build_dir`` (created if missing) until this process
    ends. ``say(text)`` reports that it waits (default: stderr). ``owner``:
    ``(pid, command)`` the lock file names as its holder (default: this
    process, ``scons`` and its arguments).

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
    pid, who = owner or (os.getpid(), " ".join(["scons"] + sys.argv[1:]))
    os.write(fd, f"process {pid} ({who}, since {time.strftime('%H:%M:%S')})".encode())
    _HELD[key] = fd


#: The name of a ninja run's mark in ninja's folder (``<BUILD_DIR>/.ninja``):
#: ``held.<ninja's pid>.<its start time>``, field 22 of ``/proc/<pid>/stat``
#: (a pid used again is another process). Its steps' shell looks for it.
MARK_PREFIX = "held."


def hold_for_ninja(build_dir: str, ninja_dir: str, runner: int) -> None:
    """The ``lock`` step: hold the lock of ``build_dir`` for the ninja run
    this step belongs to, until it ends, and mark (:data:`MARK_PREFIX`, in
    ``ninja_dir``) that the run holds it, so that its other steps go on
    without asking again. ``runner``: the pid of the program that runs the
    step (the parent of the step's shell, ``$PPID``, as the mark is named),
    whatever its name (``ninja``, ``ninja-build``, ``samu``...). Its steps
    ask at once: one at a time (a ``flock`` of ``ninja_dir``), the first
    takes the lock and leaves a process holding it
    (:func:`when_gone`). A build that started this ninja and holds
    the lock (``scons --experimental=ninja``) counts as this run's. A step
    run by hand (``runner`` is a shell) has no run to hold it for. The
    first step checks the build folder whole first, as a scons build does.

    Raises:
        LockBusy: another build holds it (the message names it).
        RunEnded: the ninja run of the step has ended (``runs_ninja_file``).
        UnsafeLock, OSError: as :func:`acquire`.
        buildfolder.UnsafeBuildFolder: the build folder is not safe to
            build in (``buildfolder.check``), checked before the lock.
    """
    from gpsimd_emu.client.protocol import runner_of
    ninja = runner_of(runner)
    if ninja is None:
        return
    pid, start = ninja
    if not runs_ninja_file(pid, os.path.join(build_dir, "build.ninja")):
        # (its shell started after ninja died: $PPID is the process that
        # took the orphan, pid 1, which would hold the lock for ever)
        raise RunEnded(f"the ninja run of this step has ended (its program is now process "
                       f"{pid} ({_command_of(pid)}), which runs no "
                       f"{os.path.join(build_dir, 'build.ninja')})")
    mark = os.path.join(ninja_dir, f"{MARK_PREFIX}{pid}.{start}")
    if not os.path.exists(mark):        # (this run's first step: before it writes)
        buildfolder.check(build_dir)
    os.makedirs(ninja_dir, exist_ok=True)
    gate = os.open(ninja_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if os.path.exists(mark):
            return                      # (another step of this run took it)
        acquire(build_dir, wait=False, owner=(pid, _command_of(pid)))
        fd = _HELD.pop(os.path.realpath(build_dir))
        if fd is not None:              # (None: the build that runs this ninja holds it)
            for name in os.listdir(ninja_dir):      # (earlier runs' marks)
                if name.startswith(MARK_PREFIX):
                    os.unlink(os.path.join(ninja_dir, name))
            when_gone(pid, start, keep_fd=fd)
            os.close(fd)
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644))
    finally:
        os.close(gate)


def runs_ninja_file(pid: int, ninja_file: str) -> bool:
    """Does process ``pid``'s command line name ``ninja_file`` (relative
    to this process's folder) as the file it runs (``-f FILE``, from its
    own folder), as every ninja run of a build folder's ``build.ninja``
    does (its paths are the project's: it runs from there)?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode("utf-8", "replace").split("\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    named = [b for a, b in zip(argv, argv[1:]) if a == "-f"] + \
        [a[2:] for a in argv if a.startswith("-f") and len(a) > 2]
    want = os.path.realpath(ninja_file)
    return any(os.path.realpath(os.path.join(cwd, n)) == want for n in named)


def _command_of(pid: int) -> str:
    """The program's name and arguments of process ``pid`` (``ninja -f
    build/build.ninja``), as the lock file names its holder."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode("utf-8", "replace").split("\0")[:-1]
    except OSError:
        argv = []
    return " ".join([os.path.basename(argv[0]) if argv else "ninja"] + argv[1:])


def when_gone(pid: int, start: int, keep_fd: int = -1, then=None) -> None:
    """Leave a process that waits until process ``pid`` (started at
    ``start``) ends, ``kill -9`` included, then calls ``then()`` (if
    given) and exits: in a session of its own (a Ctrl-C of the build does
    not end it before the build), its standard streams on ``/dev/null``
    (ninja waits for the end of its step's output) and every other file
    closed but ``keep_fd`` (above the standard streams), which it shares."""
    if os.fork():
        return
    try:
        os.setsid()
        os.chdir("/")
        null = os.open(os.devnull, os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(null, n)
        if keep_fd > 2:
            os.closerange(3, keep_fd)
            os.closerange(keep_fd + 1, 1 << 16)
        else:
            os.closerange(3, 1 << 16)
        from gpsimd_emu.client.protocol import proc_stat
        try:
            ended = os.pidfd_open(pid)
        except (AttributeError, OSError):
            ended = None
        stat_now = proc_stat(pid)
        if stat_now is not None and stat_now[2] == start:
            if ended is not None:
                import select
                select.select([ended], [], [])
            else:
                while (proc_stat(pid) or ("", 0, -1))[2] == start:
                    time.sleep(0.2)
        if then is not None:
            then()
    finally:
        os._exit(0)


def release_all() -> None:
    """Release every lock of this process (tests; exit does it anyway)."""
    for fd in _HELD.values():
        try:
            if fd is not None:
                os.close(fd)
        except OSError:
            pass
    _HELD.clear()
