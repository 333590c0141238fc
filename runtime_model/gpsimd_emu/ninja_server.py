"""A ninja build's emulator server (``python -m gpsimd_emu.server --ninja
PID.START --start-fd FD``): started idle by the first test step of that
ninja run (``gpsimd_emu.handoff.start_server``, which hands it ``FD``, the
bound ``.../start`` name it holds for its life), it listens on the
abstract socket ``scope.server_name`` and serves the steps' runs with
``gpsimd_emu.server.Server`` until the ninja process ``PID`` (whose start
time must be ``START``: a pid used again is another process) ends.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import List

from . import contain, scope
from .server import Server
from .settings import one_blas_thread

__all__ = ["main"]


def main(argv: List[str]) -> int:
    """``python -m gpsimd_emu.server --ninja PID.START --start-fd FD``
    (``argv``, from ``--ninja`` on): 0 when it served until ninja ended, or
    when it is not needed (ninja is gone, another server has the name); 2
    for bad arguments."""
    try:
        pid, start = (int(x) for x in argv[1].split("."))
        if argv[2] != "--start-fd" or len(argv) != 4:
            raise ValueError(argv)
        start_lock = socket.socket(fileno=int(argv[3]))    # held for life: "being started"
    except (IndexError, ValueError, OSError):
        print("usage: python -m gpsimd_emu.server --ninja PID.START --start-fd FD",
              file=sys.stderr)
        return 2
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
    server = Server(listener=listener, watch=watch, ready=False, env=env, fingerprint=print_)
    try:
        server.serve()
    finally:
        listener.close()
        server.stop()
        start_lock.close()
    if server.loading:                   # ninja ended while the model loaded: no finalising
        os._exit(0)
    return 0
