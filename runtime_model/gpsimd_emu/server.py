"""The emulator server: one process per build (a scons or a ninja
process) that has the model imported (numpy included) and forks a test
run (what ``python -m gpsimd_emu run`` runs; named ``gpsimd-run``) per
request, so that a run does not pay for an interpreter and numpy (about
0.2 s of its start-up). Its clients and protocol:
``gpsimd_emu.client.served``; its command line: :func:`main`; who starts
it, its link to the served process (a pidfd), its loading of the model
(a thread, requests waiting ``LOAD_WAIT`` for it) and its end:
ARCHITECTURE.md "Processes and containment".
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from . import contain
from .client.protocol import (MAX_MESSAGE, STOP_SIGNALS, decode, encode, model_files, peer,
                              proc_stat)
from .settings import one_blas_thread

__all__ = ["main", "Server", "STOP_GRACE", "LOAD_WAIT", "STALE"]

#: Seconds a run has to end after SIGTERM when the server stops.
STOP_GRACE = 2.0
#: Seconds a request waits for the model being loaded before it is
#: answered ``here`` (``client.served.FIRST_REPLY_TIMEOUT`` is longer).
LOAD_WAIT = 5.0
#: The answer to a request while the server's model is not the files'.
STALE = "the model changed while the server loaded it"


def _preload() -> None:
    """Import what a run imports (every module of the model and of the
    device facts, numpy, ``numpy.random`` and ml_dtypes), so that a forked
    run finds it done (importing a module runs nothing of a plan's); and
    compute the digest of the zygote's sources, which every run compares
    with its program's (a source edited since the server started is
    another version of the model: ``model_files``)."""
    import importlib
    import pkgutil

    import gpsimd_device
    import numpy
    numpy.random.default_rng(0)          # numpy.random is imported on first use
    for package in (gpsimd_device, sys.modules[__package__]):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")
    # (made once, cached; a first parse compiles argparse's patterns)
    sys.modules[f"{__package__}.cli"].build_parser().parse_args(
        ["run", "p.json", "--results", "r.json", "--failed-results", "f.json", "--zygote", "z"])
    with contextlib.suppress(OSError):  # (each run says what is wrong)
        sys.modules[f"{__package__}.zygote_client"].source_digest()


def _close(fds) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _drop(conn: socket.socket, fds: List[int]) -> None:
    """Let go of a request's connection and descriptors."""
    _close(fds)
    conn.close()


def _reply(sock: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):  # (the client is gone: nothing to tell)
        sock.send(encode(message))


def _refusal(message, fds: List[int], files: str) -> "str | None":
    """Why ``message`` with ``fds`` is not a request of this server's model
    ``files``, or None when it is one."""
    if len(fds) != 2:
        return "no stdout and stderr"
    if not isinstance(message, dict):
        return "not a message"
    if not (isinstance(message.get("argv"), list) and isinstance(message.get("cwd"), str)
            and isinstance(message.get("env"), dict)):
        return "bad request"
    return None if message.get("files") == files else "another version of the model"


