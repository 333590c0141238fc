"""What a run the emulator server forks for a request does
(``gpsimd_emu.server``): it takes the request's stdout, stderr, directory
and environment (``_take_request``) and then runs what ``python -m
gpsimd_emu run`` runs, with its supervising process, worker, zygote and
containment, exiting with its status.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable

from . import contain
from .settings import one_blas_thread

__all__ = ["child", "end", "kill", "MAX_MESSAGE"]

#: Largest request (bytes): argv and the environment.
MAX_MESSAGE = 1 << 20


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
    if isinstance(req.get("umask"), int):       # (a ninja step's: gpsimd_emu.handoff)
        os.umask(req["umask"])
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


def child(req: dict, out_fd: int, err_fd: int, server: int) -> None:
    """A run forked for its request: ``python -m gpsimd_emu run``'s main."""
    def body() -> int:
        _reset(server)
        _take_request(req, out_fd, err_fd)
        from .cli import main as cli_main
        return cli_main(list(req["argv"]))
    _exit_with(body)


def end(pid: int) -> None:
    """Kill child ``pid`` and reap it."""
    kill(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
