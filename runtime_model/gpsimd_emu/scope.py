"""The scope of a ninja build's emulator server (``gpsimd_emu.handoff``
and ``gpsimd_emu.ninja_server``): which ninja process a test step runs
under (``find_ninja``), the version of the model a server must share
with a step (``fingerprint``), the server's abstract socket name
(``server_name``), the user and pid at the other end of a socket, and
the protocol's message format (``encode``, ``decode``: ``marshal``).

Standard library only, and only modules that cost a command no import
time (no json, socket, typing, which import re and enum): a test step
imports this before anything else.
"""

from __future__ import annotations

import _socket as socket
import binascii
import marshal
import os
import struct
import sys

__all__ = ["find_ninja", "fingerprint", "include_dir", "server_name", "peer_uid", "peer_pid",
           "encode", "decode", "proc_stat"]

#: Names of the processes that may stand between ninja and the step.
_SHELLS = ("sh", "bash", "dash", "zsh")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_RUNTIME_MODEL = os.path.dirname(_PACKAGE_DIR)


def proc_stat(pid: int) -> "tuple[str, int, int] | None":
    """(comm, parent pid, start time in clock ticks) of ``pid`` from
    ``/proc/PID/stat``, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    head, _, tail = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = tail.split()
    try:
        return comm, int(fields[1]), int(fields[19])    # fields 4 and 22 of proc(5)
    except (IndexError, ValueError):
        return None


def find_ninja(pid: "int | None" = None) -> "tuple[int, int] | None":
    """(pid, start time) of the ninja process this process (or ``pid``)
    runs under: its parent, or the parent of a shell between them; None
    when there is none."""
    current = os.getppid() if pid is None else pid
    for _ in range(3):
        stat = proc_stat(current)
        if stat is None:
            return None
        comm, parent, start = stat
        if comm == "ninja":
            return current, start
        if comm not in _SHELLS:
            return None
        current = parent
    return None


def include_dir() -> str:
    """The folder of the device headers the model reads its facts from at
    import (``gpsimd_device.headers.INCLUDE_DIR``, found the same way
    without importing it)."""
    package = os.path.join(_RUNTIME_MODEL, "gpsimd_device")
    for candidate in (os.path.join(package, "include"), os.path.join(_RUNTIME_MODEL, "include")):
        if os.path.isdir(os.path.join(candidate, "gpsimd_host")):
            return candidate
    return os.path.join(_RUNTIME_MODEL, "include")


def _stat_line(path: str, label: str) -> "str | None":
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{label}:{st.st_size}:{st.st_mtime_ns}"


def fingerprint() -> str:
    """What a server must share with a command to run it as the command
    would: the interpreter, ``sys.path`` (``PYTHONPATH`` included), the
    size and time of every file of ``gpsimd_emu`` and ``gpsimd_device``
    and of the device headers they read at import (a model or a header
    edited during the ninja run is not the server's), and of numpy's and
    ml_dtypes' ``__init__.py`` (an upgrade)."""
    parts = [sys.executable, repr(sys.flags), *sys.path]
    folders = [(os.path.join(_RUNTIME_MODEL, p), p) for p in ("gpsimd_emu", "gpsimd_device")]
    folders.append((os.path.join(include_dir(), "gpsimd_host"), "gpsimd_host"))
    for folder, label in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for name in names:
            if name.endswith((".py", ".c", ".h")):
                line = _stat_line(os.path.join(folder, name), f"{label}/{name}")
                if line:
                    parts.append(line)
    for package in ("numpy", "ml_dtypes"):
        for entry in sys.path:
            line = _stat_line(os.path.join(entry or ".", package, "__init__.py"), package)
            if line:
                parts.append(line)
                break
    return "\n".join(parts)


def server_name(ninja: "tuple[int, int]", print_: "str | None" = None) -> bytes:
    """The abstract socket name of the server for the ninja process
    ``ninja`` (pid, start time: a pid used again is another name), this
    user and this ``fingerprint`` (its CRC: another version of the model
    has another server; the server compares the whole text)."""
    crc = binascii.crc32((fingerprint() if print_ is None else print_).encode())
    return f"\0gpsimd-emu/{os.getuid()}/{ninja[0]}.{ninja[1]}/{crc:08x}".encode()


def _peer(sock) -> "tuple[int, int, int]":
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)


def peer_uid(sock) -> int:
    """The user id of the process at the other end of ``sock`` (a
    ``socket.socket`` or ``_socket.socket``)."""
    return _peer(sock)[1]


def peer_pid(sock) -> int:
    """The pid of the process at the other end of ``sock``."""
    return _peer(sock)[0]


def encode(message: dict) -> bytes:
    """A message of the protocol (module text)."""
    return marshal.dumps(message)


def decode(data: bytes) -> "dict | None":
    """The message in ``data``, or None when it is not one."""
    try:
        message = marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None
    return message if isinstance(message, dict) else None
