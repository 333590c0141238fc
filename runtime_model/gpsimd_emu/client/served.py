"""Test runs handed to a build's emulator server (``gpsimd_emu.server``):
the client side of both build paths (standard library only, nothing else
of the package, no numpy): :func:`hand_off` (the SCons tool's,
``gpsimd_tool.emu_server``, with scons as the served process), and
:func:`run_step` and :func:`prestart_step` (a ninja step's, its ninja
process served: ``protocol.find_ninja``). Whatever fails, nothing was
started and the caller runs the command itself. Who starts a server, when
it ends, and the protocol: ARCHITECTURE.md "Processes and containment"
(``protocol.encode``'s dicts: requests ``{"argv", "cwd", "env", "umask",
"files"}`` with the write ends of the run's stdout and stderr, ``{"load":
true}``, ``{"stop": true}``; answers ``{"here": reason}``, or ``{"pid":
n}`` then ``{"status": wait status}``).
"""

from __future__ import annotations

# (a command's start-up is what this saves: only modules that cost no
# import time, no json, socket, signal or typing, which import re and enum)
import _signal as signal
import _socket as socket
import errno
import os
import select
import struct
import sys
import time

from .protocol import (LOG_ENV, SERVER_ENV, STOP_SIGNALS, decode, encode, end_by,
                       find_ninja, model_files, peer, server_key, server_name)

__all__ = ["hand_off", "name_for", "start_server", "ask_to_load", "stop_server", "run_step",
           "prestart_step", "FIRST_REPLY_TIMEOUT", "STATUS_GRACE", "STOP_WAIT"]

#: Seconds a client waits for the server's first answer (it comes in
#: milliseconds: a server that is stopped, or a process of the same user
#: that holds its name, fails the run with a message, never hangs it).
FIRST_REPLY_TIMEOUT = 10.0
#: Seconds the server has to report a run's end once the run has ended.
STATUS_GRACE = 2.0
#: Seconds ``stop_server`` waits for a server to end its runs and exit.
STOP_WAIT = 10.0
_MAX_REPLY = 1 << 12
#: What ``_Relay.wait`` returns when its time is up.
_TIMED_OUT = "timed out"


def _log(env: dict, line: str) -> None:
    """Append ``line`` to the hand-offs' log (``LOG_ENV``), if any."""
    path = env.get(LOG_ENV)
    if path:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass


def _here(env: dict, why: str) -> None:
    """Hand the run back to the caller (``hand_off``'s None), logging ``why``."""
    _log(env, "here: " + why)


def _connect(name: bytes):
    """A connection to the server ``name`` of this user, or None (also when
    the name's queue is full, as another user's listener that never accepts
    keeps it: a connect that would wait fails at once)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.setblocking(False)
        sock.connect(name)
        sock.setblocking(True)
        if peer(sock)[1] == os.getuid():
            return sock
    except OSError:
        pass
    sock.close()
    return None


def start_server(name: bytes, python: str, env: dict, load: bool) -> bool:
    """Start ``python -m gpsimd_emu.server`` for the server ``name`` (of
    ``protocol.server_name``) with the environment ``env`` in this
    directory; ``load``: it loads the model at once (else at its first
    request). Returns once its name is bound (requests then wait in its
    queue): True when this call started it, False when another holds the
    name or it could not start. The server is in a process group of its
    own and not this process's child (ARCHITECTURE.md "Processes and
    containment")."""
    served = name.decode().split("/")[2]
    args = [python, "-m", "gpsimd_emu.server", name[1:].decode(), *served.split(".")]
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid = os.posix_spawn(python, args + (["--load"] if load else []), env,
                                 file_actions=[(os.POSIX_SPAWN_DUP2, null, fd)
                                               for fd in (0, 1, 2)], setpgroup=0)
        finally:
            os.close(null)
        _, status = os.waitpid(pid, 0)
    except OSError:
        return False
    return os.waitstatus_to_exitcode(status) == 0


def name_for(served: "tuple[int, int]", python: str, env: dict,
             files: "str | None" = None) -> bytes:
    """The name of the server that runs ``python -m gpsimd_emu`` with the
    environment ``env`` in this directory for the process ``served``."""
    return server_name(served, server_key(python, env, os.getcwd(), files))


def ask_to_load(name: bytes, python: str, env: dict) -> str:
    """Have the server ``name`` (``name_for``) load the model now (start
    it so when there is none): what was done, for the log."""
    sock = _connect(name)
    if sock is None:
        return "started a server" if start_server(name, python, env, True) else \
            "a server is being started"
    try:
        sock.send(encode({"load": True}))
        return "asked the server to load the model"
    except OSError:
        return "the server did not take the request"
    finally:
        sock.close()


