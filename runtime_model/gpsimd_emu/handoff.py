"""Handing a test run to its ninja build's emulator server: the client
side, imported first by ``python -m gpsimd_emu`` (standard library only,
nothing else of the package, no numpy).

On the ninja path every test step is a command of its own; started cold,
each pays a Python interpreter, numpy and its library's zygote (about
0.2 s) before its first vector. A ninja build's test steps therefore share
one emulator server (``gpsimd_emu.ninja_server``, the server the SCons
path uses, listening on a socket) whose life is that ninja process's:

* **started by the build**: a library's prestart step (``prestart``,
  ``python -m gpsimd_emu prestart STAMP``, which the library's test step
  needs order-only and which runs when a source that test depends on
  changed: in the edit loop beside the kernel's compile) starts it loading the model
  at once, so that the edit loop's one test step is served. Without it
  (a header edited, the stamp up to date), the first test step that finds
  no server starts one idle (an interpreter, no numpy) and runs its own
  vectors; a second step's request makes it load the model. A request
  that comes while the model loads waits for it (``ninja_server.LOAD_WAIT``
  at most); a step that finds no server runs its vectors itself.
* **ended with it**: the server watches that ninja process (a pidfd) and,
  when it ends, however it ends (``kill -9`` included), ends every run
  still going as the SCons path's server does when scons dies.
* **relied on by no step**: whatever fails (no server, another version of
  the model, a refusal), the step runs its vectors itself. The command
  line, output, results and exit status are those of the command.

The scope is found from the process tree (``find_ninja``): the step's
parent, or its grandparent under a shell, named ``ninja``; a run started in
any other way (by hand, by scons with ``EMU_SERVER=0``) runs itself.
``$GPSIMD_EMU_SERVER=0`` turns the hand-off off.

Protocol (``SOCK_SEQPACKET``, the abstract socket ``server_name``; each
message a dict in ``marshal``'s format, which costs the command no import;
both sides first check that the other is of the same user,
``SO_PEERCRED``): the client sends ``{"argv", "cwd", "env",
"umask", "fingerprint"}`` with the write ends of two pipes (one when
its stdout and stderr are one file, as under ninja), which the run takes
as its stdout and stderr and the client copies to its own (``_Relay``:
ninja's pipe never reaches the server, so a server that stops with the
request queued cannot hold it open); the server answers ``{"here":
reason}`` (not taken: run it yourself) or ``{"pid": n}``
and, once the run ended, ``{"status": wait status}``. A server that does
not answer within ``FIRST_REPLY_TIMEOUT`` makes the step fail with a
message; one that does not report a run's end within ``STATUS_GRACE``
after the run ended, too. While the run goes on, SIGINT, SIGTERM and
SIGHUP received by the client are sent on to the run (which stops as the
command does), and the client ends as the run ended, by the same signal
if it was one. If the client dies, the server sees its socket close and
ends the run (SIGTERM); a signal that comes before the server named the
run ends the client at once (the server then starts nothing: it drops a
request whose client is gone).
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

from .scope import decode, encode, find_ninja, fingerprint, peer_pid, peer_uid, server_name

__all__ = ["SERVER_ENV", "LOG_ENV", "hand_off", "prestart", "start_server", "MAX_REPLY",
           "FIRST_REPLY_TIMEOUT", "STATUS_GRACE"]

#: ``0``: never hand a run to a server (the README's ``EMU_SERVER=0``).
SERVER_ENV = "GPSIMD_EMU_SERVER"
#: Diagnostics: a file each command appends one line to, saying whether
#: its run was handed off (``served pid=N``) or why not (``here: ...``).
LOG_ENV = "GPSIMD_EMU_HANDOFF_LOG"
#: Largest reply (bytes) the server sends.
MAX_REPLY = 1 << 12
#: Seconds a step waits for the server's first answer (it comes in
#: milliseconds: a server that is stopped, or a process of the same user
#: that holds its name, makes the step fail with a message, not hang).
FIRST_REPLY_TIMEOUT = 10.0
#: Seconds the server has to report a run's end once the run has ended.
STATUS_GRACE = 2.0
_TIMEOUT = getattr(socket, "timeout", TimeoutError)
def _log(line: str) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass


def start_server(ninja: "tuple[int, int]", name: bytes, load: bool = False) -> bool:
    """Start the server for ``ninja`` unless one is being started or runs
    (the name ``name + b"/start"``, bound here and held by the server for
    its life, decides): True when this call started it; ``load``: it
    loads the model at once (else it starts idle). The server is a fork
    of this process (``ninja_server.serve``: this interpreter, as the
    test steps' commands start it), in a process group of its own
    (ninja's Ctrl-C and its process-group kills do not reach it) but in
    ninja's session (so in its scheduler autogroup, where the loading
    thread's nice value ranks it behind the build's steps), not this
    process's child (a command's supervising process ends its own
    descendants), with stdin, stdout and stderr on ``/dev/null`` and no
    other descriptor of this process's."""
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        lock.bind(name + b"/start")
    except OSError:
        lock.close()
        return False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        middle = os.fork()
        if middle == 0:         # (the server is orphaned at once: adopted by init)
            code = 1
            try:
                os.setpgid(0, 0)
                if os.fork() == 0:
                    _become_server(ninja, lock, load)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(middle, 0)
        return os.waitstatus_to_exitcode(status) == 0
    except OSError:
        return False
    finally:
        lock.close()


