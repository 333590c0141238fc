"""The emulator server: one process per build that has the model imported
(numpy included) and forks a test run (``python -m gpsimd_emu run``) per
request, so that a library's test run does not pay for a Python
interpreter and numpy each time (about 0.2 s of a run's start-up).

Started by the build (the SCons tool: ``gpsimd_tool/emu_server.py``) as
``python -m gpsimd_emu.server FD`` with one end of a ``SOCK_SEQPACKET``
socket pair, the *control socket*; it lives exactly as long as the build
holds the other end: at end of file (the build ended, or was killed) it
sends SIGTERM to every run still going, SIGKILL to those left after
``STOP_GRACE`` seconds, reaps them and exits. It ignores SIGINT (Ctrl-C
reaches the runs themselves, which stop as ``python -m gpsimd_emu run``
does; the build then ends and closes the socket); SIGTERM ends it as end
of file does.

Protocol: the build sends one JSON object per run, ``{"argv": [...],
"cwd": str, "env": {str: str}}`` (``argv``: the arguments after ``python
-m gpsimd_emu``), with three descriptors (SCM_RIGHTS):
the *run socket* (one end of a new socket pair of the build's), and the
run's stdout and stderr. A child of the server takes them as its fds 1
and 2, the ``cwd`` and the environment ``env``, and runs what
``gpsimd_emu.cli.main(argv)`` runs (the same code as the command,
with its supervising process, worker, zygote and containment), exiting
with its status. On the run socket the server sends ``{"pid": n}`` once
forked and ``{"status": s}`` (a
wait status) once the child ended; when the build's end of the run
socket closes first (the build gave up on it), the child gets SIGTERM.
(What the forked processes do: ``gpsimd_emu.server_runs``.)

A ninja build's server (``gpsimd_emu.ninja_server``, forked off a step of
that ninja run by ``gpsimd_emu.handoff``, which also holds its protocol)
serves the same runs to connections on an abstract socket instead, and
loads the model when a step first needs it.
"""

from __future__ import annotations

import signal

if __name__ == "__main__":       # Ctrl-C is the runs' to handle, from the start
    signal.signal(signal.SIGINT, signal.SIG_IGN)

import gc
import json
import os
import select
import socket
import sys
import time
from typing import Callable, Dict, List, Optional

from . import contain, server_runs
from .server_runs import MAX_MESSAGE
from .settings import one_blas_thread

__all__ = ["main", "Server", "MAX_MESSAGE", "STOP_GRACE"]

#: Seconds a run has to end after SIGTERM when the build is gone.
STOP_GRACE = 2.0


def _preload() -> None:
    """Import what a run imports (every module of the model and of the
    device facts, numpy, ``numpy.random`` and ml_dtypes), so that a
    forked run finds it done. (``shapes`` and ``cli``'s ``main`` included; importing a
    module runs nothing of a test plan's.)"""
    import importlib
    import pkgutil

    import gpsimd_device
    import numpy
    numpy.random.default_rng(0)          # numpy.random is imported on first use
    for package in (gpsimd_device, sys.modules[__package__]):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")
    sys.modules[f"{__package__}.cli"].build_parser()    # made once (cached)