def stop_server(name: bytes) -> None:
    """End the server ``name`` of this process (``name_for``) and its
    runs, and wait (``STOP_WAIT`` seconds at most) until it has exited."""
    sock = _connect(name)
    if sock is None:
        return
    try:
        pidfd = os.pidfd_open(peer(sock)[0])
    except OSError:
        pidfd = None
    try:
        sock.send(encode({"stop": True}))
        if pidfd is not None:
            select.select([pidfd], [], [], STOP_WAIT)
    except OSError:
        pass
    finally:
        sock.close()
        if pidfd is not None:
            os.close(pidfd)


class _Relay:
    """The run's output, through pipes of this process: the run gets
    their write ends, and what it writes is copied to this process's
    stdout and stderr (one pipe when both are the same file, as under
    ninja, so that their order is kept)."""

    def __init__(self):
        self.pipes = {}                 # read end -> fd it is copied to
        self.ends = []                  # write ends, for the run
        try:
            same = os.path.sameopenfile(1, 2)
        except OSError:                 # (one of them is closed)
            same = False
        for target in ((1,) if same else (1, 2)):
            r, w = os.pipe()
            self.pipes[r] = target
            self.ends.append(w)
        if same:
            self.ends.append(self.ends[0])

    def close_ends(self) -> None:
        for fd in set(self.ends):
            os.close(fd)
        self.ends = []

    def close(self) -> None:
        self.close_ends()
        for fd in self.pipes:
            os.close(fd)
        self.pipes = {}

    def copy(self, fd: int) -> bool:
        """Copy what pipe ``fd`` holds; False at its end of file."""
        data = os.read(fd, 1 << 16)
        if not data:
            return False
        target = self.pipes[fd]
        while data:
            try:
                data = data[os.write(target, data):]
            except OSError:             # (stdout gone: the run's output is dropped)
                break
        return True

    def wait(self, sock, timeout: "float | None", stop: "int | None" = None):
        """Copy output until a message comes on ``sock`` (returned; None at
        its end of file or for one that is not ours; with no ``sock``, until
        every pipe ends), ``timeout`` seconds pass (``_TIMED_OUT``), or
        ``stop`` (a pidfd, a pipe) is readable (``False`` returned)."""
        poll = select.poll()
        pipes = set(self.pipes)
        sock_fd = None if sock is None else sock.fileno()
        for fd in (*pipes, sock_fd, stop):
            if fd is not None:
                poll.register(fd, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while sock is not None or pipes:
            ready = poll.poll(None if deadline is None
                              else max(0.0, deadline - time.monotonic()) * 1000)
            if not ready:
                return _TIMED_OUT
            for fd, _ in ready:
                if fd in pipes and not self.copy(fd):
                    poll.unregister(fd)
                    pipes.discard(fd)
                elif fd == sock_fd:
                    try:
                        data = sock.recv(_MAX_REPLY)
                    except OSError:
                        return None
                    return decode(data) if data else None
                elif fd == stop:
                    return False
        return None


def _fail(message: str) -> int:
    print(f"gpsimd_emu: {message}", file=sys.stderr, flush=True)
    return 1 << 8                       # (a wait status: exit 1)


def hand_off(argv: "list[str]", served: "tuple[int, int]", python: str, env: dict,
             start: "bool | None" = None, started=None,
             files: "str | None" = None, cancel: "int | None" = None) -> "int | None":
    """Run ``python -m gpsimd_emu`` with ``argv`` (in this directory, with
    the environment ``env`` and this umask) through the server of the
    process ``served``: the run's wait status, or None when the caller
    must run it itself (nothing was started). With no server: ``start``
    True starts one loading and hands the run to it, False starts one
    idle (for the next run), None starts none. ``started(pid)`` is called
    once the run's process exists (its supervising process: a SIGINT or
    SIGTERM to it stops the whole run). ``files``: ``protocol.model_files()``
    when the caller has read them already. ``cancel``: a descriptor that
    becomes readable when the caller's build stops: a run the server has
    not started yet (one waiting for the model to load) is given up
    (None)."""
    if env.get(SERVER_ENV) == "0":
        return _here(env, f"turned off (${SERVER_ENV}=0)")
    if cancel is not None and select.select([cancel], [], [], 0)[0]:
        return _here(env, "the build stops")
    files = model_files() if files is None else files
    name = name_for(served, python, env, files)
    sock = _connect(name)
    if sock is None and start is not None:
        began = start_server(name, python, env, start)
        if not start:
            return _here(env, "no server yet" + ("; started one" if began else ""))
        sock = _connect(name)
    if sock is None:
        return _here(env, "no server")
    mask = os.umask(0o022)
    os.umask(mask)
    request = encode({"argv": list(argv), "cwd": os.getcwd(), "env": dict(env), "umask": mask,
                      "files": files})
    relay = _Relay()
    try:
        try:
            sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                      struct.pack(f"{len(relay.ends)}i", *relay.ends))])
        except OSError as e:
            return _here(env, f"the request could not be sent ({e})")
        relay.close_ends()
        first = relay.wait(sock, FIRST_REPLY_TIMEOUT, cancel)
        if first == _TIMED_OUT:
            # (it may still start the run: nothing is run here, the run fails)
            _log(env, "failed: no answer")
            return _fail(f"the emulator server of this build (pid {peer(sock)[0]}) did not "
                         f"answer within {FIRST_REPLY_TIMEOUT:g} s; nothing was run "
                         f"(${SERVER_ENV}=0 runs each test by itself)")
        if first is False:      # (a run the server starts now, it ends: its client is gone)
            return _here(env, "the build stops")
        if not first or "pid" not in first:
            return _here(env, str((first or {}).get("here", "no answer")))
        pid = int(first["pid"])
        _log(env, f"served pid={pid}")
        try:
            ended = os.pidfd_open(pid)
        except OSError:
            ended = None
        try:
            if started is not None:
                started(pid)
            last = relay.wait(sock, None, ended)
            if last is False:           # the run ended: its status comes now
                last = relay.wait(sock, STATUS_GRACE)   # (or not: a server stopped)
        finally:
            if ended is not None:
                os.close(ended)
        relay.wait(None, STATUS_GRACE)      # what is left, until every pipe ends
    finally:
        relay.close()
        sock.close()
    if not isinstance(last, dict) or "status" not in last:
        return _fail("the emulator server of this build ended, or stopped answering, "
                     "during the run")
    return int(last["status"])


