"""A ninja build's emulator server (``gpsimd_emu.server``, through
``gpsimd_emu.client.served``): a test step's run handed to it gives the
command's output, results and exit status; it is started idle by the
first step, loads the model only when a second one comes (or at once,
started by the prestart step, and then the first test step is served),
forwards Ctrl-C, and ends with its ninja process, ``kill -9`` included.

The steps run under ``FakeNinja``, a process named ``ninja`` that runs
the commands it is sent, one at a time, as ninja runs a step (the real
ninja: ``test_ninja.py``)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from test_emu_containment import _left_over, _ours, _plan_with, hostile  # noqa: F401

_FAKE_NINJA = r'''
import ctypes, json, subprocess, sys
ctypes.CDLL(None).prctl(15, b"ninja", 0, 0, 0)
for line in sys.stdin:
    req = json.loads(line)
    p = subprocess.Popen(req["cmd"], cwd=req["cwd"], env=req["env"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    print(json.dumps({"pid": p.pid}), flush=True)
    out, err = p.communicate()
    print(json.dumps({"rc": p.returncode, "out": out, "err": err}), flush=True)
'''


class FakeNinja:
    """A process named ``ninja`` running the commands sent to it."""

    def __init__(self, tmp_path):
        script = tmp_path / "fake_ninja.py"
        script.write_text(_FAKE_NINJA)
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def start(self, cmd, cwd, env) -> int:
        """Start ``cmd``; the pid of its process."""
        self.proc.stdin.write(json.dumps({"cmd": cmd, "cwd": str(cwd), "env": env}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["pid"]

    def result(self) -> dict:
        """{"rc", "out", "err"} of the command started last."""
        return json.loads(self.proc.stdout.readline())

    def run(self, cmd, cwd, env) -> dict:
        self.start(cmd, cwd, env)
        return self.result()

    def servers(self):
        """Pids of the live servers scoped to this ninja."""
        return _servers(self.proc.pid)

    def wait_servers(self, n, wait=10.0):
        """The servers scoped to this ninja, once there are ``n``."""
        deadline = time.monotonic() + wait
        while True:
            found = self.servers()
            if len(found) >= n:
                return found
            assert time.monotonic() < deadline, found
            time.sleep(0.02)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def _listening_names():
    """{socket inode: abstract name} of the listening Unix sockets whose
    name is an emulator server's (``protocol.server_name``)."""
    names = {}
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            # (Flags 00010000: accepting connections)
            if len(fields) == 8 and fields[3] == "00010000" and \
                    fields[7].startswith("@gpsimd-emu/") and not fields[7].endswith("/start"):
                names[fields[6]] = fields[7]
    return names


def _servers(ninja_pid, cwd=None):
    """Live servers scoped to ``ninja_pid`` (or to any ninja, working in
    ``cwd``): the processes named ``gpsimd-server`` that hold a listening
    socket named for that ninja."""
    names = _listening_names()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if state == "Z" or name != "gpsimd-server":
                continue
            held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:
            continue
        scopes = [names[i].split("/")[2] for i in names if f"socket:[{i}]" in held]
        if not scopes:
            continue
        if ninja_pid is not None:
            if scopes[0].split(".")[0] != str(ninja_pid):
                continue
        elif _cwd(pid) != cwd:
            continue
        found.append(int(pid))
    return found


