"""A ninja build's emulator server: what the process that
``gpsimd_emu.handoff.start_server`` forks off a step of that ninja run
(the prestart step, which has it load the model at once, or the first
test step, which starts it idle) goes on to run (``serve``): it listens
on the abstract socket ``scope.server_name`` and serves the steps' runs
(``NinjaServer``: ``gpsimd_emu.server.Server`` with connections instead
of a control socket) until the ninja process (whose start time must be
the one the step saw: a pid used again is another process) ends.

The server is a fork of the step's interpreter, not a new one: the same
interpreter, flags, ``sys.path`` and environment as the test steps'
commands (so the same ``scope.fingerprint``), and one Python start-up
less (about 50 ms) before it can load the model. Its name (``comm``) is
``gpsimd-server``; its command line is still the step's.

Loading: the model (``server._preload``: numpy and every module a run
imports, 0.15-0.3 s) loads in a thread at nice ``LOAD_NICE``, so that
the build's own steps (the compile beside which the prestart step runs)
come first; the loop goes on answering meanwhile. A request that comes
while it loads waits for it (``LOAD_WAIT`` seconds at most, then it is
answered ``here``: its step runs its vectors itself); one whose step is
gone by then is dropped. A server whose model's files changed while it
loaded serves no step.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
import time
from typing import List, Optional, Tuple

from . import contain, scope
from . import server as base
from .server import MAX_MESSAGE, Server, _close, _reply, _request_of
from .settings import one_blas_thread

__all__ = ["serve", "NinjaServer", "LOAD_WAIT", "LOAD_NICE"]

#: Seconds a step's request waits for the model being loaded (it takes
#: 0.15-0.3 s; ``handoff.FIRST_REPLY_TIMEOUT`` is longer) before it is
#: answered ``here``.
LOAD_WAIT = 5.0
#: The nice value (setpriority(2), of the loading thread alone) at which
#: the model loads.
LOAD_NICE = 10
#: The answer to a step while the server's model is not the step's own
#: (``NinjaServer.stale``).
STALE = "the model changed while the server loaded it"


class NinjaServer(Server):
    """The server of one ninja run: requests are connections to
    ``listener`` (``handoff``'s protocol: one request per connection, the
    connection being the run socket, messages in ``scope.encode``'s
    format); ``watch``, a pidfd, ends the loop when that process (ninja)
    ends; ``fingerprint``: what a request must match. It starts with the model not loaded
    (``start_loading``); ``waiting``: the requests that wait for it,
    each (connection, its two descriptors, the request, the monotonic
    time it is answered ``here`` at)."""

    def __init__(self, listener: socket.socket, watch: int, env: dict, fingerprint: str):
        super().__init__(ready=False)
        self.listener, self.watch = listener, watch
        self.env, self.fingerprint = env, fingerprint
        self._loader: Optional[threading.Thread] = None
        self.waiting: List[Tuple[socket.socket, List[int], dict, float]] = []
        #: the model's files as they were before it loaded (``_loaded``
        #: compares), and whether they changed meanwhile
        self._files = scope.fingerprint()
        self.stale = False

    @property
    def loading(self) -> bool:
        """Is the model being loaded (``start_loading``) right now?"""
        return self._loader is not None

    def _sources(self) -> List:
        return [self.listener, self.watch] + [w[0] for w in self.waiting]

    def _timeout(self) -> Optional[float]:
        if not self.waiting:
            return None
        return max(0.0, min(w[3] for w in self.waiting) - time.monotonic())

    def _handle(self, ready: List) -> bool:
        if self.watch in ready:
            return False                          # ninja ended
        if self._loader is not None and not self._loader.is_alive():
            self._loaded()
        if self.waiting:
            self._serve_waiting(ready)
        if self.listener in ready:
            self._accept()
        return True

    def start_loading(self) -> None:
        """Load the model in a thread (``server._preload``), unless it is
        loaded or loading; ``_loaded`` runs once it is done."""
        if self._loader is not None or self.ready:
            return

        def load() -> None:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOAD_NICE)
            except (AttributeError, OSError):
                pass
            try:
                base._preload()
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
        # (a file edited while it loaded: what it imported may be either
        # version; it serves no step, each runs its own vectors)
        self.stale = scope.fingerprint() != self._files

    def _accept(self) -> None:
        """Take one connection to the listener."""
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds: List[int] = []
        try:
            if scope.peer_uid(conn) != os.getuid():
                conn.close()
                return
            conn.settimeout(2.0)        # (a client sends its request at once)
            data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
            conn.settimeout(None)
        except OSError:
            _close(fds)
            conn.close()
            return
        message = scope.decode(data)
        if isinstance(message, dict) and message.get("prestart") is True:
            # (handoff.prestart: test steps are coming; nothing to answer)
            if message.get("fingerprint") == self.fingerprint:
                self.start_loading()
            _close(fds)
            conn.close()
            return
        if self._gone(conn):           # the step gave up (or died) before an answer
            _close(fds)
            conn.close()
            return
        req = _request_of(message) if len(fds) == 2 else "no stdout and stderr"
        if isinstance(req, str) or req.get("fingerprint") != self.fingerprint:
            _here(conn, fds, req if isinstance(req, str) else "another version of the model")
        elif not self.ready:
            self.start_loading()
            self.waiting.append((conn, fds, req, time.monotonic() + LOAD_WAIT))
        else:
            self._serve(conn, fds, req)

    def _serve(self, conn: socket.socket, fds: List[int], req: dict) -> None:
        """Run ``req`` with the loaded model (answered ``here`` if it is
        :data:`STALE`)."""
        if self.stale:
            _here(conn, fds, STALE)
            return
        self._start(conn, req, fds[0], fds[1], scope.encode)

    def _serve_waiting(self, ready: List) -> None:
        """The waiting requests: dropped when their step is gone (its
        connection readable: a step sends nothing more), served once the
        model is loaded, answered ``here`` once ``LOAD_WAIT`` has passed."""
        now = time.monotonic()
        left = []
        for conn, fds, req, deadline in self.waiting:
            if conn in ready:
                _close(fds)
                conn.close()
            elif self.ready:
                self._serve(conn, fds, req)
            elif now >= deadline:
                _here(conn, fds, "the server is still loading the model")
            else:
                left.append((conn, fds, req, deadline))
        self.waiting = left

    def stop(self) -> None:
        """``Server.stop``; a waiting request's step sees its connection
        close, and runs its vectors itself."""
        for conn, fds, _, _ in self.waiting:
            _close(fds)
            conn.close()
        self.waiting = []
        super().stop()


def _here(conn: socket.socket, fds: List[int], why: str) -> None:
    """Answer a step ``here`` (it runs its vectors itself, saying ``why``)
    and let go of its connection and descriptors."""
    _reply(conn, {"here": why}, scope.encode)
    _close(fds)
    conn.close()


def serve(ninja: Tuple[int, int], load: bool) -> int:
    """Serve the ninja process ``ninja`` (pid, start time) until it ends
    (the caller holds the bound ``.../start`` name, "being started", for
    as long); ``load``: start loading the model at once. Returns 0, also
    when the server is not needed (ninja is gone, another server has the
    name); never returns while the model is being loaded (``os._exit``:
    no finalising with the loading thread alive)."""
    pid, start = ninja
    contain.set_name("gpsimd-server")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    env = dict(os.environ)              # as the steps' commands have it (before BLAS's)
    try:
        watch = os.pidfd_open(pid)
    except OSError:
        return 0
    stat = scope.proc_stat(pid)
    if stat is None or stat[2] != start:  # (checked once the pidfd holds the process)
        return 0
    print_ = scope.fingerprint()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        listener.bind(scope.server_name((pid, start), print_))
        listener.listen(64)
    except OSError:
        return 0
    one_blas_thread()      # before numpy's import: as the command does
    server = NinjaServer(listener, watch, env, print_)
    if load:
        server.start_loading()
    try:
        server.serve()
    finally:
        listener.close()
        server.stop()
    if server.loading:                   # ninja ended while the model loaded: no finalising
        os._exit(0)
    return 0
