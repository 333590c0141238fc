"""The one table of summary states (gpsimd_build.results_summary): every
state's exact line, which states the totals count, and the report's word."""

import pytest

from gpsimd_build import results_summary as s


class Numbers:
    """What a summary reads of a LibraryResults."""

    def __init__(self, passed, failed, checked=0):
        self.passed, self.failed, self.checked = passed, failed, checked


results = Numbers


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
        "all libraries: 10 passed, 3 failed"]
    assert s.summary_lines(entries[3:5], everything=False) == [
        "d: stale", "e: not run", "total: 0 passed, 0 failed"]


def test_a_counted_state_needs_results_and_an_unknown_state_is_refused():
    with pytest.raises(ValueError, match="needs its results"):
        s.library_line("a", s.KEPT, None)
    with pytest.raises(ValueError, match="unknown state"):
        s.library_line("a", "current", None)


def test_the_report_words():
    assert [s.report_state(x) for x in (s.RUN, s.KEPT, s.CACHED, s.STALE, s.NOT_RUN,
                                        s.NO_RESULTS, s.UNREADABLE)] == [
        "current", "kept", "cached", "stale", "not run", "no results", "no results"]
