"""The worker's side of the zygote (stdlib and ctypes only): start
``gpsimd-zygote`` (the program the build compiles from ``zygote.c``,
``sandbox.c`` and ``leader.c``; ``gpsimd_device.zygote``) with one end of
a ``SOCK_SEQPACKET`` socket pair, send it the core objects, read its ready
message, send it vectors (a ``Vector``, the image memfd riding along as
SCM_RIGHTS) and read its replies (a ``Reply`` each, with a memfd of what
the cores wrote when they wrote anything); their layouts are
``gpsimd_host/zygote.h``'s (``binding.header_struct``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
from typing import List, Optional, Sequence

from gpsimd_device import zygote as program
from gpsimd_device.headers import INCLUDE_DIR
from gpsimd_device.printable import visible

from . import contain
from .binding import header_struct
from .control import ZY, kept_text
from .cores import CoreSpec

__all__ = ["ZygoteClient", "ZygoteError", "Vector", "Ready", "Reply", "vector_message",
           "read_ready", "read_reply", "program_problem"]

#: Largest ready message read (a library of thousands of ops is well under).
MAX_READY = 64 << 20
_HERE = os.path.dirname(os.path.abspath(__file__))


_Run = header_struct("zygote.h", "gz_run")
#: One vector for the zygote.
Vector = header_struct("zygote.h", "gz_vector")
#: The head of the ready message.
Ready = header_struct("zygote.h", "gz_ready")
#: The answer to one vector.
Reply = header_struct("zygote.h", "gz_reply")
#: The fields a request fills by name (``vector_message``): every int64_t
#: field of a ``Vector``, and every field of a run
_VECTOR_INTS = tuple(f for f, t in Vector._fields_ if t is ctypes.c_int64)
_RUN_FIELDS = tuple(f for f, _ in _Run._fields_)


def _str(raw: bytes, errors: str = "replace") -> str:
    return raw.decode("utf-8", errors)


def read_ready(data: bytes, ncores: int) -> Optional[dict]:
    """The ready message's memfd bytes as ``{"mode", "cgroup", "missing",
    "cores": [...]}``, each core ``{"ops": [names]}`` or ``{"error":
    text}``, with ``"lsp"`` (a ``binding.GpsimdLspInfo``) when the object
    answered ``gpsimd_linker_spec_info()``; None when it is not a whole
    ready message of ``ncores`` cores."""
    size = ctypes.sizeof(Ready)
    if len(data) < size or not 1 <= ncores <= ZY["MAX_CORES"]:
        return None
    head = Ready.from_buffer_copy(data[:size])
    names = data[size:].split(b"\0")
    if head.magic != ZY["MAGIC"] or names[-1] != b"":
        return None
    cores, at = [], 0
    for c in head.cores[:ncores]:
        entry: dict = {}
        if c.has_lsp:
            entry["lsp"] = c.lsp
        if c.loaded:
            entry["ops"] = [_str(n, "surrogateescape") for n in names[at:at + c.nops]]
            at += c.nops
        else:
            entry["error"] = _str(c.error)
        cores.append(entry)
    if at != len(names) - 1:
        return None
    return {"mode": _str(head.mode), "cgroup": bool(head.cgroup),
            "missing": _str(head.missing), "cores": cores}


def read_reply(data: bytes, kept: bytes) -> Optional[dict]:
    """A reply and the bytes of its output memfd as ``{"wait_status",
    "timed_out", "oom_kills", "pid", "output"}``, its
    ``output`` a list of ``{"core", "stream", "bytes", "text"}`` (the kept
    text: at most ``GPSIMD_ZY_OUTPUT_KEEP`` bytes from the start and as
    many from the end); ``{"error": text}`` when the vector did not run;
    None when ``data`` is not a reply."""
    if len(data) != ctypes.sizeof(Reply):
        return None
    r = Reply.from_buffer_copy(data)
    if r.magic != ZY["MAGIC"] or not 0 <= r.noutput <= len(r.output):
        return None
    if r.error:
        return {"error": _str(r.error)}
    output: List[dict] = []
    at = 0
    for o in r.output[:r.noutput]:
        text = kept_text(kept[at:at + o.head], kept[at + o.head:at + o.head + o.tail], o.total)
        at += o.head + o.tail
        output.append({"core": o.core, "stream": "stdout" if o.fd == 1 else "stderr",
                       "bytes": o.total, "text": text})
    return {"wait_status": r.wait_status, "timed_out": bool(r.timed_out),
            "oom_kills": r.oom_kills, "pid": r.pid, "output": output}


def vector_message(req: dict) -> bytes:
    """The worker's request dict (``DeviceImage.request()`` and the
    session's ``op``, ``timeout``, ``parallel``, ``spread_after``,
    ``spread_now``, ``memory``, ``image_total``, ``prefilled``) as the
    bytes of one ``Vector``.

    Raises:
        ValueError: it does not fit (runs, cores, an op name of 256 bytes).
    """
    op = os.fsencode(req["op"])
    runs = req["runs"]
    if len(op) >= ZY["OP_NAME"]:
        raise ValueError(f"op name of {len(op)} bytes (at most {ZY['OP_NAME'] - 1})")
    if not 1 <= len(runs) <= ZY["MAX_RUNS"] or not 1 <= int(req["ncores"]) <= ZY["MAX_CORES"]:
        raise ValueError(f"{len(runs)} runs of {req['ncores']} cores do not fit the zygote")
    # (every int64_t field of the structures from the request's key of its name)
    values = dict(req, magic=ZY["MAGIC"], nruns=len(runs), spread_now=bool(req.get("spread_now")),
                  parallel=max(1, int(req.get("parallel", 1))),
                  spread_after_ns=float(req["spread_after"]) * 1e9,
                  timeout_ns=float(req["timeout"]) * 1e9)
    v = Vector(op=op, **{f: int(values[f]) for f in _VECTOR_INTS})
    for i, run in enumerate(runs):      # (copy: the run's own by default; after, base: none)
        run = dict({"copy": run["index"], "after": -1, "base": -1}, **run)
        v.runs[i] = _Run(**{f: int(run[f]) for f in _RUN_FIELDS})
    return bytes(v)


def source_digest() -> str:
    """The digest of the zygote's sources in this copy of the emulator
    (``gpsimd_device.zygote.source_digest``: computed once per process, so
    the server computes it for all the runs it forks).

    Raises:
        OSError: a source cannot be read.
    """
    return program.source_digest(_HERE, INCLUDE_DIR)


def program_problem(path: Optional[str]) -> Optional[str]:
    """Why ``path`` cannot serve as this emulator's zygote, or None
    (stdlib only: the CLI's supervising process asks before any import of
    the model)."""
    if not path:
        return "no zygote program was given (the build makes one: " \
               f"<BUILD_DIR>/host/emu/{program.PROGRAM_NAME})"
    return program.program_problem(path, _HERE, INCLUDE_DIR)


class ZygoteError(Exception):
    """The zygote died or sent something else than a reply; the message
    completes "the device model process ..." ("died with SIGSEGV").
    ``said``: the zygote said why (before its ready message)."""

    said = False

    def meaning(self, answered: bool) -> str:
        """What this failure means to a vector, the zygote ``answered``
        one before or not: unless it said why, before its first answer it
        was loading the copies past the first."""
        if answered:
            return f"the device model process failed: {self}"
        if self.said:
            return f"the device model process {self}"
        return (f"the core objects could not be loaded: the device model process {self} "
                f"(a static initialiser of a core object?)")


#: glibc's per-thread malloc cache, which skips the poison of malloc / new
#: memory (ARCHITECTURE.md "The checks"), off in the zygote and what it
#: forks (appended to ``GLIBC_TUNABLES``: the last setting of one wins).
TCACHE_OFF = "glibc.malloc.tcache_count=0"


def _read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of memfd ``fd`` (closed):
    what the zygote sent (its own size, whatever a static initialiser did
    to the file it wrote to)."""
    try:
        return os.pread(fd, min(limit, os.fstat(fd).st_size), 0)
    finally:
        os.close(fd)