class Server:
    """The serving loop of the process ``served`` (its pid; ``watch``, a
    pidfd, ends the loop when it ends): requests are connections to
    ``listener``; ``files``: the model's files as they were when the
    server started (``protocol.model_files``). ``runs`` maps a run's pid
    to its connection; ``waiting``: the requests that wait for the model,
    each (connection, its two descriptors, the request, the monotonic
    time it is answered ``here`` at)."""

    def __init__(self, listener: socket.socket, watch: int, served: int, files: str):
        self.listener, self.watch, self.served, self.files = listener, watch, served, files
        self.runs: Dict[int, socket.socket] = {}
        self.waiting: List[Tuple[socket.socket, List[int], dict, float]] = []
        self.ready = self.stale = self.stopping = False
        self._loader: Optional[threading.Thread] = None
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def serve(self) -> None:
        """Serve until the served process ends, asks to stop, or SIGTERM."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        contain.become_subreaper()      # orphans of its runs come back here to be reaped
        while not self.stopping:
            watched: List = [self.wake_r, self.listener, self.watch, *self.runs.values(),
                             *(w[0] for w in self.waiting)]
            timeout = None if not self.waiting else \
                max(0.0, min(w[3] for w in self.waiting) - time.monotonic())
            try:
                ready, _, _ = select.select(watched, [], [], timeout)
            except InterruptedError:
                continue
            if self.wake_r in ready:        # (what is left wakes the next select)
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 1 << 12)
            self._reap()
            for pid, sock in list(self.runs.items()):
                if sock in ready and self._gone(sock):
                    contain.kill(pid, signal.SIGTERM)     # the client gave up on this run
            if self.watch in ready:
                return                              # the served process ended
            if self._loader is not None and not self._loader.is_alive():
                self._loaded()
            if self.waiting:
                self._serve_waiting(ready)
            if self.listener in ready and not self._accept():
                return

    def _on_term(self, *_) -> None:
        self.stopping = True

    def start_loading(self) -> None:
        """Load the model in a thread (``_preload``, at the server's priority:
        ARCHITECTURE.md), unless it is loaded or loading; ``_loaded`` runs
        once it is done."""
        if self._loader is not None or self.ready:
            return

        def load() -> None:
            try:
                _preload()
            finally:
                os.write(self.wake_w, b"w")

        self._loader = threading.Thread(target=load, name="preload", daemon=True)
        self._loader.start()

    def _loaded(self) -> None:
        """The model is loaded: serve (no thread is left when runs fork)."""
        self._loader.join()
        self._loader = None
        gc.collect()
        gc.freeze()                      # forked runs do not copy pages the collector writes
        self.ready = True
        # (a file edited while it loaded: what it imported may be either version)
        self.stale = model_files() != self.files

    def _accept(self) -> bool:
        """Take one connection to the listener; False: stop serving."""
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return True
        fds: List[int] = []
        try:
            asker, uid = peer(conn)
            if uid != os.getuid():
                conn.close()
                return True
            conn.settimeout(2.0)        # (a client sends its message at once)
            data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
            conn.settimeout(None)
        except OSError:
            _drop(conn, fds)
            return True
        message = decode(data)
        if isinstance(message, dict) and (message.get("load") is True
                                          or message.get("stop") is True):
            _drop(conn, fds)
            if message.get("stop") is True:
                return asker != self.served     # (only the served process stops it)
            self.start_loading()
            return True
        if self._gone(conn):           # the client gave up (or died) before an answer
            _drop(conn, fds)
            return True
        why = _refusal(message, fds, self.files)
        if why is not None:
            _here(conn, fds, why)
        elif not self.ready:
            self.start_loading()
            self.waiting.append((conn, fds, message, time.monotonic() + LOAD_WAIT))
        else:
            self._serve(conn, fds, message)
        return True

    def _serve(self, conn: socket.socket, fds: List[int], req: dict) -> None:
        """Fork ``req``'s run and tell its client the run's pid."""
        if self.stale:
            _here(conn, fds, STALE)
            return
        pid = contain.fork_child(lambda: _run(req, fds))
        _close(fds)
        self.runs[pid] = conn
        _reply(conn, {"pid": pid})

    def _serve_waiting(self, ready: List) -> None:
        """The waiting requests: dropped when their client is gone (its
        connection readable: a client sends nothing more), served once the
        model is loaded, answered ``here`` once ``LOAD_WAIT`` has passed."""
        now = time.monotonic()
        left = []
        for conn, fds, req, deadline in self.waiting:
            if conn in ready:
                _drop(conn, fds)
            elif self.ready:
                self._serve(conn, fds, req)
            elif now >= deadline:
                _here(conn, fds, "the server is still loading the model")
            else:
                left.append((conn, fds, req, deadline))
        self.waiting = left

    @staticmethod
    def _gone(sock: socket.socket) -> bool:
        """Has the client closed its end of this connection?"""
        try:
            return sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _reap(self) -> None:
        """Wait for every ended run and tell its client the status; reap
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
            if sock is not None:
                _reply(sock, {"status": status})
                sock.close()

    def stop(self) -> None:
        """End every run left (SIGTERM, then SIGKILL after ``STOP_GRACE``);
        a waiting request's client sees its connection close."""
        for conn, fds, _, _ in self.waiting:
            _drop(conn, fds)
        self.waiting = []
        for pid in self.runs:
            contain.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for pid, sock in self.runs.items():     # (the status of a run that ended in time)
            status = None
            with contextlib.suppress(ChildProcessError):
                status = contain.end_within(pid, deadline - time.monotonic())
            if status is not None:
                _reply(sock, {"status": status})
            sock.close()
        self.runs = {}
        contain.sweep(limit=STOP_GRACE)           # what came back to us: none left behind


