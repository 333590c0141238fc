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
