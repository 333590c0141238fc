"""Stopping promptly: SIGTERM and SIGINT reach the actions that are running.

On SIGINT, SIGTERM or SIGHUP, SCons stops starting actions and waits for the
running ones to end (``SCons.Taskmaster.Job.Jobs``). Ctrl-C in a terminal
reaches every process of the foreground group, but a ``kill -TERM`` of
scons alone (a CI job cancelled, a supervisor stopping a build) reaches
only scons, which would then wait for a test run to finish its vectors.

:func:`install` sets ``$SPAWN`` to :func:`spawn`, which runs each action
exactly as SCons's own POSIX spawn does (``sh -c``) and keeps the running
ones in a set, and sets a wakeup fd (``signal.set_wakeup_fd``) that a
thread reads: every SIGINT, SIGTERM or SIGHUP the process gets is sent on
to every running action at once, as SIGTERM (a Python step a SIGINT
reaches while it imports would print a traceback), whatever handler SCons
has installed (it installs its own when the build starts). Each action runs in a process
group of its own, as ninja runs its commands, and the signal goes to the
whole group: the shell, the command it started (``/bin/sh`` is dash on
Debian, which forks the command instead of replacing itself) and that
command's children (a compiler driver's cc1plus). The emulator, on
SIGTERM or SIGINT, kills every process of its run and exits at once; a
run the emulator server forked (``emu_server``) gets the signal itself.

Ctrl-\\ (SIGQUIT), which SCons leaves at its default (the process dies),
would leave the actions, in groups of their own, running after the build
folder's lock is gone: :func:`install` gives it a handler (unless the
process started with it ignored) that stops them as SIGTERM does, lets no
action start any more (``scons -k`` would go on), waits until no action
has a live process (``QUIT_GRACE`` seconds, then SIGKILL) and the build's
emulator servers have exited, and then lets the process die of SIGQUIT.
Ninja (``--experimental=ninja``) stays in scons's group and is run by
:func:`call`: it ignores SIGQUIT and gets SIGTERM instead. Ctrl-Z
(SIGTSTP) stops scons alone, as it stops ninja alone: the running actions
go on to their end (a test run stopped halfway would count its stop
against its vectors' time limits), and the build goes on at ``fg``.

A terminal that goes away (its window closed, an ssh connection lost: a
SIGHUP, then every write to it fails with EIO) must not hang the build:
SCons writes a failed action's error from its job thread, and an
exception there ends the thread and leaves the build waiting for ever.
:func:`install` therefore puts ``sys.stdout`` and ``sys.stderr`` behind
:class:`Tolerant`, which drops what no one can read any more.
"""

import atexit
import errno
import os
import signal
import subprocess
import sys
import threading
import time

from gpsimd_emu.client.process import libc

from . import emu_server

__all__ = ["install", "spawn", "call", "Tolerant", "QUIT_GRACE"]

#: Seconds the actions have to end after Ctrl-\ before SIGKILL.
QUIT_GRACE = 5.0

_RUNNING = set()
_STARTING = [0]                         # actions let start and not yet in _RUNNING
_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()
_QUITTING = threading.Event()           # (SIGQUIT: no action starts any more)
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def spawn(sh, escape, cmd, args, env):
    """``$SPAWN``: run ``args`` with ``sh -c`` (SCons's POSIX spawn), keeping
    the process known while it runs; returns its exit status."""
    return _shell(sh, args, env)


def spawn_with_server(sh, escape, cmd, args, env):
    """``$SPAWN`` with the emulator server (``emu_server``): a test run is
    forked by the server, every other command runs as :func:`spawn` runs
    it; returns the exit status."""
    if not _begin():
        return -signal.SIGTERM
    runs = []

    def started(pid: int) -> None:
        runs.append(ByPid(pid))
        _started(runs[-1])

    try:
        emu_server.prestart(env)    # (after _begin: a quitting build waits for it)
        status = emu_server.run(args, env, started)
    finally:
        if not runs:
            _abandon()
        for run in runs:
            _ended(run)
    return _shell(sh, args, env) if status is None else status


