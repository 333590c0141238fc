"""The emulator's client (gpsimd_emu.client.served, .protocol): how the
ninja process is found, what names a server, the messages, and that a
command not under ninja, or with serving turned off, runs itself. (Served
runs, signals and the server's end: the integration tests
``test_emu_server.py``, ``test_emu_handoff.py`` and ``test_ninja.py``.)"""
import os
import socket
import subprocess
import sys

from conftest import ROOT

from gpsimd_emu.client import protocol as scope
from gpsimd_emu.client import served as handoff


_PROBE = (f"import sys; sys.path.insert(0, {str(ROOT / 'runtime_model')!r}); "
          "from gpsimd_emu.client import protocol; print(protocol.find_ninja())")


def _under(name, through_shell=False):
    """(pid of a process named ``name``, what ``find_ninja`` finds in its
    child, or in the child of a shell it runs)."""
    cmd = repr([sys.executable, "-c", _PROBE])
    if through_shell:    # (ninja runs `/bin/sh -c "$cmd"`; `true;` keeps the shell there)
        cmd = repr(["/bin/sh", "-c", 'true; "$0" -c "$1"', sys.executable, _PROBE])
    script = (f"import ctypes, os, subprocess; ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0); "
              f"print(os.getpid()); print(subprocess.run({cmd}, capture_output=True, "
              "text=True).stdout, end='')")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return int(out[0]), eval(out[1])


def test_the_ninja_above_is_found_through_a_shell_and_only_there():
    for shell in (False, True):
        pid, found = _under("ninja", shell)
        assert found is not None and found[0] == pid and found[1] > 0, shell
    # a parent of another name (scons, a terminal): none
    assert _under("scons")[1] is None
    assert _under("scons", True)[1] is None