class _Forward:
    """SIGINT, SIGTERM and SIGHUP (those not ignored): sent on to the run
    once its pid is known; before that, this process ends by the signal
    at once (the server, seeing its socket close, then starts nothing, or
    ends what it started)."""

    def __init__(self):
        self.pid: "int | None" = None
        self.old = {}
        for s in STOP_SIGNALS:
            if signal.getsignal(s) != signal.SIG_IGN:
                self.old[s] = signal.signal(s, self._on)

    def _on(self, sig, frame) -> None:
        if self.pid is None:
            self.restore()
            end_by(sig)
            return
        try:
            os.kill(self.pid, sig)
        except OSError:
            pass

    def started(self, pid: int) -> None:
        self.pid = pid

    def restore(self) -> None:
        for s, old in self.old.items():
            signal.signal(s, old)
        self.old = {}


def run_step(argv: "list[str]") -> "int | None":
    """A ninja step's ``python -m gpsimd_emu`` with ``argv``: handed to
    its ninja process's server (started idle when there is none): the
    run's exit status, or None when this process must run it itself. A
    stop signal is sent on to the run; when the run ended by a signal,
    this process ends by the same signal."""
    if not argv or argv[0] != "run":
        return None
    ninja = find_ninja()
    if ninja is None:
        return None
    forward = _Forward()
    try:
        status = hand_off(argv, ninja, sys.executable, dict(os.environ), start=False,
                          started=forward.started)
    finally:
        forward.restore()
    if status is not None and os.WIFSIGNALED(status):
        return end_by(os.WTERMSIG(status))
    return None if status is None else os.waitstatus_to_exitcode(status)


def prestart_step(argv: "list[str]") -> int:
    """``python -m gpsimd_emu prestart STAMP`` (``argv``: ``["prestart",
    STAMP]``): under ninja, have this ninja run's server load the model
    (``ask_to_load``), so that the test steps after this one are served;
    then write the empty file ``STAMP`` (ninja's record that this step
    ran). Not under ninja, or with ``$GPSIMD_EMU_SERVER=0``, only the file
    is written. No test step relies on this one: the exit status is 0,
    also when ``STAMP`` cannot be written (a warning says so; ninja runs
    the step again next time), 2 for bad arguments."""
    if len(argv) != 2 or argv[0] != "prestart":
        print("usage: python -m gpsimd_emu prestart STAMP", file=sys.stderr)
        return 2
    ninja = find_ninja()
    if ninja is not None and os.environ.get(SERVER_ENV) != "0":
        env = dict(os.environ)
        _log(env, "prestart: " + ask_to_load(name_for(ninja, sys.executable, env),
                                             sys.executable, env))
    try:
        # (a link planted in its place is refused: O_NOFOLLOW, one link)
        fd = os.open(argv[1], os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        try:
            if os.fstat(fd).st_nlink != 1:
                raise OSError(errno.EMLINK, "a hard link this step did not make")
            os.ftruncate(fd, 0)
            os.utime(fd)                # (an empty file truncated again keeps its time)
        finally:
            os.close(fd)
    except OSError as e:
        print(f"gpsimd_emu prestart: warning: cannot write {argv[1]}: {e.strerror}",
              file=sys.stderr)
    return 0