def _gone(pids, wait=5.0):
    """Wait until none of ``pids`` is alive (zombies count as gone); the
    ones left."""
    deadline = time.monotonic() + wait
    while True:
        left = [p for p in pids if os.path.exists(f"/proc/{p}") and not _zombie(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def _cwd(pid):
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _log_lines(log):
    return log.read_text().splitlines() if log.exists() else []


def _env(log, runtime_model=ROOT / "runtime_model", **more):
    env = dict(os.environ, PYTHONPATH=str(runtime_model), GPSIMD_EMU_SERVER_LOG=str(log))
    env.pop("GPSIMD_EMU_SERVER", None)
    env.update(more)
    return env


def _cmd(*args):
    return [sys.executable, "-m", "gpsimd_emu", "run", *args]


def _warm(ninja, cwd, env, log, timeout=60.0):
    """Send cheap runs until one is served (the server loaded the model)."""
    deadline = time.monotonic() + timeout
    while not any(line.startswith("served") for line in _log_lines(log)):
        assert time.monotonic() < deadline, _log_lines(log)
        assert ninja.run(_cmd("missing.json", "--results", "none.json"), cwd, env)["rc"] == 2
        time.sleep(0.05)


def test_a_served_run_is_the_command_and_the_server_ends_with_ninja(built_project, tmp_path):
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    env = _env(log)
    results = tmp_path / "r.json"
    plan = "build/host/elementwise/testplan.json"
    cases = {
        "pass": (_cmd(plan, "--results", str(results), "--locations",
                      "build/host/elementwise/locations.json"), 0),
        "fail": (_cmd(plan, "--results", str(results), "--memory", "4K"), 1),
        "no plan": (_cmd("missing.json", "--results", str(results)), 2),
    }
    ninja = FakeNinja(tmp_path)
    try:
        first = ninja.run(_cmd("missing.json", "--results", "none.json"), proj, env)
        assert first["rc"] == 2 and "missing.json" in first["err"]
        assert _log_lines(log) == ["here: no server yet; started one"]
        _warm(ninja, proj, env, log)
        servers = ninja.servers()
        assert len(servers) == 1
        for name, (cmd, rc) in cases.items():
            results.unlink(missing_ok=True)
            alone = ninja.run(cmd, proj, dict(env, GPSIMD_EMU_SERVER="0"))
            assert _log_lines(log)[-1] == "here: turned off ($GPSIMD_EMU_SERVER=0)"
            alone_results = results.read_bytes() if results.exists() else None
            results.unlink(missing_ok=True)
            served = ninja.run(cmd, proj, env)
            assert _log_lines(log)[-1].startswith("served pid="), name
            assert served == alone and served["rc"] == rc, (name, served, alone)
            assert (results.read_bytes() if results.exists() else None) == alone_results, name
        assert "PASS elementwise::" in served["out"] or name == "no plan"
        assert ninja.servers() == servers
    finally:
        ninja.close()
    assert _gone(servers) == []


def test_a_lone_step_leaves_an_idle_server_that_never_loads_the_model(built_project, tmp_path):
    """The edit loop (one test step per ninja run) pays for no model load."""
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    ninja = FakeNinja(tmp_path)
    try:
        got = ninja.run(_cmd("build/host/relu/testplan.shaped.json", "--results",
                             str(tmp_path / "r.json")), proj, _env(log))
        assert got["rc"] == 0 and "relu: 10 passed, 0 failed" in got["out"]
        (server,) = ninja.wait_servers(1)
        time.sleep(0.5)
        with open(f"/proc/{server}/maps") as f:
            assert "numpy" not in f.read()
    finally:
        ninja.close()
    assert _gone([server]) == []


def test_another_version_of_the_model_gets_its_own_server(built_project, tmp_path):
    proj, _ = built_project
    model = tmp_path / "runtime_model"
    shutil.copytree(ROOT / "runtime_model", model,
                    ignore=shutil.ignore_patterns("__pycache__"))
    log = tmp_path / "handoff.log"
    env = _env(log, model)
    ninja = FakeNinja(tmp_path)
    try:
        _warm(ninja, proj, env, log)
        old = ninja.servers()
        settings = model / "gpsimd_emu" / "settings.py"
        settings.write_text(settings.read_text() + "\n")        # edited during the build
        got = ninja.run(_cmd("missing.json", "--results", "none.json"), proj, env)
        assert got["rc"] == 2
        assert _log_lines(log)[-1] == "here: no server yet; started one"
        both = ninja.wait_servers(2)
        # a device header the model reads at import, edited: another again
        abi = model / "include" / "gpsimd_host" / "abi.h"
        abi.write_text(abi.read_text() + "\n")
        ninja.run(_cmd("missing.json", "--results", "none.json"), proj, env)
        assert _log_lines(log)[-1] == "here: no server yet; started one"
        every = ninja.wait_servers(3)
    finally:
        ninja.close()
    assert set(old) < set(both) < set(every) and _gone(every) == []


def _served_spinner(hostile, tmp_path):  # noqa: F811
    """A ninja with a warm server and a served run spinning in a kernel:
    (ninja, the step's pid, the server's pids, processes before)."""
    proj, path = hostile
    log = tmp_path / "handoff.log"
    env = _env(log)
    plan = _plan_with(proj, path, {"fork_sleeper"}, tmp_path)
    ninja = FakeNinja(tmp_path)
    _warm(ninja, proj, env, log)
    before = _ours()
    step = ninja.start(_cmd(str(plan), "--results", str(tmp_path / "r.json"), "--timeout",
                            "60", "--zygote", str(proj / "build/host/emu/gpsimd-zygote")),
                       proj, env)
    deadline = time.monotonic() + 30
    while not {"gpsimd-spinner", "gpsimd-sleeper"} <= set(_ours().values()):
        assert time.monotonic() < deadline, "the kernel never started"
        time.sleep(0.02)
    assert _log_lines(log)[-1].startswith("served pid=")
    return ninja, step, ninja.servers(), before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_step_stops_its_served_run_as_the_command(hostile, tmp_path,  # noqa: F811
                                                                   sig):
    ninja, step, servers, before = _served_spinner(hostile, tmp_path)
    try:
        start = time.monotonic()
        os.kill(step, sig)
        got = ninja.result()
        assert got["rc"] == -sig, got          # ended by the same signal, as the command
        assert time.monotonic() - start < 10
        assert _left_over(before) == {}
        assert not (tmp_path / "r.json").exists()
        assert ninja.servers() == servers      # the server lives on for the next steps
    finally:
        ninja.close()
    assert _gone(servers) == []


def test_kill_9_of_ninja_ends_the_server_and_its_runs(hostile, tmp_path):  # noqa: F811
    ninja, step, servers, before = _served_spinner(hostile, tmp_path)
    ninja.proc.kill()
    ninja.proc.wait()
    assert _gone(servers) == []
    assert _gone([step]) == []                 # the step's run ended: the step did too
    assert _left_over(before) == {}


def test_a_stopped_server_fails_the_step_with_a_message_and_never_hangs_it(built_project,
                                                                          tmp_path):
    """A server that does not answer (stopped, or a process of the same
    user holding its name): the step says so and fails after
    FIRST_REPLY_TIMEOUT, or ends at once on a signal; the request it gave
    up on is never run when the server goes on."""
    from gpsimd_emu.client.served import FIRST_REPLY_TIMEOUT
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    env = _env(log)
    results = tmp_path / "r.json"
    cmd = _cmd("build/host/relu/testplan.shaped.json", "--results", str(results))
    ninja = FakeNinja(tmp_path)
    try:
        _warm(ninja, proj, env, log)
        (server,) = ninja.servers()
        os.kill(server, signal.SIGSTOP)
        try:
            start = time.monotonic()
            got = ninja.run(cmd, proj, env)
            took = time.monotonic() - start
            assert got["rc"] == 1 and got["out"] == "", got
            assert f"gpsimd_emu: the emulator server of this build (pid {server}) did not " \
                   f"answer within {FIRST_REPLY_TIMEOUT:g} s; nothing was run" in got["err"]
            assert FIRST_REPLY_TIMEOUT <= took < FIRST_REPLY_TIMEOUT + 5
            step = ninja.start(cmd, proj, env)            # Ctrl-C while it waits: ends at once
            time.sleep(0.5)
            start = time.monotonic()
            os.kill(step, signal.SIGINT)
            assert ninja.result()["rc"] == -signal.SIGINT
            assert time.monotonic() - start < 2
        finally:
            os.kill(server, signal.SIGCONT)
        time.sleep(1.0)
        assert not results.exists()                        # neither request was run
        got = ninja.run(cmd, proj, env)                    # and it serves the next step
        assert got["rc"] == 0 and "relu: 10 passed, 0 failed" in got["out"]
        assert _log_lines(log)[-1].startswith("served pid=")
    finally:
        ninja.close()
    assert _gone([server]) == []


def test_a_server_stopped_during_a_run_does_not_hang_its_step(hostile, tmp_path):  # noqa: F811
    ninja, step, servers, before = _served_spinner(hostile, tmp_path)
    try:
        os.kill(servers[0], signal.SIGSTOP)
        try:
            os.kill(step, signal.SIGINT)                  # forwarded: the run ends
            got = ninja.result()
            assert got["rc"] == 1, got
            assert "the emulator server of this build ended, or stopped answering, " \
                   "during the run" in got["err"]
        finally:
            os.kill(servers[0], signal.SIGCONT)
    finally:
        ninja.close()
    assert _gone(servers) == []
    assert _left_over(before) == {}


def test_the_step_umask_reaches_its_served_run(built_project, tmp_path):
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    env = _env(log)
    ninja = FakeNinja(tmp_path)
    modes = {}
    try:
        _warm(ninja, proj, env, log)
        for server in ("0", "1"):
            results = tmp_path / f"r{server}.json"
            cmd = ["/bin/sh", "-c", 'umask 077; exec "$@"', "sh",
                   *_cmd("build/host/relu/testplan.shaped.json", "--results", str(results))]
            assert ninja.run(cmd, proj, dict(env, GPSIMD_EMU_SERVER=server))["rc"] == 0
            modes[server] = results.stat().st_mode & 0o777
        assert _log_lines(log)[-1].startswith("served pid=")
    finally:
        ninja.close()
    assert modes == {"0": 0o600, "1": 0o600}


def _maps_numpy(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "numpy" in f.read()
    except OSError:
        return False


def test_the_prestart_step_loads_the_model_and_the_first_step_is_served(built_project,
                                                                       tmp_path):
    """``python -m gpsimd_emu prestart STAMP`` (the ninja path's step
    before the test steps): writes the empty STAMP, starts the server
    loading the model with no test step asking, and the first test step
    is served, with the command's output, results and status."""
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    env = _env(log)
    stamp = tmp_path / "stamp"
    stamp.write_text("old")
    results = tmp_path / "r.json"
    cmd = _cmd("build/host/relu/testplan.shaped.json", "--results", str(results))
    alone = subprocess.run(cmd, cwd=proj, env=dict(env, GPSIMD_EMU_SERVER="0"),
                           capture_output=True, text=True)
    alone_results = results.read_bytes()
    results.unlink()
    ninja = FakeNinja(tmp_path)
    try:
        got = ninja.run([sys.executable, "-m", "gpsimd_emu", "prestart", str(stamp)], proj, env)
        assert got == {"rc": 0, "out": "", "err": ""}
        assert stamp.read_bytes() == b""
        assert _log_lines(log) == ["prestart: started a server"]
        (server,) = ninja.wait_servers(1)
        # in ninja's session (its scheduler autogroup) but not in its process group
        assert os.getsid(server) == os.getsid(ninja.proc.pid)
        assert os.getpgid(server) not in (os.getpgid(ninja.proc.pid), os.getpgid(0))
        if os.path.exists(f"/proc/{server}/autogroup"):
            with open(f"/proc/{server}/autogroup") as a, \
                    open(f"/proc/{ninja.proc.pid}/autogroup") as b:
                # empty when the task's group is a cgroup's, not an
                # autogroup (the kernel prints nothing then, as in CI)
                assert a.read().split()[:1] == b.read().split()[:1]
        deadline = time.monotonic() + 30
        while not _maps_numpy(server):           # loading, with no step asking
            assert time.monotonic() < deadline
            time.sleep(0.02)
        served = ninja.run(cmd, proj, env)
        assert _log_lines(log)[1:] == [l for l in _log_lines(log)[1:] if l.startswith("served")]
        assert len(_log_lines(log)) == 2 and _log_lines(log)[1].startswith("served pid=")
        assert served == {"rc": alone.returncode, "out": alone.stdout, "err": alone.stderr}
        assert served["rc"] == 0 and results.read_bytes() == alone_results
        # a second prestart in the same ninja run asks the server that runs
        assert ninja.run([sys.executable, "-m", "gpsimd_emu", "prestart", str(stamp)], proj,
                         env)["rc"] == 0
        assert _log_lines(log)[-1] == "prestart: asked the server to load the model"
        assert ninja.servers() == [server]
    finally:
        ninja.close()
    assert _gone([server]) == []


def test_a_step_that_comes_while_the_model_loads_waits_and_is_served(built_project, tmp_path):
    """The second step of a ninja run with no prestart step makes the idle
    server load the model: it waits for that (no second interpreter and
    numpy started beside the loading one) and is served."""
    proj, _ = built_project
    log = tmp_path / "handoff.log"
    env = _env(log)
    cmd = _cmd("build/host/relu/testplan.shaped.json", "--results", str(tmp_path / "r.json"))
    ninja = FakeNinja(tmp_path)
    try:
        assert ninja.run(cmd, proj, env)["rc"] == 0
        (server,) = ninja.wait_servers(1)
        assert not _maps_numpy(server)
        got = ninja.run(cmd, proj, env)
        assert got["rc"] == 0 and "relu: 10 passed, 0 failed" in got["out"]
        assert _log_lines(log)[0] == "here: no server yet; started one"
        assert _log_lines(log)[1].startswith("served pid="), _log_lines(log)
    finally:
        ninja.close()
    assert _gone([server]) == []


# A NinjaServer of the test's own, on the abstract socket argv[1], its
# ninja the test process (after what a script sets up; START: it loads at once).
_SERVE = r'''
listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(b"\0" + sys.argv[1].encode())
listener.listen(8)
import json
from gpsimd_emu.client import protocol
files = protocol.model_files()
srv = server.Server(listener, os.pidfd_open(os.getppid()), os.getppid(), files)
if START:
    srv.start_loading()
print(json.dumps(files), flush=True)       # (listening)
try:
    srv.serve()
finally:
    srv.stop()
'''

_SLOW_SERVER = r'''
import os, socket, sys, time
from gpsimd_emu import server
server.LOAD_WAIT = float(sys.argv[2])
server._preload = lambda: time.sleep(float(sys.argv[3]))      # a load that takes long
START = False
''' + _SERVE


def test_a_waiting_request_is_answered_here_after_load_wait_and_dropped_when_gone(tmp_path):
    """While the model loads, requests wait: one still waiting after
    LOAD_WAIT is answered ``here`` (its step runs itself), one whose step
    is gone is dropped (never run), and one that is still there when the
    load ends is served."""
    from gpsimd_emu.client import protocol as scope
    name = f"gpsimd-test/{os.getpid()}/{time.monotonic_ns()}"
    env = _env(tmp_path / "log")
    srv = subprocess.Popen([sys.executable, "-c", _SLOW_SERVER, name, "1.0", "1.8"], env=env,
                           stdout=subprocess.PIPE, text=True)
    clients = []
    try:
        files = json.loads(srv.stdout.readline())

        def request(results):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(b"\0" + name.encode())
            r, w = os.pipe()
            message = scope.encode({"argv": ["run", "missing.json", "--results", str(results)],
                                    "cwd": str(tmp_path), "env": env, "umask": 0o022,
                                    "files": files})
            socket.send_fds(sock, [message], [w, w])
            os.close(w)
            clients.append((sock, r))
            return sock, r

        start = time.monotonic()
        late, late_out = request(tmp_path / "late.json")
        assert scope.decode(late.recv(4096)) == {"here": "the server is still loading the model"}
        assert 0.9 < time.monotonic() - start < 2.0
        time.sleep(0.3)
        gone, gone_out = request(tmp_path / "gone.json")
        kept, kept_out = request(tmp_path / "kept.json")
        time.sleep(0.3)
        gone.close()                            # the step gave up while it waited
        first = scope.decode(kept.recv(4096))   # the load ended (1.8 s): served
        assert set(first) == {"pid"}
        assert 1.7 < time.monotonic() - start < 4.0     # (after the load, never "here")
        status = scope.decode(kept.recv(4096))["status"]
        assert os.waitstatus_to_exitcode(status) == 2
        assert b"missing.json" in os.read(kept_out, 1 << 16)
        time.sleep(0.5)
        assert os.read(gone_out, 1 << 16) == b""    # never run: its pipe closed, nothing written
        assert os.read(late_out, 1 << 16) == b""
    finally:
        for sock, r in clients:
            sock.close()
            os.close(r)
        srv.terminate()
        srv.wait(timeout=10)


_EDITING_SERVER = r'''
import os, pathlib, socket, sys, time
from gpsimd_emu import server
settings = pathlib.Path(server.__file__).with_name("settings.py")
def load():                              # a model file edited while the model loads
    time.sleep(0.3)
    settings.write_text(settings.read_text() + "\n")
server._preload = load
START = True
''' + _SERVE


def test_a_server_whose_model_changed_while_it_loaded_serves_no_step(tmp_path):
    """What it imported may be either version: every step is answered
    ``here`` (and runs its own vectors), the one waiting too."""
    from gpsimd_emu.client import protocol as scope
    model = tmp_path / "runtime_model"
    shutil.copytree(ROOT / "runtime_model", model,
                    ignore=shutil.ignore_patterns("__pycache__"))
    name = f"gpsimd-test/{os.getpid()}/{time.monotonic_ns()}"
    env = _env(tmp_path / "log", model)
    srv = subprocess.Popen([sys.executable, "-c", _EDITING_SERVER, name], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        files = json.loads(srv.stdout.readline())
        for _ in range(2):                 # (while it loads, and after)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(b"\0" + name.encode())
            r, w = os.pipe()
            socket.send_fds(sock, [scope.encode({"argv": ["run", "x.json"], "cwd": "/",
                                                 "env": env, "files": files})],
                            [w, w])
            os.close(w)
            sock.settimeout(10)
            assert scope.decode(sock.recv(4096)) == {
                "here": "the model changed while the server loaded it"}
            assert os.read(r, 100) == b""      # nothing was run
            sock.close()
            os.close(r)
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def test_a_name_whose_queue_is_full_is_no_server_and_never_a_wait():
    """Another user who binds a server's name first and never accepts fills
    its queue: the client's connect fails at once (the caller runs the
    command itself), where a blocking connect waited as long as they held
    the name."""
    import threading
    from gpsimd_emu.client import served
    name = b"\0gpsimd-test-squat-" + os.urandom(8).hex().encode()
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    squatter.bind(name)
    squatter.listen(0)
    queued = []
    try:
        while True:                 # (fill its queue, as their clients would)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.setblocking(False)
            try:
                s.connect(name)
            except BlockingIOError:
                s.close()
                break
            queued.append(s)
        got = []
        t = threading.Thread(target=lambda: got.append(served._connect(name)), daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "connect waited on a full queue"
        assert got == [None]
    finally:
        for s in queued + [squatter]:
            s.close()