def _here(conn: socket.socket, fds: List[int], why: str) -> None:
    """Answer ``here`` (the client runs the command itself, saying ``why``)
    and let go of the connection and descriptors."""
    _reply(conn, {"here": why})
    _drop(conn, fds)


def _run(req: dict, fds: List[int]) -> int:
    """A forked run (``contain.fork_child``: it dies with the server):
    becomes the request's process (its stdout and stderr, stdin
    ``/dev/null``, nothing else of the server's, its directory, umask and
    environment, default signals) and runs ``python -m gpsimd_emu run``'s
    main."""
    contain.set_name("gpsimd-run")
    for sig in (*STOP_SIGNALS, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    os.closerange(3, 1 << 16)
    os.chdir(req["cwd"])
    if isinstance(req.get("umask"), int):
        os.umask(req["umask"])
    os.environ.clear()
    os.environ.update(req["env"])
    from .cli import main as cli_main   # (which sets one BLAS thread, as the command does)
    return cli_main(list(req["argv"]))


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m gpsimd_emu.server NAME PID START [--load]``: binds the
    abstract socket ``NAME`` (``protocol.server_name``), then forks, and
    this process exits 0 once the server (``gpsimd-server``, no client's
    child) listens; 3 when the name is taken or process ``PID`` with start
    time ``START`` is gone; 2 for bad arguments. The server ignores SIGINT
    (Ctrl-C reaches the runs through their clients); ``--load``: it loads
    the model at once."""
    argv = sys.argv[1:] if argv is None else argv
    load = argv[3:] == ["--load"]
    if len(argv) != 3 + load or not (argv[1].isdigit() and argv[2].isdigit()) or \
            not argv[0].startswith(f"gpsimd-emu/{os.getuid()}/{argv[1]}.{argv[2]}/"):
        print("usage: python -m gpsimd_emu.server NAME PID START [--load]", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pid, start = int(argv[1]), int(argv[2])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        watch = os.pidfd_open(pid)
        stat = proc_stat(pid)               # (checked once the pidfd holds the process)
        if stat is None or stat[2] != start:
            return 3
        listener.bind(b"\0" + argv[0].encode())
    except OSError:
        return 3
    files = model_files()
    sys.stdout.flush()
    listening, told = os.pipe()
    if os.fork():               # (the client waits for this process's exit, once the
        os.close(told)          # server listens: the server is no one's child)
        os._exit(0 if os.read(listening, 1) == b"L" else 3)
    os.close(listening)
    listener.listen(64)         # (here: the pid a client's SO_PEERCRED names is the server's)
    os.write(told, b"L")
    os.close(told)
    contain.set_name("gpsimd-server")
    low = 3                     # (close what the client's process left open)
    for keep in sorted((watch, listener.fileno())):
        os.closerange(low, keep)
        low = keep + 1
    os.closerange(low, 1 << 16)
    one_blas_thread()           # before numpy's import: as the command does
    server = Server(listener, watch, pid, files)
    if load:
        server.start_loading()
    try:
        server.serve()
    finally:
        listener.close()
        server.stop()
    if server._loader is not None:      # it ended while the model loaded: no finalising
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
