"""The one table of summary states (gpsimd_build.results_summary): every
state's exact line, which states the totals count, and the report's word."""

import pytest

from gpsimd_build import results_summary as s
from gpsimd_device.results import LibraryResults, VectorResult


def results(passed, failed, checked=0, no_vectors=()):
    """Results of that many vectors of each status, and ops without vectors."""
    statuses = ["pass"] * passed + ["fail"] * failed + ["checked"] * checked
    return LibraryResults("x", [VectorResult("op", f"v{i}", "ops.yaml:1:1", st)
                                for i, st in enumerate(statuses)], list(no_vectors))


def test_every_state_has_its_line_and_only_current_results_are_counted():
    entries = [("a", s.RUN, results(3, 1)), ("b", s.KEPT, results(5, 0)),
               ("c", s.CACHED, results(2, 2)), ("d", s.STALE, None), ("e", s.NOT_RUN, None),
               ("f", s.NO_RESULTS, None), ("g", s.UNREADABLE, None)]
    assert s.summary_lines(entries, everything=True) == [
        "a: 3 passed, 1 failed",
        "b: 5 passed, 0 failed (not run in this build)",
        "c: 2 passed, 2 failed (cached)",
        "d: stale",
        "e: not run",
        "f: the test run failed without results (see above)",
        "g: no results (the results file cannot be read)",
        "all libraries: 10 passed, 3 failed (4 libraries not counted)"]
    # (the totals never read as all passed while a library has no results)
    assert s.summary_lines(entries[3:5], everything=False) == [
        "d: stale", "e: not run", "total: 0 passed, 0 failed (2 libraries not counted)"]
    assert s.summary_lines(entries[1:4], everything=False)[-1] == (
        "total: 7 passed, 2 failed (1 library not counted)")


def test_ops_without_vectors_are_counted_apart_never_as_failed():
    entries = [("a", s.RUN, results(1, 0, 2, ["relu", "gelu"])),
               ("b", s.KEPT, results(0, 0, 0, ["axpy"]))]
    assert s.summary_lines(entries, everything=True) == [
        "a: 1 passed, 0 failed, 2 CHECKED (no reference), 2 ops without vectors",
        "b: 0 passed, 0 failed, 1 op without vectors (not run in this build)",
        "all libraries: 1 passed, 0 failed, 2 CHECKED (no reference), 3 ops without vectors"]
    assert entries[1][2].ok
    assert LibraryResults.from_json(entries[0][2].to_json()) == entries[0][2]


def test_a_counted_state_needs_results_and_an_unknown_state_is_refused():
    with pytest.raises(ValueError, match="needs its results"):
        s.library_line("a", s.KEPT, None)
    with pytest.raises(ValueError, match="unknown state"):
        s.library_line("a", "current", None)


def test_the_report_words():
    assert [s.report_state(x) for x in (s.RUN, s.KEPT, s.CACHED, s.STALE, s.NOT_RUN,
                                        s.NO_RESULTS, s.UNREADABLE)] == [
        "current", "kept", "cached", "stale", "not run", "no results", "no results"]
