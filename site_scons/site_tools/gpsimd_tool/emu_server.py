"""The build's emulator server: test runs made by a process forked from
one that has the model and numpy imported already (``gpsimd_emu.server``),
instead of a new interpreter per library (about 0.2 s each).

:func:`run` is called by ``signals.spawn`` for every command; it takes
those that are exactly ``$PYTHON -m gpsimd_emu run ...`` (no shell syntax
beyond quoting) and leaves every other command to ``sh -c``. The command
line, and so every signature, ``build.ninja`` and ``--dry-run``, stay what
they are: only who forks the run changes. The server is started at the
first command of the build (``prestart``: a build that runs a command
usually runs a test, and the server's own start-up then overlaps the
compiles) or at its first test run, with the build's Python and its
commands' environment, and lives exactly as long as this process holds
its control socket: it is closed (and the server waited for) at exit,
and the kernel closes it when this process dies, whatever kills it. A run whose Python or
``PYTHONPATH`` differs from the server's, or any run once the server
cannot be started or has died, is run with ``sh -c`` as before.

``EMU_SERVER=0`` (SConstruct) turns the server off.
"""

import atexit
import json
import os
import shlex
import socket
import subprocess
import threading
from typing import Callable, Dict, List, Optional

__all__ = ["run", "command_words", "configure", "prestart", "close"]

#: Characters that make a command line shell syntax (not one plain command).
_SHELL = set(";|&<>`$(){}*?~!#\n\\'")
_LOCK = threading.Lock()
_server = None        # the running server, or False once it cannot be used
_python = None        # the build's $PYTHON (``configure``): start the server early


class _Server:
    """A started ``python -m gpsimd_emu.server`` and its control socket."""

    def __init__(self, python: str, env: Dict[str, str]):
        self.python = python
        #: as given: the server's own os.environ is changed by Python's
        #: start-up (PEP 538 adds LC_CTYPE where no locale is set)
        self.env = dict(env)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "gpsimd_emu.server", str(theirs.fileno())], env=env,
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, close_fds=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.send_lock = threading.Lock()

    def serves(self, python: str, env: Dict[str, str]) -> bool:
        return python == self.python and env.get("PYTHONPATH") == self.env.get("PYTHONPATH")

    def close(self) -> None:
        """Close the control socket and wait for the server to end its runs."""
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def command_words(args: List[str]) -> Optional[List[str]]:
    """The words of ``args`` (a command as SCons passes it to ``$SPAWN``)
    when it is one plain ``PYTHON -m gpsimd_emu run ...`` command; else
    None."""
    line = " ".join(args)
    if _SHELL & set(line.replace('\\"', "").replace("\\\\", "")):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if len(words) < 4 or words[1:4] != ["-m", "gpsimd_emu", "run"]:
        return None
    return words


def _get(python: str, env: Dict[str, str]):
    """The server for this Python and environment (started on first use);
    None when it cannot be used."""
    global _server
    with _LOCK:
        if _server is None:
            try:
                _server = _Server(python, env)
                atexit.register(close)
            except OSError:
                _server = False
        if _server and _server.serves(python, env):
            return _server
        return None


def configure(python: str) -> None:
    """The build's ``$PYTHON``: :func:`prestart` may start the server with it."""
    global _python
    _python = python


def prestart(env: Dict[str, str]) -> None:
    """Start the server now, with the configured Python and the
    environment of the build's commands, if it is not started yet (called
    at the build's first command: a build that runs anything usually runs
    a test, and the server's own start-up, about 0.3 s, then overlaps the
    compiles and links instead of delaying the first test)."""
    if _server is None and _python:
        _get(_python, {str(k): str(v) for k, v in env.items()})


def close() -> None:
    """End the server (at exit; idempotent)."""
    global _server
    with _LOCK:
        server, _server = _server, False
    if server:
        server.close()


def _recv(sock: socket.socket) -> Optional[dict]:
    try:
        data = sock.recv(1 << 16)
    except OSError:
        return None
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


class ServerRun:
    """A run the server forked (what ``signals`` signals: ``pid``, the
    run's supervising process, which stops its whole run on SIGINT or
    SIGTERM)."""

    def __init__(self, pid: int):
        self.pid = pid


def run(args: List[str], env: Dict[str, str],
        started: Callable[[ServerRun], None], ended: Callable[[ServerRun], None]) -> Optional[int]:
    """Make the test run ``args`` through the server: its exit status
    (as ``subprocess``: negative for a signal), or None when the server
    cannot make it (then nothing was started: run it with ``sh -c``).
    ``started``/``ended`` bracket the time the run's process exists."""
    words = command_words(args)
    if words is None:
        return None
    env = {str(k): str(v) for k, v in env.items()}
    server = _get(words[0], env)
    if server is None:
        return None
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        request = json.dumps({"argv": words[3:], "cwd": os.getcwd(), "env": env}).encode()
        try:
            with server.send_lock:
                socket.send_fds(server.sock, [request], [theirs.fileno(), 1, 2])
        except OSError:
            return None
        finally:
            theirs.close()
        first = _recv(mine)
        if not first or "pid" not in first:
            return None                  # the server is gone: nothing started
        handle = ServerRun(int(first["pid"]))
        started(handle)
        try:
            last = _recv(mine)
        finally:
            ended(handle)
        if not last or "status" not in last:
            # the server died while the run went on; the run died with it
            print("scons: the emulator server ended during a test run", flush=True)
            return 1
        return os.waitstatus_to_exitcode(int(last["status"]))
    finally:
        mine.close()
