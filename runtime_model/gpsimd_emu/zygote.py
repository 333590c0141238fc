"""The zygote: a small process (stdlib and ctypes, no numpy) that loads a
library's core objects once and forks every vector from there, so that each
vector starts from globals no launch has touched, for the price of a fork
of a small process.

Started by a library session (``gpsimd_emu.session``) as
``python -S -I -c ...`` with one end of a ``SOCK_SEQPACKET`` socket pair; it
dies with the session (``PR_SET_PDEATHSIG``) and makes itself PID 1 of a
new PID namespace (``contain.enter_namespace``): every process a vector
starts is inside, is swept after the vector, and dies with the zygote.
Protocol (one JSON object per message):

* session -> zygote ``{"cmd": "load", "copies": n, "cores": [{"core",
  "lsp", "name", "path", "packed"}], "leader": path|null}`` with the packed
  payloads' memfds (SCM_RIGHTS); reply ``{"ready": true, "cores":
  [{"error": str|null, "ops": [...]}], "spawn": mode, "cgroup": bool,
  "leader": "native"|"python", "leader_error": str|null}`` (``leader``:
  the native leader library, ``gpsimd_emu.native``; one that cannot be
  used leaves the Python leader, and says why). Each object is loaded
  ``n`` times (one copy per run of a vector, so that a process may make
  several runs, each with globals no launch touched); loading runs the
  objects' static initialisers (``dlopen``), and nothing else of theirs.
* ``{"cmd": "run", ...request}`` with the image memfd (the Python leader):
  the zygote sets the
  memory limit, forks the vector's leader (``gpsimd_emu.launch``) into
  its own process group and the memory
  cgroup, waits for it (at most every run's time limit plus 2 s), kills
  and sweeps whatever is left, and replies ``{"wait_status", "timed_out", "elapsed", "oom_kills", "pid"}``.
* end of file: the zygote removes its cgroup and exits.

With the native leader, a vector is a ``native.ZygoteRun`` message instead
(``run_native``; a ``run`` command is answered ``{"error"}``), and the zygote, once it has replied to the load,
replaces itself with the native zygote (``native_zygote.c``, through
``_become_native``), which loads the copies itself and serves those
messages in C, from a process with no interpreter in it.

Inside a PID namespace the zygote joins the memory cgroup itself, at its
start, so that a leader is born in it (moving a process into a cgroup
costs about 0.5 ms, and 5-20 ms the first time or after a pause); the
limit of a vector is then ``--memory`` less what the worker prefilled,
plus what the zygote had charged once loaded, and the leader makes
itself the OOM killer's first choice (``contain.prefer_for_oom``). The
relay outside the namespace removes the cgroup. In process-group mode
each leader joins it (so that the zygote can remove it).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import socket
import sys
import time
from typing import List, Optional

from . import contain
from .cgroup import MemoryCgroup
from .launch import VectorContext, leader_main
from .loader import LoadError, PackedObject, load_object
from .native import (ZYGOTE_ENV, NativeError, NativeLeader, become_zygote, function_table,
                     read_run)

__all__ = ["main", "MAX_MESSAGE"]

MAX_MESSAGE = 1 << 16   # = zygote_client.MAX_MESSAGE
#: Bytes a vector's cores get at least for their own allocations.
MIN_DATA = 64 << 20
#: Bytes beyond the zygote's own private data (``VmData``, once loaded)
#: that a vector's processes start with, before their own allocations.
DATA_SLACK = 16 << 20


class _PeerGone(Exception):
    """The session's end of the socket is closed (it ended, or was killed):
    nothing is left to serve."""


def _send(sock: socket.socket, obj: dict) -> None:
    try:
        sock.sendall(json.dumps(obj).encode())
    except OSError as e:                # (not a model error: say nothing)
        raise _PeerGone() from e


def _copy_fd(fd: Optional[int], path: Optional[str], name: str) -> int:
    """A new memfd holding the bytes of memfd ``fd`` (or of the file
    ``path``): another file, so ``dlopen`` loads another copy."""
    if fd is not None:
        data = os.pread(fd, os.fstat(fd).st_size, 0)
    else:
        with open(path, "rb") as f:
            data = f.read()
    out = os.memfd_create(os.path.basename(name) or "gpsimd-core", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]
    return out


def _load_copy(spec: dict, fd: Optional[int], first: bool):
    """One copy of a core object, loaded, checked and registered (the first
    from the session's memfd or the file itself, others from a new memfd).

    Raises:
        LoadError: naming the object and what is wrong.
    """
    if first:
        packed = PackedObject(spec["name"], spec.get("metadata") or {}, b"",
                              bool(spec.get("packed")), spec.get("path"))
        obj = load_object(packed, fd)
    else:
        packed = PackedObject(spec["name"], spec.get("metadata") or {}, b"", True)
        obj = load_object(packed, _copy_fd(fd, spec.get("path"), spec["name"]))
    obj.check_lsp(spec["lsp"], spec["core"])
    obj.register_ops()
    return obj


def _load(specs: List[dict], fds: List[int]) -> tuple:
    """The first copy of every core object; returns (objects, per-core
    reply entries, per-core fds to copy the others from)."""
    objects, entries, sources = [], [], []
    fd_iter = iter(fds)
    for spec in specs:
        fd = next(fd_iter) if spec.get("packed") else None
        entry = {"error": None, "ops": []}
        obj = None
        try:
            obj = _load_copy(spec, fd, True)
            entry["ops"] = list(obj.ops)
        except LoadError as e:
            entry["error"] = str(e)
        except Exception as e:  # a model bug: the vectors say so
            entry["error"] = f"device model error: {type(e).__name__}: {e}"
        objects.append(obj)
        entries.append(entry)
        sources.append(fd)
    return objects, entries, sources


def _more_copies(specs: List[dict], sources: list, copies: int) -> List[list]:
    """Copies 1 .. copies-1 of every object (one per further run of a
    vector: each from its own memfd, so each has its own globals); None
    where a copy does not load (copy 0 already said why)."""
    rows = []
    for _ in range(1, copies):
        row = []
        for spec, fd in zip(specs, sources):
            try:
                row.append(_load_copy(spec, fd, False))
            except Exception:
                row.append(None)
        rows.append(row)
    return rows


class Zygote:
    """The serving loop (``main`` runs it)."""

    def __init__(self, sock: socket.socket, parent: int):
        self.sock = sock
        self.parent = parent
        self.objects: list = []
        self.mode = "pgroup"
        self.data_base = 0
        self.cgroup: Optional[MemoryCgroup] = None
        #: the zygote is in its memory cgroup itself (its forks are born in
        #: it: no migration per vector, which costs 0.5 ms and, the first
        #: time or after a pause, 5-20 ms); ``baseline``: what it has charged
        self.inside = False
        self.baseline = 0
        #: the native leader (``gpsimd_emu.native``), when the session named
        #: one that loads; else each vector's processes run ``launch``
        self.native: Optional[NativeLeader] = None
        self.native_error: Optional[str] = None
        self._addresses: dict = {}

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 16)
            except (ConnectionResetError, OSError):
                return
            if not data:
                return
            if data[:1] != b"{":        # (a vector for the native leader: ZygoteRun)
                _send(self.sock, self.run_native(data, fds))
                continue
            msg = json.loads(data)
            cmd = msg.get("cmd")
            if cmd == "load":
                # answer once the first copies say whether the objects load,
                # then load the others while the session makes its first
                # vector ready
                first, entries, sources = _load(msg["cores"], fds)
                if not msg.get("memory_cgroup", True) and self.cgroup is not None:
                    self._drop_cgroup(for_good=True)
                if msg.get("leader"):
                    try:
                        self.native = NativeLeader(msg["leader"])
                    except NativeError as e:
                        self.native_error = str(e)
                _send(self.sock, {"ready": True, "cores": entries, "spawn": self.mode,
                                  "cgroup": self.cgroup is not None,
                                  "leader": "native" if self.native else "python",
                                  "leader_error": self.native_error})
                if not any(e["error"] for e in entries):
                    if self.native is not None:         # returns only when it cannot
                        self._become_native(msg["cores"], sources, int(msg.get("copies", 1)))
                    self.objects = [first] + _more_copies(msg["cores"], sources,
                                                          int(msg.get("copies", 1)))
                # what the objects' static initialisers may have changed that
                # waiting for a vector's leader needs (SIGCHLD ignored: the
                # kernel would reap it for us, status unknown)
                for sig in (signal.SIGCHLD, signal.SIGALRM):
                    signal.signal(sig, signal.SIG_DFL)
                # (no collection first: with the collector off since the
                # start, it would take 4-5 ms of the first vector's time to
                # free a few cycles)
                gc.freeze()
                self.data_base = contain.data_bytes() + DATA_SLACK   # a vector's own start
                if self.inside and self.cgroup is not None:
                    self.baseline = self.cgroup.usage()
            elif cmd == "run" and self.native is None:
                reply = self.run(msg, fds[0] if fds else -1)
                for fd in fds[1:]:
                    os.close(fd)
                _send(self.sock, reply)
            else:
                for fd in fds:
                    os.close(fd)
                _send(self.sock, {"error": "a vector for the native leader is a ZygoteRun"
                                  if cmd == "run" else f"unknown command {cmd!r}"})

    def run(self, req: dict, image_fd: int) -> dict:
        """Run one vector with the Python leader (module text); returns the
        reply."""
        op = req["op"]
        launchers = [[o.ops[op] for o in row] for row in self.objects]
        binders = [[o.binder() for o in row] for row in self.objects]
        data_limit, limited, oom0, join, inside = self._limit(
            int(req["memory"]), int(req["image_total"]), int(req["prefilled"]),
            int(req.get("parallel", 1)))
        req["data_limit"] = data_limit          # RLIMIT_DATA of the vector's processes
        cap = float(req["timeout"]) * len(req["runs"]) + 2.0
        start = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        ctx = VectorContext(req, image_fd, launchers, binders, os.getpid())
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                if join:
                    self.cgroup.join()
                elif inside:
                    contain.prefer_for_oom()
            finally:
                leader_main(ctx)
        os.close(image_fd)
        return self._end(pid, start, cap, limited, oom0)

    def run_native(self, data: bytes, fds: List[int]) -> dict:
        """Run one vector sent as a ``ZygoteRun`` (``data``; ``fds``: the
        image memfd), as ``run`` does: the zygote with the native leader,
        when it did not become the native zygote. Returns the reply."""
        image_fd = fds[0] if fds else -1
        for fd in fds[1:]:
            os.close(fd)
        m = read_run(data)
        if m is None or self.native is None or image_fd < 0:
            if image_fd >= 0:
                os.close(image_fd)
            return {"error": "a request the zygote cannot read"}
        r = m.request
        r.data_limit, limited, oom0, join, inside = self._limit(
            m.memory, m.image_total, m.prefilled, r.parallel)
        cap = r.timeout * r.nruns + 2.0
        start = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        launchers, binders = self._native_addresses(m.op.decode("utf-8", "replace"))
        pid = self.native.fork(r, image_fd, launchers, binders, os.getpid(),
                                       oom_first=inside,
                                       join_path=self.cgroup.procs_path() if join else None)
        os.close(image_fd)
        return self._end(pid, start, cap, limited, oom0)

    def _limit(self, limit: int, image_total: int, prefilled: int, parallel: int) -> tuple:
        """A vector's memory limit (bytes: ``--memory``, the image's, what
        the worker wrote into it): the cgroup's set where there is one.
        Returns (RLIMIT_DATA of its processes, limited by the cgroup, the
        cgroup's OOM kills so far, its leader joins the cgroup, the
        zygote is inside it)."""
        extra = max(MIN_DATA, limit - image_total)
        oom0 = 0
        limited = False
        if self.cgroup is not None:
            memory_cap = max(MIN_DATA, limit - prefilled) + self.baseline
            try:
                # (below what is charged now, a limit would fail, or on
                # cgroup v2 reclaim and OOM-kill the zygote itself)
                if self.inside and self.cgroup.usage() >= memory_cap:
                    raise OSError("charged above the limit")
                self.cgroup.set_limit(memory_cap)
                oom0 = self.cgroup.oom_kills()
                limited = True
            except OSError:
                self._drop_cgroup(for_good=False)
        if not limited:                     # RLIMIT_DATA only: shared out among the jobs
            extra = max(MIN_DATA, extra // max(1, parallel))
        return (self.data_base + extra, limited, oom0, limited and not self.inside,
                limited and self.inside)

    def _end(self, pid: int, start: float, cap: float, limited: bool, oom0: int) -> dict:
        """Wait for the leader ``pid`` (at most ``cap`` seconds from
        ``start``), sweep what the vector left: the reply."""
        status, timed_out = _wait(pid, start + cap)
        elapsed = time.monotonic() - start
        self._sweep()
        oom = self.cgroup.oom_kills() - oom0 if limited and self.cgroup is not None else 0
        return {"wait_status": status, "timed_out": timed_out, "elapsed": elapsed,
                "oom_kills": oom, "pid": pid, "spawn": self.mode}

    def _become_native(self, specs: List[dict], sources: list, copies: int) -> None:
        """Become the native zygote (``native.become_zygote``), unless
        ``$GPSIMD_EMU_NATIVE_ZYGOTE=0``; returns only when it does not."""
        if os.environ.get(ZYGOTE_ENV) == "0":
            return
        cg = self.cgroup
        sys.stdout.flush()
        sys.stderr.flush()
        become_zygote(self.native, self.sock.fileno(), self.parent, self.mode, copies,
                      (MIN_DATA, DATA_SLACK), (cg.version, cg.path) if cg else None,
                      self.inside, [(fd, spec["name"] if fd is not None else spec["path"])
                                    for spec, fd in zip(specs, sources)])

    def _native_addresses(self, op: str) -> tuple:
        """(launchers, binders): the addresses of ``op``'s launcher and of
        ``gpsimd_bind_core`` in every copy of every core object, as the
        request's tables (made once per op)."""
        got = self._addresses.get(op)
        if got is None:
            def address(fn) -> int:
                return ctypes.cast(fn, ctypes.c_void_p).value
            got = self._addresses[op] = (
                function_table([[address(o.ops[op]) for o in row] for row in self.objects]),
                function_table([[address(o.binder()) for o in row] for row in self.objects]))
        return got

    def _drop_cgroup(self, for_good: bool) -> None:
        """Stop limiting vectors through the cgroup: when the zygote is in
        it, lift its limit (for this vector, or ``for_good``; the relay
        removes the cgroup once the zygote has ended); else remove it."""
        if self.inside:
            try:
                self.cgroup.set_limit(1 << 40)
            except OSError:
                pass
            if not for_good:
                return
        else:
            self.cgroup.close()
        self.cgroup = None

    def _sweep(self) -> None:
        """Kill and reap whatever the vector left (nothing of it may run
        while the next vector does)."""
        if self.mode == "pgroup":
            contain.sweep()
        else:
            contain.sweep_namespace()

    def close(self) -> None:
        self._sweep()
        if self.cgroup is not None and not self.inside:   # (else the relay removes it)
            self.cgroup.close()
            self.cgroup = None


