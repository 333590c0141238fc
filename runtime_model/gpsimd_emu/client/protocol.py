"""What the emulator server (``gpsimd_emu.server``) and its clients
(``gpsimd_emu.client.served``, the build) agree on: the environment
variables that steer the emulator (each name defined here only), the
vectors' default time limit and runs, the signals that stop a run and
ending by one (``end_by``), the process a server serves
(``this_process``, ``find_ninja``, ``proc_stat``), the server's abstract
socket name (``server_name``), the model's files a server must share with
a client (``model_files``), the pid and user at the other end of a socket
(``peer``), and the message format (``encode``, ``decode``: ``marshal``).

Standard library only, and only modules that cost a command no import
time (no json, socket, typing, which import re and enum): a ninja test
step imports this before anything else.
"""

from __future__ import annotations

import _signal as signal
import _socket as socket
import binascii
import marshal
import os
import struct

__all__ = ["SERVER_ENV", "LOG_ENV", "JOBS_ENV", "QUIET_ENV", "VERBOSE_ENV", "MAX_MESSAGE",
           "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "time_limit_arg", "RUNS_PER_VECTOR", "STOP_SIGNALS",
           "end_by", "find_ninja",
           "this_process", "model_files", "include_dir", "server_key", "server_name", "peer",
           "encode", "decode", "proc_stat", "runner_of", "NINJA_NAMES", "MODEL_ROOT"]

#: ``0``: no run is handed to a server (README's ``EMU_SERVER=0``).
SERVER_ENV = "GPSIMD_EMU_SERVER"
#: Diagnostics: a file each hand-off appends one line to, saying whether
#: its run was served (``served pid=N``) or why not (``here: ...``).
LOG_ENV = "GPSIMD_EMU_SERVER_LOG"
#: The build's -j, in the test commands' environment (not in a command:
#: -j never re-runs a test): the emulator's share of the CPUs.
JOBS_ENV = "GPSIMD_EMU_JOBS"
#: ``1``: the emulator prints no PASS line (``QUIET=1``; not in the command,
#: so switching it re-runs nothing).
QUIET_ENV = "GPSIMD_EMU_QUIET"
#: ``1``: what a vector's cores wrote is printed under every line, not
#: only under a failure's or a warning's (``VERBOSE=1``; not in the command).
VERBOSE_ENV = "GPSIMD_EMU_VERBOSE"
#: Largest message (bytes): a request's argv and environment.
MAX_MESSAGE = 1 << 20
#: Seconds one run of a vector's cores may take (each run: the poisoned
#: private pass, its second run, each fixed-order pass) before it is
#: killed (``--timeout``, README's ``EMU_TIMEOUT``; ``gpsimd_emu.settings``).
DEFAULT_TIMEOUT = 60.0
#: The largest time limit a run takes (a day): the supervisor waits six
#: runs per vector of it, and a wait must fit the platform's time_t.
MAX_TIMEOUT = 86400.0


def time_limit_arg(text: str) -> float:
    """A time limit given on a command line (``--timeout``, the plugin's
    ``--gpsimd-timeout``): seconds, > 0 and at most ``MAX_TIMEOUT`` (``inf``
    or ``1e300`` overflowed the waits with a traceback, ``nan`` too).

    Raises:
        argparse.ArgumentTypeError: the message argparse (and pytest) print.
    """
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text}: must be > 0 and at most {MAX_TIMEOUT:g} "
                                         "seconds")
    return value


#: The most runs of its cores one vector makes (two against private
#: poisoned outputs, two against a shared one in fixed orders, the second
#: call, and the run of the cores that read the output through a pointer
#: with every other core done; ``gpsimd_emu.runs.runs_for``, checked by a
#: test): the whole run's
#: and a vector service request's time limits count them.
RUNS_PER_VECTOR = 6
#: The signals that stop a test run: a ninja step sends them on to its
#: served run; the run's supervising process, on one, ends the whole run
#: and itself by that signal (``gpsimd_emu.cli``).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: Names of the processes that may stand between ninja and the step.
_SHELLS = ("sh", "bash", "dash", "zsh")
#: Names ninja's program goes by (a distribution's ``ninja-build``, the
#: ``samu`` implementation of the same file format).
NINJA_NAMES = ("ninja", "ninja-build", "samu")