def test_the_runner_of_a_step_is_its_shells_parent_whatever_its_name_but_a_shell():
    """The lock step holds the build folder for the parent of its step's
    shell, ``$PPID`` (``protocol.runner_of``): any program but a shell,
    which means a step's command run by hand."""
    for name in ("ninja", "ninja-build", "samu", "my-builder"):
        named = (f"import ctypes, sys; ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0); "
                 "print(flush=True); sys.stdin.read()")
        child = subprocess.Popen([sys.executable, "-c", named], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
        try:
            child.stdout.readline()
            assert scope.runner_of(child.pid) == (child.pid, scope.proc_stat(child.pid)[2])
        finally:
            child.communicate(b"")
        assert scope.runner_of(child.pid) is None                 # (gone)
    shell = subprocess.Popen(["/bin/sh", "-c", "read x"], stdin=subprocess.PIPE)
    try:
        assert scope.runner_of(shell.pid) is None
    finally:
        shell.communicate(b"\n")
    for name in ("ninja-build", "samu"):
        pid, found = _under(name, True)
        assert found is not None and found[0] == pid, name


def test_proc_stat_reads_a_name_with_spaces_and_parentheses():
    child = subprocess.Popen([sys.executable, "-c",
                              "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'a (b) c)', 0, 0, 0); "
                              "print(flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdout.readline()             # (named)
        comm, parent, start = scope.proc_stat(child.pid)
        assert comm == "a (b) c)" and parent == os.getpid() and start > 0
    finally:
        child.communicate(b"")
    assert scope.proc_stat(child.pid) is None       # gone


def test_the_server_name_carries_user_served_process_and_version():
    name = scope.server_name((1234, 5678), "print")
    assert name.startswith(b"\0gpsimd-emu/%d/1234.5678/" % os.getuid())
    assert name != scope.server_name((1234, 5678), "print2")
    assert name != scope.server_name((1234, 5679), "print")
    assert len(name) < 108                              # sun_path
    # the key: the interpreter, its PYTHON* variables, the directory, the model's files
    key = scope.server_key(sys.executable, {"PYTHONPATH": "/p", "HOME": "/h"}, "/d")
    assert key.startswith(f"{sys.executable}\n[('PYTHONPATH', '/p')]\n/d\n")
    assert "gpsimd_emu/client/served.py:" in key and "gpsimd_device/plan.py:" in key
    assert "gpsimd_emu/server.py:" in key and "gpsimd_emu/zygote.c:" in key
    for other in (("/usr/bin/python9", {"PYTHONPATH": "/p"}, "/d"),
                  (sys.executable, {"PYTHONPATH": "/q"}, "/d"),
                  (sys.executable, {"PYTHONPATH": "/p", "PYTHONOPTIMIZE": "1"}, "/d"),
                  (sys.executable, {"PYTHONPATH": "/p"}, "/e")):
        assert scope.server_key(*other) != key


def test_messages_round_trip_and_garbage_is_no_message():
    message = {"argv": ["run", "p.json"], "cwd": "/x", "env": {"A": "1"}, "files": "f"}
    assert scope.decode(scope.encode(message)) == message
    for junk in (b"", b"\x00\x01garbage", scope.encode(["not", "a", "dict"])):
        assert scope.decode(junk) is None


def test_peer_uid_is_the_other_ends_user():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        assert scope.peer(a)[1] == os.getuid()


def test_not_under_ninja_or_turned_off_the_command_runs_itself(tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setenv(handoff.LOG_ENV, str(log))
    assert handoff.run_step(["run", "plan.json"]) is None      # (pytest is not ninja)
    assert not log.exists()
    monkeypatch.setattr(handoff, "find_ninja", lambda: (os.getpid(), 1))
    monkeypatch.setenv(handoff.SERVER_ENV, "0")
    assert handoff.run_step(["run", "plan.json"]) is None
    assert log.read_text() == "here: turned off ($GPSIMD_EMU_SERVER=0)\n"
    assert handoff.run_step(["--help"]) is None                 # not a run
    # no server, none started: nothing run, nothing left
    monkeypatch.delenv(handoff.SERVER_ENV)
    log.unlink()
    assert handoff.hand_off(["run", "p.json"], (os.getpid(), 1), sys.executable,
                            dict(os.environ)) is None
    assert log.read_text() == "here: no server\n"


def test_a_server_for_a_process_that_is_gone_is_not_started(tmp_path):
    """The server checks the served process's start time once its pidfd
    holds it: a pid used again is another process, nothing to serve."""
    me = scope.this_process()
    name = handoff.name_for((me[0], me[1] + 1), sys.executable, dict(os.environ))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))
    assert handoff.start_server(name, sys.executable, env, False) is False
    bad = subprocess.run([sys.executable, "-m", "gpsimd_emu.server", f"gpsimd-emu/{os.getuid()}/9.9/x",
                          "1", "2"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage: python -m gpsimd_emu.server")


def test_the_model_files_cover_the_headers_the_model_reads():
    """One fact, one place: the client finds the device headers where
    gpsimd_device.headers does (without importing it)."""
    from gpsimd_device import headers
    assert scope.include_dir() == headers.INCLUDE_DIR
    text = scope.model_files()
    for name in ("abi.h", "dtypes.h", "faults.h", "zygote.h"):
        assert f"gpsimd_host/{name}:" in text


def test_prestart_not_under_ninja_or_turned_off_only_writes_its_stamp(tmp_path, monkeypatch,
                                                                      capsys):
    log = tmp_path / "log"
    monkeypatch.setenv(handoff.LOG_ENV, str(log))
    stamp = tmp_path / "stamp"
    stamp.write_text("left by an older step")
    os.utime(stamp, (1, 1))
    assert handoff.prestart_step(["prestart", str(stamp)]) == 0      # (pytest is not ninja)
    assert stamp.read_bytes() == b"" and stamp.stat().st_mtime > 1
    assert not log.exists()
    started = []
    monkeypatch.setattr(handoff, "find_ninja", lambda: (os.getpid(), 1))
    monkeypatch.setattr(handoff, "start_server", lambda *a: started.append(a) and False)
    monkeypatch.setenv(handoff.SERVER_ENV, "0")
    os.utime(stamp, (1, 1))
    assert handoff.prestart_step(["prestart", str(stamp)]) == 0
    assert stamp.stat().st_mtime > 1 and started == [] and not log.exists()
    monkeypatch.delenv(handoff.SERVER_ENV)
    assert handoff.prestart_step(["prestart", str(stamp)]) == 0       # no server yet: started
    assert len(started) == 1 and started[0][3] is True          # (load)
    assert log.read_text() == "prestart: a server is being started\n"   # (the stub said no)
    capsys.readouterr()
    assert handoff.prestart_step(["prestart"]) == 2
    assert capsys.readouterr().err == "usage: python -m gpsimd_emu prestart STAMP\n"
    # (a stamp that cannot be written fails no step: no test relies on it)
    missing = tmp_path / "no" / "stamp"
    assert handoff.prestart_step(["prestart", str(missing)]) == 0
    assert capsys.readouterr().err == (f"gpsimd_emu prestart: warning: cannot write {missing}: "
                                       "No such file or directory\n")
    (tmp_path / "dir").mkdir()
    assert handoff.prestart_step(["prestart", str(tmp_path / "dir")]) == 0
    assert capsys.readouterr().err.endswith(": Is a directory\n")