def _wait(pid: int, deadline: float) -> tuple:
    """(wait status, timed out) of the leader; kills its process group
    (and so, as its namespace's PID 1, every process of the vector) at the
    deadline."""
    status = contain.wait_until(pid, deadline, poll=0.0005)
    if status is not None:
        contain.kill_group(pid)         # whatever stayed in its group
        return status, False
    contain.kill_group(pid)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    return status, True


def main(argv: Optional[List[str]] = None) -> int:
    """``zygote SOCKET_FD PARENT_PID``: serve until the socket closes."""
    argv = sys.argv[1:] if argv is None else argv
    fd, parent = int(argv[0]), int(argv[1])
    contain.die_with_parent(parent)
    # the cgroup is made before the namespace: its name carries a pid of
    # the host's (the process that stays outside, relaying), so that two
    # zygotes never share one and a dead one's is recognised
    cgroup = MemoryCgroup.create()
    mode = contain.enter_namespace(keep_out=(fd,), on_exit=cgroup.close if cgroup else None)
    contain.set_name("gpsimd-zygote")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    gc.disable()
    try:                         # a crashing kernel leaves no core file
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    sock = socket.socket(fileno=fd)
    z = Zygote(sock, parent)
    z.mode = mode
    z.cgroup = cgroup
    # inside a namespace, the zygote joins its cgroup once (the relay,
    # outside, removes it when the zygote has ended); in process-group mode
    # each vector joins it, so that the zygote can remove it itself
    z.inside = cgroup is not None and mode != "pgroup" and cgroup.join()
    try:
        z.serve()
    except _PeerGone:
        pass
    finally:
        z.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)         # nothing to finalise: the run waits for this exit
