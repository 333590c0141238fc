"""The summary of a build's test results: one table of states, on every
path (``scons``, a ninja build's summary step, the report). Stdlib only.

===============  ===============================================  =========
state            line                                             in totals
===============  ===============================================  =========
``RUN``          ``lib: N passed, M failed``                      yes
``KEPT``         ``lib: N passed, M failed (not run in this         yes
                 build)``
``CACHED``       ``lib: N passed, M failed (cached)``             yes
``STALE``        ``lib: stale``                                   no
``NOT_RUN``      ``lib: not run``                                 no
``NO_RESULTS``   ``lib: the test run failed without results       no
                 (see above)``
``UNREADABLE``   ``lib: no results (the results file cannot be     no
                 read)``
===============  ===============================================  =========

``RUN``: results for these sources, made by this build; ``KEPT``: results
still current for these sources, made by an earlier build (a null build);
``CACHED``: served from a build cache (``CACHE_DIR``), not run on this
machine; ``STALE``: results exist, but of other sources (this build did not
get to run the tests again: it stopped or was interrupted before);
``NOT_RUN``: no results at all. After the libraries' lines, the totals of
the counted states: ``all libraries: N passed, M failed`` when the whole
collection was asked for, else ``total: N passed, M failed`` (then ``, K
CHECKED (no reference)`` when checks-only vectors ran; those are never
counted as passed).
"""

from typing import Iterable, List, Optional, Tuple

from gpsimd_device.results import LibraryResults, counts_text

__all__ = ["RUN", "KEPT", "CACHED", "STALE", "NOT_RUN", "NO_RESULTS", "UNREADABLE", "COUNTED",
           "TOTALS", "library_line", "summary_lines", "report_state", "as_kept_sed",
           "SUMMARY_FILE", "REPORT_FILE"]

#: The summary's and the report's files in ``<BUILD_DIR>/<profile>/``.
SUMMARY_FILE = "test-summary.txt"
REPORT_FILE = "report.html"

RUN = "run"
KEPT = "kept"
CACHED = "cached"
STALE = "stale"
NOT_RUN = "not run"
NO_RESULTS = "no results"
UNREADABLE = "unreadable"
#: The states whose numbers are shown and counted in the totals.
COUNTED = (RUN, KEPT, CACHED)

_SUFFIX = {RUN: "", KEPT: " (not run in this build)", CACHED: " (cached)"}
#: The totals line's first words: the whole collection asked for, or not.
TOTALS = ("all libraries", "total")
_TEXT = {STALE: "stale", NOT_RUN: "not run",
         NO_RESULTS: "the test run failed without results (see above)",
         UNREADABLE: "no results (the results file cannot be read)"}


def library_line(name: str, state: str, results: Optional[LibraryResults]) -> str:
    """A library's line (the table above); ``results`` for a counted state.

    Raises:
        ValueError: an unknown state, or a counted state without results.
    """
    if state in COUNTED:
        if results is None:
            raise ValueError(f"{name}: state {state} needs its results")
        return f"{name}: {results.counts()}{_SUFFIX[state]}"
    if state not in _TEXT:
        raise ValueError(f"{name}: unknown state {state!r}")
    return f"{name}: {_TEXT[state]}"


def summary_lines(entries: Iterable[Tuple[str, str, Optional[LibraryResults]]],
                  everything: bool) -> List[str]:
    """One line per ``(name, state, results)`` and the totals line
    (``all libraries: ...`` when ``everything`` was asked for, else
    ``total: ...``), which counts the libraries with results and says how
    many have none (``(2 libraries not counted)``: stale, not run, no
    results), so that it never reads as all passed when some were not
    tested."""
    passed = failed = checked = no_vectors = uncounted = 0
    lines = []
    for name, state, res in entries:
        lines.append(library_line(name, state, res))
        if state in COUNTED:
            passed += res.passed
            failed += res.failed
            checked += res.checked
            no_vectors += len(res.no_vectors)
        else:
            uncounted += 1
    lines.append(f"{TOTALS[0] if everything else TOTALS[1]}: "
                 f"{counts_text(passed, failed, checked, no_vectors)}" + (
                     f" ({uncounted} {'library' if uncounted == 1 else 'libraries'} not counted)"
                     if uncounted else ""))
    return lines


def report_state(state: str) -> str:
    """The report's word for a state (``gpsimd_build.report``): ``current``
    for results of this build's run, ``kept`` for results this build did
    not run that are still current for their sources, ``cached`` for
    results served from the build cache, ``no results`` for a failed or
    unreadable one, else the state itself."""
    if state in COUNTED:
        return {RUN: "current", KEPT: "kept", CACHED: "cached"}[state]
    if state in (NO_RESULTS, UNREADABLE):
        return "no results"
    return state


def _ere(text: str) -> str:
    return "".join("\\" + c if c in "\\.[]()*+?{}|^$" else c for c in text)


def as_kept_sed() -> str:
    """The arguments of a ``sed -E`` command (no ``$`` in them, so that
    they pass through SCons's and ninja's quoting as they are) that turns
    the ``RUN`` lines of a summary into ``KEPT`` lines, leaving every
    other line as it is: how a ninja build that ran no summary step prints
    the summary of an earlier run."""
    kept, cached = _ere(_SUFFIX[KEPT].strip()), _ere(_SUFFIX[CACHED].strip())
    return (f"-e '/^({'|'.join(TOTALS)}): /b' -e '/ ({kept}|{cached})/b' "
            f"-e '/: [0-9]+ passed, [0-9]+ failed/s/.*/&{_SUFFIX[KEPT]}/'")
