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
-m gpsimd_emu``), with three descriptors (SCM_RIGHTS): the *run socket*
(one end of a new socket pair of the build's), and the run's stdout and
stderr. The server forks a child that takes them as its fds 1 and 2, the
``cwd`` and the environment ``env``, runs ``gpsimd_emu.__main__.main(argv)``
(the same code as the command, with its supervising process, worker,
zygote and containment) and exits with its status. On the run socket the
server sends ``{"pid": n}`` once forked and ``{"status": s}`` (a wait
status) once the child ended; when the build's end of the run socket
closes first (the build gave up on it), the child gets SIGTERM.
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
from typing import Dict, List, Optional

from . import contain

__all__ = ["main", "MAX_MESSAGE", "STOP_GRACE"]

#: Largest request (bytes): argv and the environment.
MAX_MESSAGE = 1 << 20
#: Seconds a run has to end after SIGTERM when the build is gone.
STOP_GRACE = 2.0


def _preload() -> None:
    """Import what a run imports (every module of the model and of the
    device facts, numpy, ``numpy.random`` and ml_dtypes), so that a forked run finds it
    done. (``shapes`` and ``__main__``'s ``main`` included; importing a
    module runs nothing of a test plan's.)"""
    import importlib
    import pkgutil

    import gpsimd_device
    import numpy
    numpy.random.default_rng(0)          # numpy.random is imported on first use
    for package in (gpsimd_device, sys.modules[__package__]):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")


def _child(req: dict, out_fd: int, err_fd: int, server: int) -> None:
    """A forked run: never returns (``os._exit`` with the CLI's status)."""
    code = 2
    try:
        contain.set_name("gpsimd-run")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        contain.die_with_parent(server)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.closerange(3, 1 << 16)       # nothing of the server's reaches the run
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        from .__main__ import main as cli_main
        code = cli_main(list(req["argv"]))
    except SystemExit as e:             # argparse: a bad argument
        code = e.code if isinstance(e.code, int) else 2
    except BaseException:               # a model bug: say so, never a silent exit
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(sock: socket.socket, obj: dict) -> None:
    try:
        sock.send(json.dumps(obj).encode())
    except OSError:
        pass                            # the build is gone: nothing to tell


class Server:
    """The serving loop (``main`` runs it): ``runs`` maps a child's pid
    to the server's end of its run socket."""

    def __init__(self, control: socket.socket):
        self.control = control
        self.runs: Dict[int, socket.socket] = {}
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.stopping = False

    def serve(self) -> None:
        """Serve until the control socket's end of file or SIGTERM."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        while not self.stopping:
            watched: List = [self.control, self.wake_r] + list(self.runs.values())
            try:
                ready, _, _ = select.select(watched, [], [])
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
                    _kill(pid, signal.SIGTERM)     # the build gave up on this run
            if self.control in ready and not self._request():
                return

    def _on_term(self, *_) -> None:
        self.stopping = True

    def _request(self) -> bool:
        """Serve one message of the control socket; False at end of file."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_MESSAGE, 4)
        except (ConnectionResetError, OSError):
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return True
        run_sock = socket.socket(fileno=fds[0])
        try:
            req = json.loads(data)
            argv, cwd, env = req["argv"], req["cwd"], req["env"]
            if not (isinstance(argv, list) and isinstance(cwd, str) and isinstance(env, dict)):
                raise ValueError("bad request")
        except (ValueError, KeyError, TypeError) as e:
            _send(run_sock, {"error": f"bad request: {e}"})
            run_sock.close()
            os.close(fds[1])
            os.close(fds[2])
            return True
        sys.stdout.flush()
        sys.stderr.flush()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(req, fds[1], fds[2], me)
        os.close(fds[1])
        os.close(fds[2])
        self.runs[pid] = run_sock
        _send(run_sock, {"pid": pid})
        return True

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
        """Wait for every ended run and tell the build its status."""
        while self.runs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            sock = self.runs.pop(pid, None)
            if sock is not None:
                _send(sock, {"status": status})
                sock.close()

    def stop(self) -> None:
        """End every run left: SIGTERM, then SIGKILL after ``STOP_GRACE``."""
        for pid in list(self.runs):
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while self.runs and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)
        for pid in list(self.runs):
            _kill(pid, signal.SIGKILL)
        while self.runs:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            sock = self.runs.pop(pid, None)
            if sock is not None:
                sock.close()


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m gpsimd_emu.server FD``: serve the control socket ``FD``
    until its other end closes."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m gpsimd_emu.server FD", file=sys.stderr)
        return 2
    control = socket.socket(fileno=int(argv[0]))
    contain.set_name("gpsimd-server")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
