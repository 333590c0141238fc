"""What a run the emulator server forks does (``gpsimd_emu.server``): a
run forked for its request (``child``), and the spare run (``spare``,
with its worker ``_spare_worker``) forked ahead of its request, whose
worker has started its zygote already. Each takes its request's stdout,
stderr, directory and environment (``_take_request``) and then runs what
``python -m gpsimd_emu run`` runs, with its supervising process, worker,
zygote and containment, exiting with its status.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Callable

from . import contain
from .settings import one_blas_thread

__all__ = ["child", "spare", "end", "kill", "MAX_MESSAGE"]

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


def spare(sock: socket.socket, server: int) -> None:
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
        from . import cli
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
            end(worker)
            return args
        try:                            # the worker reads the plan as this process does
            socket.send_fds(mine, [data], [1, 2])
            sent = True
        except OSError:                 # the worker is gone: fork another
            end(worker)
            sent = False
        prepared = cli.load(args)
        if isinstance(prepared, int):
            end(worker)
            return cli.settle(args, prepared)
        start: Callable[[], int] = (lambda: worker) if sent else \
            (lambda: cli.fork_worker(prepared))   # noqa: E731
        mine.close()
        return cli.settle(args, cli.supervise(prepared, start))
    _exit_with(body)


def _spare_worker(sock: socket.socket, supervisor: int) -> None:
    """A spare run's worker (``_spare``): starts its zygote, waits for the
    request and runs it as the CLI's worker does."""
    def body() -> int:
        contain.die_with_parent(supervisor)
        from . import cli
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