class ZygoteClient:
    """A zygote serving one library's core objects (``copies`` of each).

    Raises (constructor):
        OSError: the process or the socket could not be made.
    """

    def __init__(self, path: str, ncores: int, copies: int = 1):
        self._ready: Optional[dict] = None
        self._ended = "is gone"
        self.ncores = ncores
        #: what the objects' static initialisers wrote (kept by the zygote)
        self.load_output = b""
        path = os.path.abspath(path)     # (its working directory will not be ours)
        # (the file checked is the one that runs: through its descriptor,
        # whatever is renamed over the path meanwhile)
        program_fd = program.open_program(path, _HERE, INCLUDE_DIR)
        try:
            self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except BaseException:
            os.close(program_fd)
            raise
        argv = [path, str(child.fileno()), str(os.getpid()), str(copies), str(ncores)]
        try:
            os.set_inheritable(child.fileno(), True)
            tunables = [t for t in (os.environ.get("GLIBC_TUNABLES"), TCACHE_OFF) if t]
            env = dict(os.environ, GLIBC_TUNABLES=":".join(tunables))
            self.pid: Optional[int] = os.posix_spawn(f"/proc/self/fd/{program_fd}", argv, env)
        except BaseException:
            self.sock.close()
            raise
        finally:
            child.close()
            os.close(program_fd)

    def load(self, cores: Sequence[CoreSpec]) -> None:
        """Send the core objects (the zygote makes its sandbox meanwhile):
        their names and their payloads' descriptors (a plain ``.so`` by a
        descriptor too: in the sandbox, its path may be hidden).

        Raises:
            OSError: a plain object cannot be opened.
            ZygoteError: it is gone.
        """
        fds, opened = [], []
        try:
            for c in cores:
                fd = c.fd
                if not c.obj.packed:
                    fd = os.open(c.obj.file or c.obj.path, os.O_RDONLY | os.O_CLOEXEC)
                    opened.append(fd)
                fds.append(fd)
            names = b"".join(os.fsencode(c.path) + b"\0" for c in cores)
            try:
                socket.send_fds(self.sock, [names], fds)
            except OSError as e:
                try:
                    self.ready(0.0)      # (it ended: why, when it said so)
                except ZygoteError as ended:
                    if ended.said:
                        raise ended from None
                raise ZygoteError(str(e)) from None
        finally:
            for fd in opened:
                os.close(fd)

    def _recv(self, timeout: float, limits: tuple) -> tuple:
        """A message and the bytes of the memfds that came with it, each
        read up to its limit in ``limits`` (:func:`_read_fd`; others closed)."""
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            raise ZygoteError(f"gave no answer within {timeout:g} s")
        for flags in (0, socket.MSG_DONTWAIT):
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, ctypes.sizeof(Reply), 4, flags)
                break
            except (ConnectionResetError, BlockingIOError):
                # (it died with a message of ours unread: that error comes
                # once, before what it sent, which is still there)
                if flags:
                    raise ZygoteError(self._death()) from None
            except OSError as e:
                raise ZygoteError(str(e)) from None
        texts, unread = [], None
        for fd, limit in zip(fds, limits):       # (each closed, read or not)
            try:
                texts.append(_read_fd(fd, limit))
            except OSError as e:
                unread = unread or e
        for fd in fds[len(limits):]:
            os.close(fd)
        if unread is not None:
            raise ZygoteError(f"sent a descriptor that cannot be read ({unread.strerror})")
        if not data:
            raise ZygoteError(self._death())
        return data, texts

    def _death(self) -> str:
        """How it ended (waited for once; the same words each time after)."""
        if self.pid is None:
            return self._ended
        try:
            _, st = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return self._ended
        self.pid = None
        if os.WIFSIGNALED(st):
            self._ended = f"died with {contain.signal_name(os.WTERMSIG(st))}"
        else:
            self._ended = f"exited with status {os.WEXITSTATUS(st)}"
        return self._ended

    def ready(self, timeout: float) -> dict:
        """The ready message (waits for it the first time): ``{"mode",
        "cgroup", "missing", "cores": [...]}`` (:func:`read_ready`).

        Raises:
            ZygoteError: it died or did not answer within ``timeout`` s.
        """
        if self._ready is None:
            data, texts = self._recv(timeout, (MAX_READY, ZY["OUTPUT_KEEP"]))
            # (it ended before it was ready: what it said, its last line why)
            if data == ZY["NOT_READY"].encode() and texts:
                lines = texts[0].decode("utf-8", "replace").strip().splitlines()
                said = ZygoteError(f"ended before it was ready: "
                                   f"{visible(lines[-1] if lines else '?')}")
                said.said = True
                raise said
            if data != ZY["READY"].encode() or not texts:
                raise ZygoteError("sent something else than its ready message")
            self._ready = read_ready(texts[0], self.ncores)
            if self._ready is None:
                raise ZygoteError("an unreadable ready message")
            self.load_output = texts[1] if len(texts) > 1 else b""
        return self._ready

    def send(self, request: dict, image_fd: int) -> None:
        """Queue a vector (the zygote runs them in the order sent).

        Raises:
            ZygoteError: it is gone, or the request does not fit.
        """
        try:
            data = vector_message(request)
        except ValueError as e:
            raise ZygoteError(f"cannot take the request: {e}") from None
        try:
            socket.send_fds(self.sock, [data], [image_fd])
        except (BrokenPipeError, ConnectionResetError):
            raise ZygoteError(self._death()) from None
        except OSError as e:
            raise ZygoteError(str(e)) from None

    def receive(self, timeout: float) -> dict:
        """The reply to the oldest vector sent and not yet answered
        (:func:`read_reply`).

        Raises:
            ZygoteError: it died or did not answer within ``timeout`` s.
        """
        data, texts = self._recv(timeout, (4 * ZY["MAX_CORES"] * ZY["OUTPUT_KEEP"],))
        reply = read_reply(data, texts[0] if texts else b"")
        if reply is None:
            raise ZygoteError("an unreadable answer")
        return reply

    def close(self, wait: bool = True) -> None:
        """End the zygote (closing its socket), and wait for it; kill it if
        it does not end within a second. With ``wait`` False, once it was
        ready, it is left to end by itself: this process's subreaper reaps
        it, and gives its relay the time to remove the memory cgroup
        (``contain.sweep``). Idempotent."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.pid is None:
            return
        if not wait and self._ready is not None:
            self.pid = None
            return
        with contextlib.suppress(ChildProcessError):
            contain.end_within(self.pid, 1.0)
        self.pid = None