def call(argv, **popen) -> int:
    """``subprocess.call`` for a command that stays in this process's group
    (ninja, which puts each of its commands in a group of its own): it is
    known while it runs, and stop signals reach it by its pid; it ignores
    SIGQUIT from the terminal, which :func:`_end_quit` turns into SIGTERM.
    Returns its exit status (``-SIGTERM`` when the build is quitting)."""
    tie = popen.pop("preexec_fn", None)

    def preexec() -> None:
        if tie is not None:
            tie()
        signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    return _tracked(argv, True, preexec_fn=preexec, **popen)


class ByPid:
    """An action signalled by its pid, not a group: a run the server forked
    (its supervising process, which stops its whole run on SIGINT or
    SIGTERM), or ninja (which stops its commands)."""

    def __init__(self, pid: int):
        self.pid = pid


def _begin() -> bool:
    """An action is about to start: False (start nothing) once the build
    got a stop signal (it would be stopped at once); else it counts as
    left (``_left``) until :func:`_started` or :func:`_abandon`."""
    with _LOCK:
        if _QUITTING.is_set() or _INTERRUPTED.is_set():
            return False
        _STARTING[0] += 1
        return True


def _abandon() -> None:
    with _LOCK:
        _STARTING[0] -= 1


def _started(run) -> None:
    with _LOCK:
        _RUNNING.add(run)
        _STARTING[0] -= 1
    if _INTERRUPTED.is_set():        # stopped while it was being started
        _signal(run, signal.SIGTERM)


def _ended(run) -> None:
    with _LOCK:
        _RUNNING.discard(run)


#: A process group of its own for each action (``process_group`` is new in
#: Python 3.11).
_OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


def _shell(sh, args, env):
    # (in a group of its own, an action that read the terminal would be
    # stopped for ever by SIGTTIN: it reads nothing, as ninja's commands)
    return _tracked([sh, "-c", " ".join(args)], False, env=env, close_fds=True,
                    stdin=subprocess.DEVNULL, **_OWN_GROUP)


def _tracked(argv, by_pid: bool, **popen) -> int:
    """Run ``argv`` (``subprocess.Popen`` with ``popen``) and return its exit
    status, known while it runs (by its pid with ``by_pid``, else by its
    process group); ``-SIGTERM``, starting nothing, once the build quits."""
    if not _begin():
        return -signal.SIGTERM
    try:
        proc = subprocess.Popen(argv, **popen)
    except BaseException:
        _abandon()
        raise
    run = ByPid(proc.pid) if by_pid else proc
    _started(run)
    try:
        return proc.wait()
    finally:
        _ended(run)


def interrupted() -> bool:
    """Whether this build received SIGINT, SIGTERM or SIGHUP."""
    return _INTERRUPTED.is_set()


def _forward(signum: int) -> None:
    """Send SIGTERM (for SIGINT, SIGTERM and SIGHUP alike) to every
    running action's process group: to the command ``sh -c`` runs as well
    as to the shell, since dash does not ``exec`` a command and dies of
    SIGTERM without passing it on (which would leave, e.g., a test run
    going until its vector's time limit). SIGTERM, not SIGINT: a Python
    step (``python -m gpsimd_build.steps``, ``gpsimd_emu.shapes``) that a
    SIGINT reaches while it imports prints a ``KeyboardInterrupt``
    traceback; SIGTERM ends it quietly, and every command of the build
    stops on it as on SIGINT. A test run still waiting for the emulator
    server to start it gives up (``emu_server.cancel``)."""
    _INTERRUPTED.set()
    emu_server.cancel()
    sig = signal.SIGTERM if signum in _SIGNALS else signum
    with _LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        _signal(proc, sig)


def _signal(proc, sig: int) -> None:
    """Send ``sig`` to a running action: by its pid (:class:`ByPid`), or to
    a shell's process group."""
    try:
        if isinstance(proc, ByPid):
            os.kill(proc.pid, sig)
        else:
            os.killpg(proc.pid, sig)
    except OSError:
        pass


def _left(seen: set) -> list:
    """The actions started so far (``seen`` gathers them) that still have a
    live process: running, or a process left in their group (:class:`ByPid`:
    its process). Zombies do not count: an orphan's can wait for
    PID 1 to reap it, and a zombie writes nothing."""
    with _LOCK:
        seen.update(_RUNNING)
        running = set(_RUNNING)
    live = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue                    # (gone)
        if fields[0] != b"Z":
            live.update((int(entry.name), -int(fields[2])))    # (its pid, minus its group)
    return [p for p in seen if p in running or
            (p.pid if isinstance(p, ByPid) else -p.pid) in live]


