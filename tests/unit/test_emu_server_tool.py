"""The SCons tool's side of the emulator server (``gpsimd_tool.emu_server``):
which commands the build hands to it (``command_words``: exactly one plain
``PYTHON -m gpsimd_emu run ...`` command; anything else stays ``sh -c``),
and that the build waits for its servers' end (``close``)."""
import os
import pathlib
import signal
import sys
import threading

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "site_scons" / "site_tools"))

from gpsimd_tool import emu_server, signals  # noqa: E402
from gpsimd_tool.emu_server import command_words  # noqa: E402

RUN = ["/usr/bin/python3", "-m", "gpsimd_emu", "run"]


def test_a_test_command_gives_its_words():
    args = RUN + ["build/host/relu/testplan.json", "--results", "build/host/relu/test-results.json",
                  "--failed-results", "build/host/relu/test-results.failed.json", "--no-checks"]
    assert command_words(args) == args


def test_quoted_arguments_are_unquoted_as_the_shell_would():
    # SCons's POSIX escape: double quotes, backslash before '"' and '\\'
    args = RUN + ['"my dir/testplan.json"', "--results", '"a \\"b\\" c.json"']
    assert command_words(args) == RUN + ["my dir/testplan.json", "--results", 'a "b" c.json']


@pytest.mark.parametrize("args", [
    RUN + ["p.json", ";", "rm", "-rf", "x"],
    RUN + ["p.json", "|", "tee", "log"],
    RUN + ["p.json", ">", "log"],
    RUN + ["$PLAN"],
    RUN + ["`cat p`"],
    RUN + ["p.json", "&&", "true"],
    RUN + ["'p.json'"],
    ["/usr/bin/python3", "-m", "gpsimd_emu.shapes", "registration", "a", "-o", "b"],
    ["/usr/bin/python3", "-S", "-m", "gpsimd_build.steps", "pack"],
    ["g++", "-c", "a.cpp"],
    RUN[:3],
    ['"unterminated'],
])
def test_shell_syntax_and_other_commands_are_left_to_the_shell(args):
    assert command_words(args) is None


def test_a_close_returns_only_once_the_servers_it_found_stopping_have_stopped(monkeypatch):
    """At exit, the main thread's ``close`` may be waiting for a server to
    end when Ctrl-\\ makes the quitting thread call ``close`` too; the
    process dies as soon as that second call returns, so it must wait for
    the first one (seen: the server still running when scons died)."""
    stopping, release, stopped = threading.Event(), threading.Event(), []

    def stop_server(name):              # (a server that takes its time to end)
        stopping.set()
        assert release.wait(60)
        stopped.append(name)

    monkeypatch.setattr(emu_server.served, "stop_server", stop_server)
    monkeypatch.setattr(emu_server, "_names", {b"\0server"})
    monkeypatch.setattr(emu_server, "_closed", False)
    first = threading.Thread(target=emu_server.close)
    first.start()
    assert stopping.wait(60)
    seen, second_called = [], threading.Event()
    lock = emu_server._STOPPING

    class Watched:                      # (tells when the second call waits for the first)
        def __enter__(self):
            second_called.set()
            return lock.__enter__()

        def __exit__(self, *exc):
            return lock.__exit__(*exc)

    monkeypatch.setattr(emu_server, "_STOPPING", Watched())

    def second():
        emu_server.close()
        seen.append(list(stopped))      # what had stopped when it returned
        second_called.set()

    other = threading.Thread(target=second)
    other.start()
    assert second_called.wait(60)
    release.set()
    first.join(60)
    other.join(60)
    assert seen == [[b"\0server"]]


def test_a_quitting_build_starts_no_server(monkeypatch):
    """Once the build quits, a command that comes to ``$SPAWN`` starts
    nothing, not even the server's loading at the first command (which
    would end only when scons is gone)."""
    asked = []
    monkeypatch.setattr(emu_server, "prestart", asked.append)
    monkeypatch.setattr(emu_server, "run", lambda *a: asked.append(a))
    monkeypatch.setattr(signals, "_shell", lambda *a: asked.append(a))
    signals._QUITTING.set()
    try:
        status = signals.spawn_with_server("/bin/sh", None, None, ["true"], dict(os.environ))
    finally:
        signals._QUITTING.clear()
    assert (status, asked) == (-signal.SIGTERM, [])


def test_a_stop_signal_ends_the_wait_for_a_server_still_loading(monkeypatch):
    """A run handed to the server waits while the server loads the model
    (up to 5 s, then the server answers ``here``); a stop signal to the
    build ends that wait at once: the run gives up, nothing started (seen:
    Ctrl-\\ at the first test run took 5 s to end the build)."""
    import socket
    from gpsimd_emu.client import protocol, served
    cancel = os.pipe()                  # (the process's own goes on serving other tests)
    monkeypatch.setattr(emu_server, "_CANCEL", cancel)
    monkeypatch.setattr(emu_server, "_names", {b"\0other"})    # (no close at exit)
    monkeypatch.setattr(emu_server, "_closed", False)
    env = {"PATH": os.environ.get("PATH", "")}
    args = [sys.executable, "-m", "gpsimd_emu", "run", "plan.json", "--results", "r.json"]
    name = served.name_for(emu_server._this_process(), sys.executable, env,
                           protocol.model_files())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(name)                 # a server that takes the request and never
    listener.listen(4)                  # answers, as one still loading the model
    listener.settimeout(60)
    got, started = [], []
    run = threading.Thread(target=lambda: got.append(emu_server.run(args, env, started.append)))
    run.start()
    try:
        conn, _ = listener.accept()
        assert conn.recv(1 << 16)       # the request came
        signals._forward(signal.SIGINT)
        run.join(60)
        assert (got, started) == ([None], [])
        assert emu_server.run(args, env, started.append) is None     # and every later one
    finally:
        signals._INTERRUPTED.clear()
        listener.close()
        run.join(60)
        for fd in cancel:
            os.close(fd)
