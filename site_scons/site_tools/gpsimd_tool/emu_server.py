"""The build's emulator server: test runs forked by a process that has the
model and numpy imported already (``gpsimd_emu.server``), instead of a new
interpreter per library (about 0.2 s each), through the emulator's client
(``gpsimd_emu.client.served``, which a ninja build's test steps use too).

:func:`run` is called by ``signals.spawn_with_server`` for every command;
it takes those that are exactly ``$PYTHON -m gpsimd_emu run ...`` (no
shell syntax beyond quoting) and leaves every other command to ``sh -c``.
The command line, and so every signature, ``build.ninja`` and
``--dry-run``, stay what they are: only who forks the run changes. The
server is started loading at the first command of the build
(:func:`prestart`: a build that runs a command usually runs a test, and
the server's own start-up then overlaps the compiles and links), with the
command's Python, environment and directory; it serves this scons process
and ends with it, whatever kills it; :func:`close` (at exit) ends it and
waits for it. A run the server does not take is run with ``sh -c``.

``EMU_SERVER=0`` turns the server off.
"""

import atexit
import os
import shlex
import threading
from typing import Callable, Dict, List, Optional

from gpsimd_emu.client import protocol, served

__all__ = ["run", "command_words", "configure", "prestart", "close", "cancel"]

#: Characters that make a command line shell syntax (not one plain command).
_SHELL = set(";|&<>`$(){}*?~!#\n\\'")
_LOCK = threading.Lock()
_STOPPING = threading.Lock()  # held while :func:`close` stops the servers
_names = set()        # the servers this process started or used
_closed = False
_python = None        # the build's $PYTHON (``configure``): start the server early
#: Readable once the build stops (``cancel``): a run still waiting for the
#: server to start it gives up.
_CANCEL = os.pipe()
os.set_blocking(_CANCEL[1], False)
_me = None            # (pid, start time) of this process, the one the servers serve


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


def configure(python: str) -> None:
    """The build's ``$PYTHON``: :func:`prestart` starts the server with it."""
    global _python
    _python = python


def _this_process():
    global _me
    if _me is None:
        _me = protocol.this_process()
    return _me


def _name(python: str, env: Dict[str, str], files: Optional[str] = None) -> Optional[bytes]:
    """The name of the server for ``python`` and ``env`` (and the model's
    ``files``, read when not given), remembered for :func:`close`; None
    once closed."""
    name = served.name_for(_this_process(), python, env, files)
    with _LOCK:
        if _closed:
            return None
        if not _names:
            atexit.register(close)
        _names.add(name)
    return name


def prestart(env: Dict[str, str]) -> None:
    """Start the server loading now, with the configured Python and the
    environment of the build's commands, once per build (called at every
    command: the first one starts it)."""
    global _python
    with _LOCK:
        python, _python = _python, None
    if python:
        env = {str(k): str(v) for k, v in env.items()}
        name = _name(python, env)
        if name is not None:
            served.ask_to_load(name, python, env)


def close() -> None:
    """End this process's servers and wait for them (at exit, and when the
    build quits on SIGQUIT; idempotent): no run outlives the build. A call
    made while another thread's is stopping them waits for it (the main
    thread's at exit may be waiting for a server when the quitting thread
    calls it, and its return ends the process)."""
    global _closed
    with _STOPPING:
        with _LOCK:
            _closed = True
            names = list(_names)
            _names.clear()
        for name in names:
            served.stop_server(name)


def cancel() -> None:
    """The build stops (SIGINT, SIGTERM, SIGHUP, SIGQUIT): a run handed to
    a server that has not started it (one waiting for the model to load,
    up to ``gpsimd_emu.server.LOAD_WAIT`` seconds) gives up at once, and so
    does every later
    one (:func:`run` returns None; ``signals`` then starts nothing)."""
    try:
        os.write(_CANCEL[1], b"x")
    except OSError:
        pass                            # (full: it is readable already)


def run(args: List[str], env: Dict[str, str],
        started: Callable[[int], None]) -> Optional[int]:
    """Make the test run ``args`` through the server: its exit status
    (as ``subprocess``: negative for a signal), or None when the server
    does not take it (then nothing was started: run it with ``sh -c``).
    ``started(pid)`` is called once the run's process exists."""
    words = command_words(args)
    if words is None:
        return None
    env = {str(k): str(v) for k, v in env.items()}
    files = protocol.model_files()          # (read once for the name and the request)
    if _name(words[0], env, files) is None:
        return None
    status = served.hand_off(words[3:], _this_process(), words[0], env, start=True,
                             started=started, files=files, cancel=_CANCEL[0])
    return None if status is None else os.waitstatus_to_exitcode(status)
