"""The worker's side of a zygote (``gpsimd_emu.zygote``): start it as a
small process (``python -S -I``: no site, no numpy), hand it the core
objects, send it vectors and read its replies (one JSON message each, over
a ``SOCK_SEQPACKET`` socket pair; the image memfd rides along as
SCM_RIGHTS). A vector for a zygote that runs the native leader (its load
reply says so) is a ``native.ZygoteRun`` instead of JSON: the native
zygote reads it in C.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time
from typing import Optional, Sequence, Tuple

from . import contain, native
from .cores import CoreSpec

__all__ = ["ZygoteClient", "ZygoteError", "prespawn", "prespawned_fd"]

_RUNTIME_MODEL = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Largest message either side sends (requests are a few KiB).
MAX_MESSAGE = 1 << 16


#: A zygote started ahead of its library (``prespawn``): (socket, pid).
_prespawned: Optional[Tuple[socket.socket, int]] = None


def _spawn() -> Tuple[socket.socket, int]:
    """Start a zygote (this process's child): (our end of its socket, pid).

    Raises:
        OSError: the process or the socket could not be made.
    """
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        os.set_inheritable(child.fileno(), True)
        code = (f"import sys; sys.path.insert(0, {_RUNTIME_MODEL!r}); "
                "from gpsimd_emu.zygote import main; sys.exit(main())")
        # -I ignores PYTHON* variables: pass on "no bytecode" (-B) as it is here
        flags = ["-S", "-I"] + (["-B"] if sys.flags.dont_write_bytecode else [])
        pid = os.posix_spawn(sys.executable,
                             [sys.executable, *flags, "-c", code,
                              str(child.fileno()), str(os.getpid())], os.environ)
    except BaseException:
        parent.close()
        raise
    finally:
        child.close()
    return parent, pid


def prespawn() -> None:
    """Start the next ``ZygoteClient``'s zygote now, before its library is
    known (the emulator server's spare run: the zygote's interpreter
    start-up and imports, about 50 ms, happen before the request). It is
    this process's child, as one started by the client is.

    Raises:
        OSError: the process or the socket could not be made.
    """
    global _prespawned
    if _prespawned is None:
        _prespawned = _spawn()


def prespawned_fd() -> Optional[int]:
    """The descriptor of the prespawned zygote's socket, if there is one."""
    return None if _prespawned is None else _prespawned[0].fileno()


def _take_prespawned() -> Optional[Tuple[socket.socket, int]]:
    """The prespawned zygote, if it is still there (else None, and it is
    reaped)."""
    global _prespawned
    got, _prespawned = _prespawned, None
    if got is None:
        return None
    sock, pid = got
    try:
        alive = os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:
        alive = False
    if alive:
        return got
    sock.close()
    return None


class ZygoteError(Exception):
    """The zygote died or sent something else than a reply; the message
    completes "the device model process ..." ("died with SIGSEGV")."""


class ZygoteClient:
    """A zygote process serving one library's core objects.

    Raises (constructor):
        OSError: the process or the socket could not be made.
    """

    def __init__(self, cores: Sequence[CoreSpec], copies: int = 1, memory_cgroup: bool = True,
                 leader: Optional[str] = None):
        self._ready: Optional[dict] = None
        self.sock, self.pid = _take_prespawned() or _spawn()
        specs, fds = [], []
        for c in cores:
            packed = c.obj.packed
            specs.append({"core": c.core, "lsp": c.lsp, "name": c.path, "packed": packed,
                          "metadata": c.obj.metadata,
                          "path": None if packed else os.path.abspath(c.obj.file or c.obj.path)})
            if packed:
                fds.append(c.fd)
        socket.send_fds(self.sock, [json.dumps({
            "cmd": "load", "cores": specs, "copies": copies, "memory_cgroup": memory_cgroup,
            "leader": os.path.abspath(leader) if leader else None}).encode()], fds)

    def _recv(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            raise ZygoteError(f"gave no answer within {timeout:g} s")
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError as e:
            raise ZygoteError(str(e)) from None
        if not data:
            raise ZygoteError(self._death())
        try:
            return json.loads(data)
        except ValueError:
            raise ZygoteError("an unreadable answer") from None

    def _death(self) -> str:
        if self.pid is None:
            return "is gone"
        try:
            got, st = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "is gone"
        self.pid = None
        if os.WIFSIGNALED(st):
            try:
                name = signal.Signals(os.WTERMSIG(st)).name
            except ValueError:
                name = f"signal {os.WTERMSIG(st)}"
            return f"died with {name}"
        return f"exited with status {os.WEXITSTATUS(st)}"

    def ready(self, timeout: float) -> dict:
        """The zygote's load reply (waits for it the first time).

        Raises:
            ZygoteError: it died or did not answer within ``timeout`` s.
        """
        if self._ready is None:
            self._ready = self._recv(timeout)
        return self._ready

    def run(self, request: dict, image_fd: int, timeout: float) -> dict:
        """Send a vector and wait for the reply.

        Raises:
            ZygoteError: it died or did not answer within ``timeout`` s.
        """
        self.send(request, image_fd)
        return self.receive(timeout)

    def send(self, request: dict, image_fd: int) -> None:
        """Queue a vector (the zygote runs them in the order sent).

        Raises:
            ZygoteError: it is gone, or the request is too large.
        """
        if self._ready is not None and self._ready.get("leader") == "native":
            try:                        # (the native zygote's message: native.ZygoteRun)
                data = native.run_message(request)
            except ValueError as e:
                raise ZygoteError(f"cannot take the request: {e}") from None
        else:
            data = json.dumps(dict(request, cmd="run")).encode()
        if len(data) > MAX_MESSAGE:
            raise ZygoteError(f"a request of {len(data)} bytes (at most {MAX_MESSAGE})")
        try:
            socket.send_fds(self.sock, [data], [image_fd])
        except OSError as e:
            raise ZygoteError(str(e)) from None

    def receive(self, timeout: float) -> dict:
        """The reply to the oldest vector sent and not yet answered.

        Raises:
            ZygoteError: it died or did not answer within ``timeout`` s.
        """
        return self._recv(timeout)

    def close(self) -> None:
        """End the zygote (closing its socket), and wait for it; kill it if
        it does not end within a second. Idempotent."""
        try:
            self.sock.close()
        except OSError:
            pass
        if self.pid is None:
            return
        try:
            if contain.wait_until(self.pid, time.monotonic() + 1.0) is None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = None