def _busy(seen: set) -> bool:
    """Is an action left (``_left``), or one let start and not yet known?"""
    return bool(_left(seen)) or _STARTING[0] > 0


def _quit(signum, frame) -> None:
    """The SIGQUIT handler, in the main thread when it next runs Python
    code (its real work is :func:`_end_quit`'s, in the forwarding thread):
    no action starts any more, and the running ones get SIGTERM now, even
    if a second SIGQUIT comes before :func:`_end_quit` runs (without the
    lock, which the main thread may hold); then a second SIGQUIT ends the
    process at once."""
    _QUITTING.set()
    _INTERRUPTED.set()
    for proc in list(_RUNNING):
        _signal(proc, signal.SIGTERM)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _default_quit() -> None:
    """SIGQUIT back to its default action, from any thread (``signal``
    of the C library: Python's own works in the main thread alone, which
    may be waiting in C code that a signal to another thread does not
    interrupt)."""
    libc().signal(signal.SIGQUIT, None)     # (NULL: SIG_DFL)


def _end_quit() -> None:
    """Stop the running actions as SIGTERM does (none starts any more); a
    second SIGQUIT from now on ends the process at once. Wait until no
    action has a process left (SIGKILL to those left after
    ``QUIT_GRACE`` seconds), stop the build's emulator servers and wait
    for them, then die of SIGQUIT, as the process would have without a
    handler; a build that ends meanwhile waits for that at exit
    (:func:`_exit_when_quitting`). (It polls: a process group has no
    descriptor to wait on. The threads that run the actions reap them
    meanwhile.)"""
    try:
        with _LOCK:
            _QUITTING.set()
        _forward(signal.SIGTERM)
        _default_quit()
        seen: set = set()
        deadline = time.monotonic() + QUIT_GRACE
        while _busy(seen) and time.monotonic() < deadline:
            time.sleep(0.01)
        for proc in _left(seen):
            _signal(proc, signal.SIGKILL)
        while _busy(seen) and time.monotonic() < deadline + 1:
            time.sleep(0.01)
        emu_server.close()
    finally:
        _default_quit()
        os.kill(os.getpid(), signal.SIGQUIT)


def _exit_when_quitting() -> None:
    """At exit (``atexit``): a build quitting on SIGQUIT waits for
    :func:`_end_quit` to end it."""
    if _QUITTING.is_set():
        threading.Event().wait(2 * QUIT_GRACE + 2)


def _watch(fd: int) -> None:
    """The forwarding thread: each signal number the wakeup fd receives
    (``signal.set_wakeup_fd``: written by the interpreter whenever a signal
    with a Python handler arrives, whichever handler SCons has installed)
    is forwarded to the running actions."""
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in _SIGNALS:
                _forward(signum)
            elif signum == signal.SIGQUIT:
                _end_quit()


class Tolerant:
    """A text stream whose writes and flushes are dropped once no one can
    read them (EIO: a terminal that hung up; EPIPE: a closed pipe); every
    other attribute is the stream's."""

    _GONE = (errno.EIO, errno.EPIPE)

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as e:
            if e.errno not in self._GONE:
                raise
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except OSError as e:
            if e.errno not in self._GONE:
                raise

    def __getattr__(self, name):
        return getattr(self._stream, name)


_installed = False


def install(env, server: bool = True) -> None:
    """Use :func:`spawn` (:func:`spawn_with_server` with ``server``) for
    ``env``'s actions and forward stop signals to the running ones: a
    wakeup fd and a thread that reads it, set up once per process from
    the main thread (SCons installs its own handlers when the build
    starts; the wakeup fd is not a handler, so it stays in place)."""
    global _installed
    env["SPAWN"] = spawn_with_server if server else spawn
    if _installed:
        return
    _installed = True
    sys.stdout, sys.stderr = Tolerant(sys.stdout), Tolerant(sys.stderr)
    read, write = os.pipe()             # (close-on-exec: no action inherits them)
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:                  # not the main thread: actions still stop, only later
        os.close(read)
        os.close(write)
        return
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL:     # (not when started ignoring it)
        libc()                          # (loaded now: _end_quit needs it)
        signal.signal(signal.SIGQUIT, _quit)
        atexit.register(_exit_when_quitting)
    threading.Thread(target=_watch, args=(read,), name="gpsimd-signals", daemon=True).start()
