"""A test run killed while it wrote its results (``kill -9``, or the
supervisor's end of the worker on a stop signal) left the temporary file
of ``write_atomically`` (``.test-results.failed.json.<random>.tmp``) in
the library's folder for good: the next build's outputs were not a clean
build's files. The next run of that library removes its results' leftovers
as it removes the results themselves (``gpsimd_emu.cli.parse``)."""
import os

from gpsimd_device.atomic import leftovers_of, write_atomically
from gpsimd_emu import cli


def test_a_run_removes_the_leftovers_of_its_results_files(tmp_path):
    results = tmp_path / "test-results.json"
    failed = tmp_path / "test-results.failed.json"
    left = [tmp_path / ".test-results.json.ab_d1234.tmp",
            tmp_path / ".test-results.failed.json.8or1yef0.tmp"]
    kept = [tmp_path / ".other.json.8or1yef0.tmp",          # another file's
            tmp_path / ".test-results.json.toolong12.tmp",   # not a mkstemp name
            tmp_path / "test-results.json.8or1yef0.tmp"]
    for p in left + kept + [results]:
        p.write_text("x")
    args = cli.parse(["run", str(tmp_path / "plan.json"), "--results", str(results),
                      "--failed-results", str(failed)])
    assert args.results == str(results)
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in kept)


def test_leftovers_of_names_what_write_atomically_makes(tmp_path, monkeypatch):
    """The one naming: a temporary file write_atomically leaves (its rename
    stopped) is what leftovers_of finds."""
    target = tmp_path / "report.html"
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.setattr(os, "unlink", lambda *a: None)      # (as if killed before its cleanup)
    try:
        write_atomically(str(target), "x")
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    made = [tmp_path / n for n in os.listdir(tmp_path)]
    assert len(made) == 1 and leftovers_of(str(target)) == [str(made[0])]
    assert leftovers_of(str(tmp_path / "other.html")) == []


_WRITER = """
import os, sys
from gpsimd_device import atomic
def stop(tmp, path):            # the rename reached: say so, wait to be killed
    os.write(1, b"writing\\n")
    os.read(0, 1)
os.replace = stop
atomic.write_atomically(sys.argv[1], b"partial")
"""


def test_every_writer_removes_what_killed_writers_of_its_file_left(tmp_path):
    """A pack, the report or a record written as the build was killed left
    its temporary file for good; the next write of the same file removes it,
    but never a live writer's (it holds an flock on its temporary file until
    the rename), a link, or another file's."""
    import signal
    import subprocess
    import sys
    target = str(tmp_path / "lib_cpu0.packed.so")
    child = subprocess.Popen([sys.executable, "-c", _WRITER, target], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        assert child.stdout.readline() == b"writing\n"
        (live,) = leftovers_of(target)
        planted = tmp_path / ".lib_cpu0.packed.so.plantedx.tmp"
        planted.symlink_to(tmp_path / "elsewhere")
        other = tmp_path / ".lib_cpu1.packed.so.8or1yef0.tmp"
        other.write_text("x")
        write_atomically(target, b"whole")      # the live writer's file stays
        assert sorted(leftovers_of(target)) == sorted([live, str(planted)])
        child.send_signal(signal.SIGKILL)
        child.wait()
        write_atomically(target, b"whole")      # its writer killed: removed
        assert leftovers_of(target) == [str(planted)] and other.exists()
        with open(target, "rb") as f:
            assert f.read() == b"whole"
    finally:
        child.kill()
        child.wait()


def test_a_file_of_another_user_named_like_a_leftover_is_not_removed(tmp_path):
    """In a shared (sticky) folder, leftovers are removed only when this
    user made them: a build run as root removed another user's own file
    named like one from /tmp, which the sticky bit keeps any other user's
    build from (in the build's own folder, anyone's is removed)."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another user")
    tmp_path.chmod(0o1777)
    target = tmp_path / "test-results.json"
    theirs = tmp_path / ".test-results.json.owned000.tmp"
    mine = tmp_path / ".test-results.json.mine0000.tmp"
    for p in (theirs, mine):
        p.write_text("x")
    os.chown(theirs, 65534, 65534)
    write_atomically(str(target), "whole")
    assert theirs.exists() and not mine.exists()
    tmp_path.chmod(0o755)                       # (not shared: what is left is removed)
    write_atomically(str(target), "whole")
    assert not theirs.exists()
