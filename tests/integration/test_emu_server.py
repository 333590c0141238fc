"""The build's emulator server (``gpsimd_emu.server``, through the
client ``gpsimd_emu.client.served``, as ``gpsimd_tool/emu_server.py``
uses it): the same results, lines and signatures as the ``python -m
gpsimd_emu run`` command it replaces, and a lifetime exactly that of the
build. (Stopping it with signals and ``kill -9``:
``test_emu_containment.py``.)"""
import json
import os
import socket
import subprocess
import sys
import time

from conftest import ROOT, action_lines, copy_built, run_scons
from test_emu_handoff import _gone

sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))

from gpsimd_tool import emu_server  # noqa: E402

from gpsimd_emu.client import protocol, served  # noqa: E402


def _results(proj):
    return {p.parent.name: p.read_bytes()
            for p in sorted((proj / "build" / "host").glob("*/test-results.json"))}


def _lines(stdout):
    return sorted(line for line in stdout.splitlines() if line.startswith(("PASS", "FAIL")))


def _descendants(pid):
    """{pid: name} of every live descendant of ``pid`` (Linux ``/proc``)."""
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            try:
                with open(f"/proc/{kid}/comm") as f:
                    found[kid] = f.read().strip()
            except OSError:
                continue
            todo.append(kid)
    return found


def test_the_server_gives_the_commands_results_lines_and_signatures(built_project, tmp_path):
    # the shared build ran its tests through the server (the default);
    # its copy runs them again without it
    proj = copy_built(built_project[0], tmp_path / "proj")
    with_server = built_project[1]
    first = _results(proj)
    assert len(first) == 8 and json.loads(first["spmd"])["passed"] == 16
    for p in (proj / "build" / "host").glob("*/test-results.json"):
        p.unlink()
    without = run_scons(proj, "EMU_SERVER=0", check=True)
    assert _results(proj) == first
    assert _lines(with_server.stdout) == _lines(without.stdout)
    assert len(_lines(with_server.stdout)) == 104
    tests = sorted(t for k, t in action_lines(with_server.stdout) if k == "TEST")
    assert tests == sorted(t for k, t in action_lines(without.stdout) if k == "TEST")
    assert len(tests) == 8
    # the switch changes no command line: only the tests whose results were
    # removed ran without the server, and nothing runs when it is back on
    assert {k for k, _ in action_lines(without.stdout) if k not in ("PASS", "FAIL")} == \
        {"TEST"}, without.stdout
    again = run_scons(proj, "EMU_SERVER=1", check=True)
    assert action_lines(again.stdout) == [], again.stdout


def _served_by(pid):
    """(name, parent's name, parent's pid) of process ``pid``, once it has
    named itself (a forked run does so first thing)."""
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/{pid}/comm") as f:
            name = f.read().strip()
        if name != "gpsimd-server" or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{ppid}/comm") as f:
        return name, f.read().strip(), ppid


def test_a_run_is_forked_by_the_server_which_ends_with_the_build(built_project, tmp_path):
    proj, _ = built_project
    # as the tool passes it: no locale variable, so that the server's
    # Python adds LC_CTYPE to its own environment (PEP 538) at start-up
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT / "runtime_model")
    seen = []

    def started(pid):
        try:
            seen.append(_served_by(pid))
        except FileNotFoundError:          # (a run that ended at once: a plan not there)
            seen.append(("ended", None, None))

    results = tmp_path / "r.json"
    args = [sys.executable, "-m", "gpsimd_emu", "run", "build/host/elementwise/testplan.json",
            "--results", str(results), "--locations", "build/host/elementwise/locations.json",
            "--quiet"]
    cwd = os.getcwd()
    os.chdir(proj)
    try:
        status = emu_server.run(args, env, started)
        assert status == 0
        assert results.read_bytes() == (proj / "build/host/elementwise/test-results.json").read_bytes()
        # the run was the server's child, and the server no one's but init's
        (name, parent, server), = seen
        assert (name, parent) == ("gpsimd-run", "gpsimd-server")
        assert server not in _descendants(os.getpid())
        # a bad plan: the command's own error and exit status
        assert emu_server.run(args[:4] + ["missing.json", "--results", str(results)], env,
                              started) == 2
        # another PYTHONPATH is another server's, never this one's: served
        # by a second server where the model is importable without it (an
        # installed package), else left to the shell (nothing started)
        before = len(seen)
        status = emu_server.run(args, dict(env, PYTHONPATH="/elsewhere"), started)
        elsewhere = seen[before:]
        assert (status, len(elsewhere)) in ((0, 1), (None, 0)), (status, elsewhere)
        assert all(parent != server for _, _, parent in elsewhere)
        del seen[before:]
        # another environment with this PYTHONPATH: a run forked for it, the
        # same results
        results.unlink()
        assert emu_server.run(args, dict(env, GPSIMD_TEST_EXTRA="1"), started) == 0
        assert results.read_bytes() == (proj / "build/host/elementwise/test-results.json").read_bytes()
        assert {s[2] for s in seen if s[2]} == {server}
        # between runs, nothing of a run is left under the server
        assert _descendants(server) == {}
        # a request the server cannot read is answered, and the server lives on
        name = served.name_for(protocol.this_process(), sys.executable, env)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(name)
        socket.send_fds(sock, [b"{not marshal"], [1, 2])
        assert protocol.decode(sock.recv(4096)) == {"here": "not a message"}
        sock.close()
        # only the served process stops it: another's stop is not obeyed
        stopper = subprocess.run([sys.executable, "-c", _STOP, name.hex()], env=env)
        assert stopper.returncode == 0
        assert emu_server.run(args, env, started) == 0
    finally:
        os.chdir(cwd)
        emu_server.close()
    assert _gone([server], wait=0) == []   # (close waited for its exit)
    # closed for good: every later run is left to the shell
    assert emu_server.run(args, env, started) is None