def _close(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _request_of(req):
    """``req`` (decoded) when it is a request (a dict with ``argv``,
    ``cwd`` and ``env``), or why it is not one (str)."""
    try:
        argv, cwd, env = req["argv"], req["cwd"], req["env"]
    except (ValueError, KeyError, TypeError) as e:
        return str(e) or type(e).__name__
    if not (isinstance(argv, list) and isinstance(cwd, str) and isinstance(env, dict)):
        return "bad request"
    return req


def _json(message: dict) -> bytes:
    return json.dumps(message).encode()


def _reply(sock: socket.socket, message: dict, encode: Callable[[dict], bytes] = _json) -> None:
    try:
        sock.send(encode(message))
    except OSError:
        pass                            # the build is gone: nothing to tell


class Server:
    """The serving loop (``main`` runs it): requests come on the build's
    ``control`` socket (the SCons path; a ninja build's server,
    ``ninja_server.NinjaServer``, takes connections to a listener
    instead). ``runs`` maps a child's pid to the server's end of its run
    socket; ``ready``: the model is loaded."""

    def __init__(self, control: Optional[socket.socket] = None, *, ready: bool = True):
        self.control = control
        self.ready = ready
        self.runs: Dict[int, socket.socket] = {}
        #: how each run's messages are written (JSON; ``handoff``'s marshal)
        self.formats: Dict[int, Callable[[dict], bytes]] = {}
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.stopping = False

    def serve(self) -> None:
        """Serve until the control socket's end of file (or what
        ``_handle`` says), or SIGTERM."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        contain.become_subreaper()      # orphans of its runs come back here to be reaped
        while not self.stopping:
            watched: List = [self.wake_r] + self._sources() + list(self.runs.values())
            try:
                ready, _, _ = select.select(watched, [], [], self._timeout())
            except InterruptedError:
                continue
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 64):
                        pass
                except BlockingIOError:
                    pass
            self._reap()
            for pid, sock in list(self.runs.items()):
                if sock in ready and self._gone(sock):
                    server_runs.kill(pid, signal.SIGTERM)     # the build gave up on this run
            if not self._handle(ready):
                return

    def _sources(self) -> List:
        """What the loop waits on besides its wake-up pipe and the runs."""
        return [self.control]

    def _timeout(self) -> Optional[float]:
        """Seconds the loop may wait at most (None: no limit)."""
        return None

    def _handle(self, ready: List) -> bool:
        """Serve what ``ready`` (of ``_sources``) holds; False: stop."""
        return not (self.control in ready and not self._request())

    def _on_term(self, *_) -> None:
        self.stopping = True

    def _request(self) -> bool:
        """Serve one message of the control socket; False at end of file."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_MESSAGE, 4)
        except (ConnectionResetError, OSError):
            return False
        if not data:
            _close(fds)
            return False
        if len(fds) != 3:
            _close(fds)
            return True
        run_sock = socket.socket(fileno=fds[0])
        try:
            req = _request_of(json.loads(data))
        except ValueError as e:
            req = str(e)
        if isinstance(req, str):
            _reply(run_sock, {"error": f"bad request: {req}"})
            run_sock.close()
            _close(fds[1:])
            return True
        self._start(run_sock, req, fds[1], fds[2])
        return True

    def _start(self, run_sock: socket.socket, req: dict, out_fd: int, err_fd: int,
               encode: Callable[[dict], bytes] = _json) -> None:
        """Fork the request's run and tell ``run_sock`` its pid (messages in
        ``encode``'s format, as is the status later)."""
        sys.stdout.flush()
        sys.stderr.flush()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            server_runs.child(req, out_fd, err_fd, me)
        _close((out_fd, err_fd))
        self.runs[pid] = run_sock
        self.formats[pid] = encode
        _reply(run_sock, {"pid": pid}, encode)

    @staticmethod
    def _gone(sock: socket.socket) -> bool:
        """Has the build closed its end of this run socket?"""
        try:
            return sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _reap(self) -> None:
        """Wait for every ended run and tell the build its status; reap
        every other ended child (the server is a subreaper: a killed run's
        worker and zygote come back to it)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            sock = self.runs.pop(pid, None)
            encode = self.formats.pop(pid, _json)
            if sock is not None:
                _reply(sock, {"status": status}, encode)
                sock.close()

    def stop(self) -> None:
        """End every run left: SIGTERM, then SIGKILL after ``STOP_GRACE``."""
        for pid in list(self.runs):
            server_runs.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while self.runs and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)
        for pid in list(self.runs):
            server_runs.kill(pid, signal.SIGKILL)
        while self.runs:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            sock = self.runs.pop(pid, None)
            if sock is not None:
                sock.close()
        contain.sweep(limit=STOP_GRACE)           # what came back to us: none left behind


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m gpsimd_emu.server FD``: serve the control socket ``FD``
    until its other end closes. (A ninja build's server is forked off a
    step instead: ``ninja_server``.)"""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m gpsimd_emu.server FD", file=sys.stderr)
        return 2
    control = socket.socket(fileno=int(argv[0]))
    contain.set_name("gpsimd-server")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_blas_thread()      # before numpy's import: as the command does
    _preload()
    gc.collect()
    gc.freeze()                          # forked runs do not copy pages the collector writes
    server = Server(control)
    try:
        server.serve()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