#: The folder that holds ``gpsimd_emu`` and ``gpsimd_device`` (this copy's).
MODEL_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def end_by(sig: int) -> int:
    """End this process by signal ``sig`` (its default action restored):
    128 + ``sig``, the exit status to end with should it go on (blocked)."""
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig


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


def this_process() -> "tuple[int, int]":
    """(pid, start time) of this process: what a build served by its own
    process (scons) names its server by (a pid used again is another
    process: the start time tells them apart)."""
    stat = proc_stat(os.getpid())
    assert stat is not None              # (this process is alive)
    return os.getpid(), stat[2]


def find_ninja() -> "tuple[int, int] | None":
    """(pid, start time) of the ninja process this process runs under (a
    process named as in :data:`NINJA_NAMES`): its parent, or the parent of
    a shell between them; None when there is none."""
    current = os.getppid()
    for _ in range(3):
        stat = proc_stat(current)
        if stat is None or stat[0] not in NINJA_NAMES + _SHELLS:
            return None
        if stat[0] in NINJA_NAMES:
            return current, stat[2]
        current = stat[1]
    return None


def runner_of(pid: int) -> "tuple[int, int] | None":
    """(pid, start time) of process ``pid``, the parent of a ninja file
    step's shell: the program that runs the file's steps, whatever its name
    (ninja runs each step with ``/bin/sh -c``); None when it is gone or is
    itself a shell (a step's command run by hand)."""
    stat = proc_stat(pid)
    if stat is None or stat[0] in _SHELLS:
        return None
    return pid, stat[2]


def include_dir() -> str:
    """The folder of the device headers the model reads its facts from at
    import (``gpsimd_device.headers.INCLUDE_DIR``, found the same way
    without importing it)."""
    package = os.path.join(MODEL_ROOT, "gpsimd_device")
    for candidate in (os.path.join(package, "include"), os.path.join(MODEL_ROOT, "include")):
        if os.path.isdir(os.path.join(candidate, "gpsimd_host")):
            return candidate
    return os.path.join(MODEL_ROOT, "include")


def model_files() -> str:
    """The size and time of every file of ``gpsimd_emu`` (this copy) and
    ``gpsimd_device`` and of the device headers they read at import, one
    line each: a model or a header edited during the build is not a
    running server's. (numpy's and ml_dtypes' versions are the
    interpreter's and its path's: ``server_key``.)"""
    parts = []
    folders = [(os.path.join(MODEL_ROOT, p), p)
               for p in ("gpsimd_emu", "gpsimd_device", "gpsimd_emu/client")]
    folders.append((os.path.join(include_dir(), "gpsimd_host"), "gpsimd_host"))
    for folder, label in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for name in (n for n in names if n.endswith((".py", ".c", ".h"))):
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            parts.append(f"{label}/{name}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def server_key(python: str, env: "dict[str, str]", cwd: str, files: "str | None" = None) -> str:
    """What a run must share with a server to be run as its command would
    run: the interpreter ``python``, the ``PYTHON*`` variables of its
    environment ``env`` (its path and flags), its directory ``cwd`` (the
    first entry of ``sys.path`` under ``-m``), and the model's ``files``
    (:func:`model_files`, read when not given)."""
    flags = sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))
    return "\n".join([python, repr(flags), cwd, model_files() if files is None else files])


def server_name(served: "tuple[int, int]", key: str) -> bytes:
    """The abstract socket name of the server for the process ``served``
    (pid, start time) of this user and ``key`` (``server_key``; its CRC:
    another version of the model has another server, and the server
    compares its own files to a request's)."""
    crc = binascii.crc32(key.encode())
    return f"\0gpsimd-emu/{os.getuid()}/{served[0]}.{served[1]}/{crc:08x}".encode()


def peer(sock) -> "tuple[int, int]":
    """(pid, user id) of the process at the other end of ``sock`` (a
    ``socket.socket`` or ``_socket.socket``), from ``SO_PEERCRED``."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[:2]


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