def _become_server(ninja: "tuple[int, int]", lock, load: bool) -> None:
    """The forked server's life (``start_server``); never returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = lock.fileno()            # (held until the _exit below)
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 20)
        from .ninja_server import serve
        code = serve(ninja, load)
    finally:
        os._exit(code)


def prestart(argv: "list[str]") -> int:
    """``python -m gpsimd_emu prestart STAMP`` (``argv``: ``["prestart",
    STAMP]``): under ninja, start this ninja run's server loading the
    model (``start_server(load=True)``), or ask the one that runs to load
    it, so that the test steps after this one are served; then write the
    empty file ``STAMP`` (ninja's record that this step ran). Not under
    ninja, or with ``$GPSIMD_EMU_SERVER=0``, only the file is written.
    Nothing waits for the server, and no test step relies on this one:
    the exit status is 0, also when ``STAMP`` cannot be written (a
    warning says so; ninja runs the step again next time), 2 for bad
    arguments."""
    if len(argv) != 2 or argv[0] != "prestart":
        print("usage: python -m gpsimd_emu prestart STAMP", file=sys.stderr)
        return 2
    ninja = find_ninja()
    if ninja is not None and os.environ.get(SERVER_ENV) != "0":
        print_ = fingerprint()
        name = server_name(ninja, print_)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(name)
        except OSError:
            started = start_server(ninja, name, load=True)
            _log("prestart: " + ("started a server" if started else "a server is being started"))
        else:
            if peer_uid(sock) == os.getuid():
                try:
                    sock.send(encode({"prestart": True, "fingerprint": print_}))
                    _log("prestart: asked the server to load the model")
                except OSError:
                    pass
        finally:
            sock.close()
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


class _Forward:
    """SIGINT, SIGTERM and SIGHUP (those not ignored): sent on to the run
    once its pid is known; before that, this process ends by the signal
    at once (the server, seeing its socket close, then starts nothing, or
    ends what it started)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.pid: "int | None" = None
        self.old = {}
        for s in self.SIGNALS:
            if signal.getsignal(s) != signal.SIG_IGN:
                self.old[s] = signal.signal(s, self._on)

    def _on(self, sig, frame) -> None:
        if self.pid is None:
            self.restore()
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            return
        try:
            os.kill(self.pid, sig)
        except OSError:
            pass

    def restore(self) -> None:
        for s, old in self.old.items():
            signal.signal(s, old)
        self.old = {}


def _recv(sock) -> "dict | None":
    """One reply, or None at end of file or for one that is not ours."""
    try:
        data = sock.recv(MAX_REPLY)
    except OSError:
        return None
    return decode(data) if data else None


class _Relay:
    """The run's output, through pipes of this process: the run gets
    their write ends, and what it writes is copied to this process's
    stdout and stderr (one pipe when both are the same file, as under
    ninja, so that their order is kept). A server that stops with the
    request in its queue then holds these pipes, never ninja's: the step
    can end and ninja sees its output end."""

    def __init__(self):
        self.pipes = {}                 # read end -> fd it is copied to
        self.ends = []                  # write ends, for the run
        same = os.path.sameopenfile(1, 2) if _open(1) and _open(2) else False
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

    def wait(self, sock, timeout: "float | None", ended: "int | None" = None):
        """Copy output until a message comes on ``sock`` (returned, None at
        its end of file), ``timeout`` seconds pass (``_TIMEOUT`` raised),
        or pidfd ``ended`` is readable (``False`` returned)."""
        poll = select.poll()
        watched = {sock.fileno(): "sock", **{fd: "pipe" for fd in self.pipes}}
        if ended is not None:
            watched[ended] = "ended"
        for fd in watched:
            poll.register(fd, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = poll.poll(None if left is None else left * 1000)
            if not ready:
                raise _TIMEOUT()
            for fd, _ in ready:
                kind = watched.get(fd)
                if kind == "pipe" and not self.copy(fd):
                    poll.unregister(fd)
                    del watched[fd]
                elif kind == "sock":
                    return _recv(sock)
                elif kind == "ended":
                    return False

    def drain(self, seconds: float) -> None:
        """Copy what is left, until every pipe ends or ``seconds`` pass."""
        poll = select.poll()
        for fd in self.pipes:
            poll.register(fd, select.POLLIN)
        deadline = time.monotonic() + seconds
        live = set(self.pipes)
        while live:
            ready = poll.poll(max(0.0, deadline - time.monotonic()) * 1000)
            if not ready:
                return
            for fd, _ in ready:
                if not self.copy(fd):
                    poll.unregister(fd)
                    live.discard(fd)


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def hand_off(argv: "list[str]") -> "int | None":
    """Run ``python -m gpsimd_emu`` with ``argv`` through its ninja
    build's server: the run's exit status, or None when this process
    must run it itself (no server for it; nothing was started). When the
    run ended by a signal, this process ends by the same signal."""
    if not argv or argv[0] != "run":
        return None
    ninja = find_ninja()
    if ninja is None:
        return None
    if os.environ.get(SERVER_ENV) == "0":
        _log(f"here: turned off (${SERVER_ENV}=0)")
        return None
    print_ = fingerprint()
    name = server_name(ninja, print_)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            sock.connect(name)
        except OSError:
            started = start_server(ninja, name)
            _log("here: no server yet" + ("; started one" if started else ""))
            return None
        if peer_uid(sock) != os.getuid():
            _log("here: the server is another user's")
            return None
        mask = os.umask(0o022)
        os.umask(mask)
        request = encode({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                          "umask": mask, "fingerprint": print_})
        forward = _Forward()
        relay = _Relay()
        try:
            try:
                sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          struct.pack(f"{len(relay.ends)}i", *relay.ends))])
            except OSError as e:
                _log(f"here: the request could not be sent ({e})")
                return None
            relay.close_ends()
            try:
                first = relay.wait(sock, FIRST_REPLY_TIMEOUT)
            except _TIMEOUT:
                # (it may still start the run: nothing is run here, the step fails)
                print(f"gpsimd_emu: the emulator server of this ninja run (pid "
                      f"{peer_pid(sock)}) did not answer within {FIRST_REPLY_TIMEOUT:g} s; "
                      f"nothing was run (${SERVER_ENV}=0 runs each step by itself)",
                      file=sys.stderr, flush=True)
                _log("failed: no answer")
                return 1
            if not first or "pid" not in first:
                _log(f"here: {(first or {}).get('here', 'no answer')}")
                return None
            forward.pid = int(first["pid"])
            _log(f"served pid={forward.pid}")
            try:
                ended = os.pidfd_open(forward.pid)
            except (AttributeError, OSError):
                ended = None
            try:
                last = relay.wait(sock, None, ended)
                if last is False:           # the run ended: its status comes now
                    try:
                        last = relay.wait(sock, STATUS_GRACE)
                    except _TIMEOUT:
                        last = None         # (a server that was stopped)
            finally:
                if ended is not None:
                    os.close(ended)
            relay.drain(STATUS_GRACE)
        finally:
            forward.restore()
            relay.close()
        if last is None or "status" not in last:
            print("gpsimd_emu: the emulator server of this ninja run ended, or stopped "
                  "answering, during the run", file=sys.stderr, flush=True)
            return 1
        status = int(last["status"])
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            return 128 + sig
        return os.waitstatus_to_exitcode(status)
    finally:
        sock.close()
