"""A build folder whose disk fills while the build runs: every file the
build could not write is named, without a traceback; no summary or report
is left that is not this build's; and once space is freed, the next build
gives the same bytes and results as a clean build.

The project is the shipped ``relu`` library alone (its build folder takes
2.8 MB), on a tmpfs of 6 MiB (``small_disk``, root only).
"""
import json
import re
import subprocess
import sys

import pytest
import yaml

from conftest import PROGRESS, ROOT, copy_project, fill, run_scons

RELU = "kernels/relu/relu.cpp"
GOOD_LINE = "t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i] : 0.0f;"
BROKEN_LINE = "t_out_acc[i] = t_in_acc[i];"    # 6 of relu's 10 vectors fail


def relu_project(path):
    proj = copy_project(path)
    doc = yaml.safe_load((ROOT / "ops.yaml").read_text())
    doc["libraries"] = [lib for lib in doc["libraries"] if lib["name"] == "relu"]
    (proj / "ops.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return proj


def outcome(proj, build_dir):
    """(digest lines, passed results, failed results) once `scons` and `scons
    digests` have run in ``build_dir``."""
    run_scons(proj, "-Q", f"BUILD_DIR={build_dir}")
    proc = run_scons(proj, "-Q", f"BUILD_DIR={build_dir}", "digests")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = [build_dir / "host/relu" / name
             for name in ("test-results.json", "test-results.failed.json")]
    return ((build_dir / "host/digests.txt").read_text().splitlines(),
            *(json.loads(p.read_text()) if p.exists() else None for p in files))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The outcome of a clean build of the shipped relu. Its build folder is
    where the tests' is from their project (``../disk0/b``): the session's
    ccache (``CCACHE_BASEDIR``) gives the compiler that relative path."""
    top = tmp_path_factory.mktemp("clean")
    proj = relu_project(top / "p")
    return outcome(proj, top / "disk0/b")


def build_filling_at(proj, build_dir, disk, action):
    """`scons` into ``build_dir``; the disk is filled to the last byte as
    soon as the build prints the action line ``action`` (a pattern). Returns
    (exit status, stdout, stderr)."""
    child = subprocess.Popen([sys.executable, "-m", "SCons", "-j2", f"BUILD_DIR={build_dir}"],
                             cwd=str(proj), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    out = []
    for text in child.stdout:
        out.append(text)
        if re.match(PROGRESS + action, text):
            fill(disk)
            break
    out.append(child.stdout.read())
    err = child.stderr.read()
    assert child.wait(timeout=300) is not None
    assert (disk / "filler").exists(), "".join(out) + err
    return child.returncode, "".join(out), err


def test_a_disk_full_at_the_test_run_is_named_and_the_next_build_equals_a_clean_one(
        small_disk, tmp_path, clean):
    disk = small_disk("6m")
    proj = relu_project(tmp_path / "p")
    build_dir = disk / "b"
    status, out, err = build_filling_at(proj, build_dir, disk, "TEST +relu")
    assert status == 2, out + err
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert (f"scons: cannot write {build_dir}/.sconsign.dblite: No space left on device "
            "(errno 28); the next build builds again what this one built") in lines, err
    assert not list(build_dir.glob(".sconsign*.tmp"))
    (disk / "filler").unlink()
    assert outcome(proj, build_dir) == clean


def test_a_build_that_cannot_write_its_summary_leaves_none_that_is_not_true(
        small_disk, tmp_path):
    """All passed, then relu is broken and the disk fills as its test runs:
    the summary and the report of the passing build must not stay (they
    would say PASS for vectors that now fail), and the build names each
    file it could not write."""
    disk = small_disk("6m")
    proj = relu_project(tmp_path / "p")
    build_dir = disk / "b"
    run_scons(proj, "-Q", f"BUILD_DIR={build_dir}", check=True)
    summary = build_dir / "host/test-summary.txt"
    assert summary.read_text().endswith("all libraries: 10 passed, 0 failed\n")
    relu = proj / RELU
    relu.write_text(relu.read_text().replace(GOOD_LINE, BROKEN_LINE))
    status, out, err = build_filling_at(proj, build_dir, disk, "TEST +relu")
    assert status == 2, out + err
    assert "Traceback" not in out + err
    # (the test run removes the old summary and report as it starts, which
    # frees their space: the summary step at the end may then write true
    # ones, or fail and say so; never the passing build's)
    # (true too: the disk filled before the test run wrote its results)
    truths = (["relu: 4 passed, 6 failed", "all libraries: 4 passed, 6 failed"],
              ["relu: the test run failed without results (see above)",
               "all libraries: 0 passed, 0 failed (1 library not counted)"])
    report = build_dir / "host/report.html"
    if summary.exists():
        assert summary.read_text().splitlines() in truths
    else:
        assert (f"scons: the test summary could not be made: {summary}: No space left on "
                "device (errno 28)") in err.splitlines(), err
    assert not report.exists() or "4 passed, 6 failed" in report.read_text() or (
        "the test run failed without results" in report.read_text())
    (disk / "filler").unlink()
    proc = run_scons(proj, "-Q", f"BUILD_DIR={build_dir}")
    assert proc.returncode == 2
    assert summary.read_text().splitlines() == truths[0]


def test_a_cache_dir_on_a_full_disk_is_named_without_a_traceback(small_disk, tmp_path):
    disk = small_disk("64k")
    fill(disk)
    proj = relu_project(tmp_path / "p")
    proc = run_scons(proj, "-Q", f"CACHE_DIR={disk}/cache")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"scons: cannot use CACHE_DIR={disk}/cache: No space left on device (errno 28)"]
