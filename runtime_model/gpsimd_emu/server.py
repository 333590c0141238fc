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
"cwd": str, "env": {str: str}, "spare": bool}`` (``argv``: the arguments
after ``python -m gpsimd_emu``; ``spare``: ``env`` is the one the server
was started with, as the build gave it, before Python's start-up changed
it, e.g. PEP 538's ``LC_CTYPE``), with three descriptors (SCM_RIGHTS):
the *run socket* (one end of a new socket pair of the build's), and the
run's stdout and stderr. A child of the server takes them as its fds 1
and 2, the ``cwd`` and the environment ``env``, and runs what
``gpsimd_emu.__main__.main(argv)`` runs (the same code as the command,
with its supervising process, worker, zygote and containment), exiting
with its status. That child is the *spare run* when the request says its
environment is the server's: forked ahead of its request, it has forked
its worker, which has started its zygote (the zygote's interpreter
start-up and imports, about 50 ms, are then behind it when the request
comes); else it is forked for the request. On the run socket the server
sends ``{"pid": n, "spare": bool}`` once forked and ``{"status": s}`` (a
wait status) once the child ended; when the build's end of the run
socket closes first (the build gave up on it), the child gets SIGTERM.
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
from typing import Callable, Dict, List, Optional, Tuple

from . import contain
from .settings import one_blas_thread

__all__ = ["main", "MAX_MESSAGE", "STOP_GRACE"]

#: Largest request (bytes): argv and the environment.
MAX_MESSAGE = 1 << 20
#: Seconds a run has to end after SIGTERM when the build is gone.
STOP_GRACE = 2.0


def _preload() -> None:
    """Import what a run imports (every module of the model and of the
    device facts, numpy, ``numpy.random`` and ml_dtypes), so that a
    forked run finds it done. (``shapes`` and ``__main__``'s ``main`` included; importing a
    module runs nothing of a test plan's.)"""
    import importlib
    import pkgutil

    import gpsimd_device
    import numpy
    numpy.random.default_rng(0)          # numpy.random is imported on first use
    for package in (gpsimd_device, sys.modules[__package__]):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")
    sys.modules[f"{__package__}.__main__"].build_parser()    # made once (cached)


def _reset(server: int) -> None:
    """What every process the server forks does first: its name, default
    signal handling, and death with the server."""
    contain.set_name("gpsimd-run")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    contain.die_with_parent(server)


def _close_from_3(keep: tuple = ()) -> None:
    """Close every descriptor from 3 on but those in ``keep``."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def _take_request(req: dict, out_fd: int, err_fd: int, keep: tuple = ()) -> None:
    """Become the request's process: stdin /dev/null, its stdout and
    stderr, nothing else of the server's (but ``keep``), its directory
    and environment."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    _close_from_3(keep)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    one_blas_thread()      # what the references see: as in a command's run


def _exit_with(body: Callable[[], int]) -> None:
    """Run ``body`` and exit with its status: never returns."""
    code = 2
    try:
        code = body()
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


def _child(req: dict, out_fd: int, err_fd: int, server: int) -> None:
    """A run forked for its request: ``python -m gpsimd_emu run``'s main."""
    def body() -> int:
        _reset(server)
        _take_request(req, out_fd, err_fd)
        from .__main__ import main as cli_main
        return cli_main(list(req["argv"]))
    _exit_with(body)


def _spare(sock: socket.socket, server: int) -> None:
    """A spare run: forked before its request, it forks its worker at
    once, which starts its zygote (``zygote_client.prespawn``); then it
    waits on ``sock`` for the request (as the server got it, with its
    stdout and stderr), hands it on to the worker and supervises the run
    as ``main`` does. The worker and the zygote are its descendants, as
    in a run started for its request. Used only for requests whose
    environment is the server's (the zygote's is)."""
    def body() -> int:
        _reset(server)
        _close_from_3((sock.fileno(),))
        from . import __main__ as cli
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        worker = os.fork()
        if worker == 0:
            sock.close()
            mine.close()
            _spare_worker(theirs, me)
        theirs.close()
        data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        if not data or len(fds) != 2:
            return 0                   # the server ended: the worker and zygote die with us
        req = json.loads(data)
        _take_request(req, fds[0], fds[1], keep=(mine.fileno(),))
        args = cli.parse(list(req["argv"]))     # the results files are removed first
        if isinstance(args, int):       # no run: the worker is not needed
            _end(worker)
            return args
        try:                            # the worker reads the plan as this process does
            socket.send_fds(mine, [data], [1, 2])
            sent = True
        except OSError:                 # the worker is gone: fork another
            _end(worker)
            sent = False
        prepared = cli.load(args)
        if isinstance(prepared, int):
            _end(worker)
            return prepared
        start: Callable[[], int] = (lambda: worker) if sent else \
            (lambda: cli.fork_worker(prepared))   # noqa: E731
        mine.close()
        return cli.supervise(prepared, start)
    _exit_with(body)


def _spare_worker(sock: socket.socket, supervisor: int) -> None:
    """A spare run's worker (``_spare``): starts its zygote, waits for the
    request and runs it as the CLI's worker does."""
    def body() -> int:
        contain.die_with_parent(supervisor)
        from . import __main__ as cli
        from . import zygote_client
        try:
            zygote_client.prespawn()
        except OSError:
            pass                        # the session starts one itself
        data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        if not data or len(fds) != 2:
            return 0
        req = json.loads(data)
        zygote = zygote_client.prespawned_fd()
        _take_request(req, fds[0], fds[1], keep=() if zygote is None else (zygote,))
        # (a plan that cannot be read: the spare run says so, and ends us)
        prepared = cli.prepare(list(req["argv"]), remove_outputs=False, say=lambda m: None)
        if isinstance(prepared, int):
            return prepared
        return cli.run_worker(prepared)
    _exit_with(body)


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
        #: the spare run waiting for a request: (pid, its socket)
        self.spare: Optional[Tuple[int, socket.socket]] = None

    def serve(self) -> None:
        """Serve until the control socket's end of file or SIGTERM."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        self._make_spare()
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
        spare_pid = self.spare[0] if self.spare is not None else None
        pid = self._to_spare(data, req.get("spare") is True, fds[1], fds[2])
        if pid is None:
            sys.stdout.flush()
            sys.stderr.flush()
            me = os.getpid()
            pid = os.fork()
            if pid == 0:
                _child(req, fds[1], fds[2], me)
        os.close(fds[1])
        os.close(fds[2])
        self.runs[pid] = run_sock
        _send(run_sock, {"pid": pid, "spare": pid == spare_pid})
        if self.spare is None:
            self._make_spare()
        return True

    def _make_spare(self) -> None:
        """Fork the next spare run (``_spare``)."""
        try:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        me = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            mine.close()
            theirs.close()
            return
        if pid == 0:
            mine.close()
            _spare(theirs, me)
        theirs.close()
        self.spare = (pid, mine)

    def _to_spare(self, data: bytes, same_env: bool, out_fd: int,
                  err_fd: int) -> Optional[int]:
        """Hand the request to the spare run; its pid, or None when there
        is none, the request's environment is not the server's, or it is
        gone."""
        if self.spare is None or not same_env:
            return None
        pid, sock = self.spare
        self.spare = None
        try:
            socket.send_fds(sock, [data], [out_fd, err_fd])
        except OSError:
            return None                  # it died (reaped by _reap)
        finally:
            sock.close()
        return pid

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
        """Wait for every ended run and tell the build its status (and
        for a spare run that died waiting)."""
        while self.runs or self.spare is not None:
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
            elif self.spare is not None and self.spare[0] == pid:
                self.spare[1].close()   # the spare died waiting: another one next time
                self.spare = None

    def stop(self) -> None:
        """End every run left: SIGTERM, then SIGKILL after ``STOP_GRACE``."""
        if self.spare is not None:
            pid, sock = self.spare
            self.spare = None
            sock.close()
            _end(pid)                   # its worker and zygote die with it
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


def _end(pid: int) -> None:
    """Kill child ``pid`` and reap it."""
    _kill(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


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
