"""The ninja lock step holds the build folder only for a ninja run of that
folder's ``build.ninja``: a step whose ninja was killed (``kill -9`` of the
group) as it started it has, as its shell's ``$PPID``, the process that
took the orphan (pid 1); it held the lock for that process, for ever, and
the lock file then named process 1, an ancestor of every later build,
which went on without the lock (``buildlock._ancestor``)."""

import os
import subprocess
import sys

import pytest

from gpsimd_build import buildlock, ninjakeep


@pytest.fixture
def folders(tmp_path):
    build = tmp_path / "build"
    (build / ".ninja").mkdir(parents=True)
    return str(build), str(build / ".ninja")


def _runner(argv, cwd):
    """A live process of command line ``argv`` (a stand-in for ninja)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print(1, flush=True); "
                             "sys.stdin.read()", *argv], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"1\n"      # (started: its command line is its own)
    return proc


def _lock_text(build):
    path = os.path.join(build, buildlock.LOCK_NAME)
    return open(path).read() if os.path.exists(path) else ""


def test_a_step_of_a_run_that_has_ended_takes_no_lock(folders):
    build, ninja_dir = folders
    other = _runner([], os.path.dirname(build))           # (runs no build.ninja)
    try:
        with pytest.raises(buildlock.RunEnded, match=r"^the ninja run of this step has ended "
                           rf"\(its program is now process {other.pid} \(.*\), which runs no "):
            buildlock.hold_for_ninja(build, ninja_dir, other.pid)
        assert f"process {other.pid} " not in _lock_text(build)
        assert not [n for n in os.listdir(ninja_dir) if n.startswith(buildlock.MARK_PREFIX)]
    finally:
        other.stdin.close()
        other.wait()


def test_pid_1_is_never_a_step_s_ninja_run(folders):
    build, ninja_dir = folders
    with pytest.raises(buildlock.RunEnded, match=r"its program is now process 1 "):
        buildlock.hold_for_ninja(build, ninja_dir, 1)
    assert "process 1 " not in _lock_text(build)


@pytest.mark.parametrize("argv", [["-f", "build/build.ninja"], ["-fbuild/build.ninja"],
                                  ["-j2", "-f", "./build/../build/build.ninja", "relu"]])
def test_a_process_runs_the_ninja_file_its_f_option_names(folders, argv):
    build, _ = folders
    top = os.path.dirname(build)
    runner = _runner(argv, top)
    try:
        assert buildlock.runs_ninja_file(runner.pid, os.path.join(build, "build.ninja"))
        assert not buildlock.runs_ninja_file(runner.pid, os.path.join(build, "other.ninja"))
    finally:
        runner.stdin.close()
        runner.wait()
    assert ninjakeep.KEPT == "build.ninja.kept"
