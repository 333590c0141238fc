"""Shared fixtures: a private copy of the project to run `scons` in.

Layout: ``tests/unit`` holds tests that need no compiler and take seconds;
``tests/integration`` those that run SCons, a compiler or the emulator on
built objects. Every integration test is marked ``slow`` here, so that
``pytest -m "not slow"`` answers in seconds; a unit test that starts
SCons, a compiler or a pytest run of its own is marked ``slow`` where it
is written.
"""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from gpsimd_emu.client.process import children

ROOT = pathlib.Path(__file__).resolve().parent.parent

try:    # (the test extra has it; explore's own searches set the same)
    from hypothesis import HealthCheck, settings as _hypothesis_settings
except ImportError:
    pass
else:
    # Hypothesis's deadline (200 ms an example) and its too-slow check
    # judge the machine, not the code: a test file's examples share two
    # CPUs with the other workers' builds
    _hypothesis_settings.register_profile("loaded-machine", deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
    _hypothesis_settings.load_profile("loaded-machine")
COPIED = ("SConstruct", "ops.yaml", "site_scons", "schema", "kernels", "runtime_model")


#: A file to write each skipped test to, one JSON line ``{"test", "reason"}``
#: (``.ci/run`` sets it, then ``.ci/check_skips.py`` fails on a skip whose
#: reason is not a documented one).
SKIPS_ENV = "GPSIMD_TEST_SKIPS"


def pytest_terminal_summary(terminalreporter):
    """Write the skipped tests to ``$GPSIMD_TEST_SKIPS`` when it is set (in
    the controlling process: under xdist the workers' reports come here)."""
    path = os.environ.get(SKIPS_ENV)
    if not path:
        return
    import json
    with open(path, "w", encoding="utf-8") as f:
        for report in terminalreporter.stats.get("skipped", []):
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            f.write(json.dumps({"test": report.nodeid, "reason": reason}) + "\n")


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (README's command): one worker more than this process
    may use CPUs. A worker spends about a third of its time waiting for
    its processes (time limits, servers, start-ups); on two CPUs a third
    worker fills that (BENCHMARKS.md: 5 min 29 s against 5 min 33 s to
    6 min 9 s with two)."""
    return len(os.sched_getaffinity(0)) + 1


def _stop(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _stop_workers(signum, frame):
    """The xdist controller's stop: SIGINT to its workers (its children),
    which stop their tests as a serial run does, then its own."""
    for pid in children(os.getpid()):
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass
    _stop(signum, frame)


def pytest_configure(config):
    """A stop signal stops the run: SIGINT even when the shell that started
    pytest in the background ignores it (Python then never installs its
    handler), and SIGTERM as SIGINT does, so that pytest unwinds and every
    fixture's teardown runs (``pytest_unconfigure`` then ends what is left).
    Under pytest-xdist, the controlling process passes the stop on to its
    workers at once (xdist itself would wait 10 s for them)."""
    controller = config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput")
    if controller:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _stop_workers)
    else:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _stop)
    _share_compiles(config)


#: Set to 0 to compile every unit of every test's build (no ccache).
SHARE_COMPILES_ENV = "GPSIMD_TEST_CCACHE"
#: The compilers the session's ccache stands in for.
_COMPILERS = ("g++", "gcc", "c++", "cc")
#: The ccache settings of the session and the folder of its links (set by
#: _share_compiles, taken off again by without_shared_compiles).
_CCACHE_SETTINGS = ("CCACHE_DIR", "CCACHE_NOHASHDIR", "CCACHE_BASEDIR")
_SHARED_BINDIR = []


def _share_compiles(config) -> None:
    """The tests build many copies of the same sources (each test its own
    project); with ccache installed, a compile of a unit already compiled
    in this session is served from a cache of the session's own (an empty
    folder removed at its end, so no run depends on an earlier one):
    symbolic links named as the compilers, to ccache, first on ``PATH``
    (ccache's documented masquerading use). The commands and outputs stay
    the same bytes (the build maps every path the compiler writes), so a
    test sees the same build; the launcher tests (campaigns) take the
    links off their ``PATH`` (:func:`without_shared_compiles`)."""
    ccache = shutil.which("ccache")
    if ccache is None or os.environ.get(SHARE_COMPILES_ENV) == "0":
        return
    if hasattr(config, "workerinput") and "CCACHE_DIR" in os.environ:
        # an xdist worker: the controlling process's cache, shared
        _SHARED_BINDIR[:] = [os.path.join(os.path.dirname(os.environ["CCACHE_DIR"]), "bin")]
        return
    top = tempfile.mkdtemp(prefix="gpsimd-tests-ccache-")
    bindir = os.path.join(top, "bin")
    os.mkdir(bindir)
    for name in _COMPILERS:
        if shutil.which(name):
            os.symlink(ccache, os.path.join(bindir, name))
    _SHARED_BINDIR[:] = [bindir]
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    os.environ.update(zip(_CCACHE_SETTINGS, (os.path.join(top, "cache"), "1",
                                             os.path.realpath(tempfile.gettempdir()))))
    config.add_cleanup(lambda: shutil.rmtree(top, ignore_errors=True))


def without_shared_compiles(env: dict) -> dict:
    """``env`` (an environment) without the session's ccache
    (:func:`_share_compiles`): its links off ``PATH``, its settings gone."""
    out = {k: v for k, v in env.items() if k not in _CCACHE_SETTINGS}
    out["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d not in _SHARED_BINDIR)
    return out


def processes_in(folder) -> list:
    """Pids of the live processes whose working directory is ``folder``
    (a test's own project: other tests' processes run beside it under
    xdist)."""
    where, out = os.path.realpath(folder), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == where:
                out.append(int(pid))
        except OSError:
            pass
    return out


def _descendants(pid: int) -> list:
    """Every live descendant of ``pid``, parents before children."""
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def pytest_unconfigure(config):
    """No process of a test outlives the run, however it ended (an
    interrupted test's servers and kernels included): every descendant of
    this process left is killed. (An emulator server is no one's child,
    but it ends with the build or ninja process it serves.)"""
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def pytest_collection_modifyitems(config, items):
    """Mark every test under tests/integration ``slow``."""
    integration = ROOT / "tests" / "integration"
    for item in items:
        if integration in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)


#: A kernel of an outside project's library (tests of toolpath=, the installed
#: package and the pytest plugin): out = -x, float32.
NEGATE_KERNEL = """\
#include <torch/torch.h>

torch::Tensor negate(const torch::Tensor& t) {
    const size_t n = t.numel();
    torch::Tensor out = torch::empty({n}, torch::kFloat);
    auto a = t.accessor<float, 1>();
    auto o = out.accessor<float, 1>();
    for (size_t i = 0; i < n; i++) {
        o[i] = -a[i];
    }
    return out;
}
"""


#: What may start an action line: the build's progress, ``[done/total] ``.
PROGRESS = r"(?:\[\d+/\d+\] )?"
_ACTION = re.compile(r"^" + PROGRESS + r"([A-Z]+) +(\S+)", re.M)


def action_lines(stdout: str):
    """``(kind, target)`` of every action line (``[3/80] CXX      build/...``)."""
    return _ACTION.findall(stdout)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def write(path, text) -> str:
    """Write ``text`` (UTF-8) to ``path``, its folders made; the path as a
    string (the manifest tests' files)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def copy_project(dest: pathlib.Path) -> pathlib.Path:
    """Copy what a build needs (no build outputs, no VCS data) to ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", ".sconsign*")
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def copy_built(built: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """A test's own copy of a built project (sources, outputs, SCons's
    database, times kept), for a test that changes it: the shared one
    stays as it was built."""
    shutil.copytree(built, dest, symlinks=True)
    return dest


def run_scons(cwd, *args, check=False, timeout=900, env=None):
    """Run scons in ``cwd`` with this interpreter; return the CompletedProcess.

    ``env`` adds to (or, with a None value, removes from) os.environ.
    """
    cmd = [sys.executable, "-m", "SCons", "-j2", *args]
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    proc = subprocess.run(cmd, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout, env=full_env)
    if check and proc.returncode != 0:
        raise AssertionError(f"scons failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_zygote(dest: pathlib.Path, emulator_dir=None, include_dir=None) -> str:
    """Compile the emulator's program (``gpsimd-zygote``) into folder
    ``dest`` as the build does (``gpsimd_build.zygote_recipe``), from
    this checkout's sources or those of ``emulator_dir`` and
    ``include_dir``; its path."""
    from gpsimd_build import zygote_recipe
    from gpsimd_device import zygote
    emulator_dir = emulator_dir or str(ROOT / "runtime_model" / "gpsimd_emu")
    include_dir = include_dir or str(ROOT / "runtime_model" / "include")
    path = str(dest / zygote.PROGRAM_NAME)
    cmd = zygote_recipe.compile_command(
        "g++", zygote_recipe.c_sources(zygote.source_paths(emulator_dir, include_dir)),
        include_dir, path, zygote.source_digest(emulator_dir, include_dir))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr     # -Wall: no warning
    subprocess.run(zygote_recipe.protect_command(path), check=True)
    return path


@pytest.fixture(scope="session")
def zygote_program(tmp_path_factory) -> str:
    """The emulator's program, compiled once for the session."""
    return build_zygote(tmp_path_factory.mktemp("zygote"))


def fill(folder: pathlib.Path, leave: int = 0) -> pathlib.Path:
    """Write ``folder/filler`` until about ``leave`` bytes are left free on
    its file system (0: to the last byte); returns the filler's path."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        st = os.statvfs(folder)
        todo = st.f_bavail * st.f_frsize - leave
        try:
            while todo > 0:
                todo -= f.write(b"\0" * min(todo, 1 << 16))
            while not leave and f.write(b"\0" * 512):
                pass
        except OSError:
            pass
    return filler


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(size="64k")``: a new folder under ``tmp_path`` with a
    ``tmpfs`` of ``size`` mounted on it (root only; fill it with
    :func:`fill`). Every mount is removed at teardown, whatever the test
    did. Skips, saying so, where no tmpfs can be mounted (CI runs as root:
    ``.ci/check_skips.py`` fails on that skip there)."""
    mounts = []

    def mount(size: str = "64k") -> pathlib.Path:
        mnt = tmp_path / f"disk{len(mounts)}"
        mnt.mkdir()
        if os.geteuid() != 0 or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                capture_output=True).returncode != 0:
            pytest.skip("cannot mount a small tmpfs here")
        mounts.append(mnt)
        return mnt
    try:
        yield mount
    finally:
        for mnt in reversed(mounts):
            subprocess.run(["umount", "-l", str(mnt)])


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_session():
    """The temporary folder of every process a test starts (``TMPDIR``) is
    one of the session's own, removed at its end: what a compiler killed
    by a test leaves (its ``.s``, ``.ii`` and ``.res`` files) never piles
    up in the machine's. Open to every user, as /tmp is (sticky): a
    compile farm's daemons run as another user."""
    top = tempfile.mkdtemp(prefix="gpsimd-tests-tmp-")
    os.chmod(top, 0o1777)
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = top
    yield
    if saved is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved
    shutil.rmtree(top, ignore_errors=True)


def tree_state(top: pathlib.Path) -> dict:
    """{relative path: (size, mtime in ns, link target)} of every file and
    link below ``top``, and ``None`` for each folder (the bytecode caches
    Python may write left out)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames:
            state[os.path.relpath(os.path.join(dirpath, name), top)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            link = os.readlink(path) if os.path.islink(path) else None
            state[os.path.relpath(path, top)] = (st.st_size, st.st_mtime_ns, link)
    return state


@pytest.fixture(scope="session")
def built_project(tmp_path_factory):
    """A copy of the project with the shipped collection built and tested
    once: ``(folder, scons's CompletedProcess)``. Tests read it; one that
    changes it (a build, an edit, a file written) works in its own copy
    (``copy_built``): at the end of the session, a shared build that any
    test changed is an error naming what changed."""
    proj = copy_project(tmp_path_factory.mktemp("proj"))
    proc = run_scons(proj)
    before = tree_state(proj)
    yield proj, proc
    after = tree_state(proj)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"a test changed the shared build (use copy_built): {changed[:20]}"
