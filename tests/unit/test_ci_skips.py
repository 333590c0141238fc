"""CI fails on an undocumented skip: the test run writes its skips
(``tests/conftest.py``, ``$GPSIMD_TEST_SKIPS``) and ``.ci/check_skips.py``
fails on any whose reason is not documented."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, SKIPS_ENV

pytestmark = pytest.mark.slow          # (the test starts pytest runs of its own)

CHECK = ROOT / ".ci" / "check_skips.py"

_CONFTEST = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("gpsimd_root_conftest", {str(ROOT / 'tests' / 'conftest.py')!r})
root = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root)
pytest_terminal_summary = root.pytest_terminal_summary
"""

_TESTS = """
import pytest

def test_runs():
    pass

def test_needs_a_tool():
    pytest.skip("frobnicate is not installed (apt-get install frobnicate)")

@pytest.mark.skipif(True, reason="distcc pump mode: the include server fails")
def test_pump():
    pass
"""


def _check(path):
    return subprocess.run([sys.executable, str(CHECK), str(path)], capture_output=True,
                          text=True)


@pytest.mark.parametrize("workers", ["0", "2"])     # (CI runs README's command: -n auto)
def test_a_run_writes_its_skips_and_ci_fails_on_an_undocumented_one(tmp_path, workers):
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "test_some.py").write_text(_TESTS)
    skips = tmp_path / "skips.jsonl"
    env = dict(os.environ, **{SKIPS_ENV: str(skips)})
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:gpsimd_pytest", "-p", "no:randomly", "-n", workers, str(tmp_path)],
                         cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    got = sorted((json.loads(l)["test"], json.loads(l)["reason"])
                 for l in skips.read_text().splitlines())
    assert got == [
        ("test_some.py::test_needs_a_tool",
         "Skipped: frobnicate is not installed (apt-get install frobnicate)"),
        ("test_some.py::test_pump", "Skipped: distcc pump mode: the include server fails")]
    checked = _check(skips)
    assert checked.returncode == 1
    assert checked.stderr.splitlines()[0] == (
        "check_skips: test_some.py::test_needs_a_tool skipped in CI: Skipped: frobnicate is "
        "not installed (apt-get install frobnicate)")
    assert "test_pump" not in checked.stderr          # documented
    # only documented skips: passes; no list at all: the run wrote none
    skips.write_text("".join(line + "\n" for line in skips.read_text().splitlines()
                             if "test_pump" in line))
    assert _check(skips).returncode == 0
    assert _check(tmp_path / "none.jsonl").returncode == 2