_STOP = """
import socket, sys
from gpsimd_emu.client import protocol
sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock.connect(bytes.fromhex(sys.argv[1]))
sock.send(protocol.encode({"stop": True}))
sock.settimeout(5)
assert sock.recv(10) == b""     # (closed: the message was taken)
"""


def test_references_see_the_same_blas_threads_with_and_without_the_server(built_project,
                                                                         tmp_path):
    """A test run's references use one BLAS thread unless the user set one
    of the variables, which then reaches them (SConstruct's PASSED_ENV), the
    same through the server as through the command."""
    proj = copy_built(built_project[0], tmp_path / "proj")
    ref = proj / "kernels/relu/reference.py"
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    seen = {}
    for given in ({}, {"OMP_NUM_THREADS": "3"}):
        for server in ("0", "1"):
            # a new reference each time: the tests run again
            tag = f"{sorted(given.items())}-{server}"
            ref.write_text(ref.read_text().split("# blas probe")[0] + (
                f"# blas probe {tag}\n"
                "import json as _json, os as _os\n"
                "with open('blas-seen.json', 'w') as _f:\n"
                f"    _json.dump({{k: _os.environ.get(k) for k in {names!r}}}, _f)\n"))
            env = dict.fromkeys(names)
            env.update(given)
            run_scons(proj, "-Q", "relu", f"EMU_SERVER={server}", env=env, check=True)
            seen[tag] = json.loads((proj / "blas-seen.json").read_text())
    one = dict.fromkeys(names, "1")
    user = {"OPENBLAS_NUM_THREADS": None, "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": None}
    assert seen == {"[]-0": one, "[]-1": one,
                    "[('OMP_NUM_THREADS', '3')]-0": user, "[('OMP_NUM_THREADS', '3')]-1": user}


def test_a_server_run_reads_its_environment_and_says_a_bad_plan_once(built_project, capfd,
                                                                      monkeypatch, tmp_path):
    """The server makes the command's argument parser once, before any
    request: ``$GPSIMD_EMU_QUIET`` is still the request's; and a run says
    why a plan cannot be read once, as the command does."""
    proj = copy_built(built_project[0], tmp_path / "p")     # (it writes its results there)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT / "runtime_model")
    plan = "build/host/elementwise/testplan.json"
    args = [sys.executable, "-m", "gpsimd_emu", "run", plan, "--results", "r.json"]
    runs = []
    monkeypatch.setattr(emu_server, "_closed", False)   # (another test closed this process's)
    cwd = os.getcwd()
    os.chdir(proj)
    try:
        assert emu_server.run(args, env, runs.append) == 0
        loud = capfd.readouterr().out
        assert loud.count("PASS elementwise::") == 24 and "elementwise: 24 passed, 0 failed" in loud
        # another environment (a forked run), quiet: no line for a pass
        assert emu_server.run(args, dict(env, GPSIMD_EMU_QUIET="1"), runs.append) == 0
        assert capfd.readouterr().out == ""
        # the server's environment again, and a plan that is not there
        for name in ("r.json", "r.failed.json"):
            (proj / name).write_text("{}")
        status = emu_server.run(args[:4] + ["missing.json", "--results", "r.json",
                                            "--failed-results", "r.failed.json"],
                                env, runs.append)
        got = capfd.readouterr()
        assert len(runs) == 3
        assert status == 2 and got.out == ""
        assert got.err.count("gpsimd_emu: ") == 1 and "missing.json" in got.err, got.err
        # the results files were removed before the plan was read
        assert not (proj / "r.json").exists() and not (proj / "r.failed.json").exists()
    finally:
        os.chdir(cwd)
        emu_server.close()


def test_the_model_loads_at_the_priority_of_the_thread_that_answers(monkeypatch):
    """The thread that loads the model runs at the server's own priority.
    At a lower one, a loaded machine starves it while it holds the GIL, and
    the serving thread, which needs the GIL to answer a request, misses the
    client's first-reply deadline: a fresh clone's first build beside ten
    busy processes failed its test steps with 'did not answer within 10 s'."""
    import threading
    from gpsimd_emu import server
    seen = []
    monkeypatch.setattr(server, "_preload", lambda: seen.append(
        os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    srv = server.Server(None, -1, os.getpid(), "")
    try:
        srv.start_loading()
        srv._loader.join()
    finally:
        os.close(srv.wake_r)
        os.close(srv.wake_w)
    assert seen == [os.getpriority(os.PRIO_PROCESS, 0)]
