"""The SCons tool's actions stop with the build: a stop signal scons gets
is sent to each running action's process group (``gpsimd_tool.signals``),
so it reaches the command behind ``sh -c`` and that command's own
children, as ninja stops its commands; an action reads nothing of the
build's standard input."""

import os
import select
import signal
import sys
import threading

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))
from gpsimd_tool import signals  # noqa: E402


@pytest.fixture
def forwarding(monkeypatch):
    """``signals``, its "interrupted" state restored afterwards, and a
    cancel of the emulator server's waits (``emu_server.cancel``) of its
    own: the process's goes on serving the tests that follow."""
    from gpsimd_tool import emu_server
    cancel = os.pipe()
    monkeypatch.setattr(emu_server, "_CANCEL", cancel)
    yield signals
    signals._INTERRUPTED.clear()
    for fd in cancel:
        os.close(fd)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_reaches_every_process_of_a_running_action(tmp_path, forwarding, sig,
                                                                   capfd):
    """As SIGTERM, whichever it was: a Python step that a SIGINT reached
    while it imported printed a ``KeyboardInterrupt`` traceback under a
    Ctrl-C of the build (the waiter here keeps Python's SIGINT handler)."""
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    waiter = tmp_path / "waiter.py"
    waiter.write_text(f"""import os, signal, time
with open({str(fifo)!r}, "w") as f:
    f.write(f"{{os.getpid()}} {{os.getppid()}}")
time.sleep(600)
""")
    # the action's shell starts a command (sh) that starts a child of its
    # own (the waiter): each waits for ever unless a signal ends it
    script = f"sh -c '{sys.executable} {waiter}; true'; true"
    status, started = [], []
    run = threading.Thread(target=lambda: status.append(
        forwarding.spawn("/bin/sh", None, None, [script], dict(os.environ))))
    run.start()
    try:
        assert select.select([reader], [], [], 60)[0], "the action's processes never started"
        started += [int(p) for p in os.read(reader, 100).split()]
        pidfds = [os.pidfd_open(p) for p in started]
        forwarding._forward(sig)
        run.join(60)
        assert not run.is_alive()
        assert status == [-signal.SIGTERM]
        for pid, fd in zip(started, pidfds):    # the waiter and the command
            assert select.select([fd], [], [], 10)[0], f"process {pid} outlived the signal"
            os.close(fd)
    finally:
        os.close(reader)
        for pid in started:             # (a failed test leaves nothing behind)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if run.is_alive():
            forwarding._forward(signal.SIGKILL)
            run.join()
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_an_action_reads_nothing_of_the_builds_standard_input(tmp_path):
    """In a process group of its own an action that read the terminal would
    be stopped for ever (SIGTTIN): its standard input is /dev/null, as a
    ninja command's is. Here the build's input is a pipe holding a line."""
    got = tmp_path / "got"
    r, w = os.pipe()
    os.write(w, b"the build's own input\n")
    os.close(w)
    saved = os.dup(0)
    os.dup2(r, 0)
    try:
        status = signals.spawn("/bin/sh", None, None,
                               [f"read line; printf %s \"$line\" > {got}"], dict(os.environ))
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(r)
    assert status == 0 and got.read_text() == ""


def _as_from_a_terminal() -> None:
    """A ``preexec_fn``: SIGQUIT at its default, as a terminal's job has it
    (a pytest-xdist worker's children start with it ignored, which the
    build keeps), and no core file."""
    import resource
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.mark.parametrize("where", ["job thread", "main thread"])
def test_ctrl_backslash_ends_the_actions_before_the_build_dies(tmp_path, where):
    """SIGQUIT (Ctrl-\\), which SCons leaves at its default, would leave
    the actions (in groups of their own) running after the build folder's
    lock is gone: the build stops them, waits for every process of their
    groups, and only then dies of SIGQUIT, even when the build would end
    first. Actions run in SCons's job
    threads (``-j2`` and more) or in its main thread (``-j1``)."""
    import subprocess
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    waiter = tmp_path / "waiter.py"
    waiter.write_text(f"""import os, time
with open({str(fifo)!r}, "w") as f:
    f.write(f"{{os.getpid()}} {{os.getppid()}}")
time.sleep(600)
""")
    action = f"sh -c '{sys.executable} {waiter}; true'; true"
    run = "spawn()" if where == "main thread" else \
        "t = threading.Thread(target=spawn); t.start(); t.join()"
    build = tmp_path / "build.py"
    build.write_text(f"""import os, sys, threading
sys.path.insert(0, {str(ROOT / "site_scons" / "site_tools")!r})
from gpsimd_tool import signals
env = {{}}
signals.install(env, server=False)
def spawn():
    env["SPAWN"]("/bin/sh", None, None, [{action!r}], dict(os.environ))
{run}
print("the build went on", flush=True)
""")
    proc = subprocess.Popen([sys.executable, str(build)], stdout=subprocess.DEVNULL,
                            preexec_fn=_as_from_a_terminal)
    started = []
    try:
        assert select.select([reader], [], [], 60)[0], "the action's processes never started"
        started += [int(p) for p in os.read(reader, 100).split()]
        pidfds = [os.pidfd_open(p) for p in started]
        proc.send_signal(signal.SIGQUIT)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGQUIT
        for pid, fd in zip(started, pidfds):    # gone before the build was
            assert select.select([fd], [], [], 0)[0], f"process {pid} outlived the build"
            os.close(fd)
    finally:
        os.close(reader)
        proc.kill()
        proc.wait()
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _live_with(marker: bytes) -> list:
    """Pids of the live (not zombie) processes whose command line holds
    ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                line = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in line and state != b"Z":
            found.append(int(entry.name))
    return found


def test_no_action_starts_after_ctrl_backslash(tmp_path):
    """With ``scons -k`` SCons goes on starting actions after the running
    ones were stopped: an action being started when the build decided
    nothing was left would outlive it. Two job threads start actions one
    after another; at each of five moments, SIGQUIT leaves none behind."""
    import subprocess
    marker = f"0.5{os.getpid() % 1000:03d}"
    build = tmp_path / "build.py"
    build.write_text(f"""import os, sys, threading
sys.path.insert(0, {str(ROOT / "site_scons" / "site_tools")!r})
from gpsimd_tool import signals
env = {{}}
signals.install(env, server=False)
def loop():     # (as scons -k: the next action, and so on, to the graph's end)
    for _ in range(200):
        env["SPAWN"]("/bin/sh", None, None, ["sleep {marker}; true"], dict(os.environ))
threads = [threading.Thread(target=loop, daemon=True) for _ in range(2)]
for t in threads:
    t.start()
print("started", flush=True)
for t in threads:
    t.join()
""")
    for delay in (0.0, 0.1, 0.25, 0.4, 0.55):
        proc = subprocess.Popen([sys.executable, str(build)], stdout=subprocess.PIPE,
                                preexec_fn=_as_from_a_terminal)
        try:
            assert proc.stdout.readline() == b"started\n"
            if delay:
                select.select([], [], [], delay)    # (a moment in the actions' lives)
            proc.send_signal(signal.SIGQUIT)
            proc.wait(timeout=60)
            left = _live_with(f"sleep {marker}".encode())
            assert proc.returncode == -signal.SIGQUIT and left == [], f"after {delay} s: {left}"
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            for pid in _live_with(f"sleep {marker}".encode()):
                os.kill(pid, signal.SIGKILL)
