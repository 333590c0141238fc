"""The summary a build prints when it ends: the truth about every library
whose results this build was asked for.

Printed at exit, whatever happened (a failed library, an interrupt, a null
build), from the state SCons left each test node in, as a state of the one
table (``gpsimd_build.results_summary``):

* built in this run: ``RUN``, with the numbers of its results file
  (``test-results.json``, written only by a passing run) or, for a run
  that failed, of ``test-results.failed.json`` written by that run (the
  emulator removes both when it starts); ``CACHED`` when SCons retrieved
  the results from a ``CacheDir`` instead (``cache.retrieved``);
* up to date in this run: ``KEPT`` (results of an earlier build, still
  those of these sources);
* its test run failed in this run and wrote no results: ``NO_RESULTS``;
* not run to its end in this run (the build stopped earlier or was
  interrupted): ``STALE`` when results of an earlier build exist,
  ``NOT_RUN`` when none do; their old numbers are never shown, and the
  totals count only current results.

When the whole collection was asked for, the same text is written to
``<BUILD_DIR>/<profile>/test-summary.txt`` (atomically).

Then the HTML report (``gpsimd_build.report``) is written to
``<BUILD_DIR>/<profile>/report.html``: every library of the collection, those
of this build with the state above, the others (and the stale ones) with
the results an earlier build left, marked stale. It is rendered only when
what it shows may have changed: a key of each library's state and results
file (path, size, time), and of what its explore rows are rendered from
(``report_files.explore_key``: its last explore record and the objects
and program it names), is kept beside it (``.report-key``), so a null
build costs a few ``stat`` calls; and each library's section is kept in
``.report-cache/<lib>.html`` under the key of its own results, so after
one library's edit only its section is rendered (at 5,000 ops the whole
page took about a second).
"""

import json
import os
import sys
from dataclasses import dataclass
import hashlib
from typing import Dict, List, Optional, Sequence, Tuple

import SCons.Node

from . import cache

from gpsimd_device.atomic import write_atomically, write_if_changed
from gpsimd_build import results_summary as states
from gpsimd_device.results import LibraryResults, ResultsError

__all__ = ["LibraryTests", "summary_lines", "Summary"]

#: The last report's entries and totals (for a build that only explores).
_ENTRIES = ".report-entries.json"


@dataclass
class LibraryTests:
    """One library's test node (a File node, ``<lib>/test-results.json``)."""

    name: str
    node: object

    @property
    def failed_path(self) -> str:
        return os.path.splitext(self.node.abspath)[0] + ".failed.json"


def _numbers(path: str) -> Optional[LibraryResults]:
    try:
        return LibraryResults.load(path)
    except ResultsError:
        return None


def _up_to_date(node) -> bool:
    """Would SCons find the test node ``node`` up to date (its results those
    of its sources as they are now), though this build did not visit it?
    False when it cannot tell."""
    try:
        return bool(node.is_up_to_date())
    except Exception:   # noqa: BLE001 - at exit: unknown is not current
        return False


def _written_since(path: str, start_ns: int) -> bool:
    try:
        return os.stat(path).st_mtime_ns >= start_ns
    except OSError:
        return False


def _library_states(libraries: Sequence[LibraryTests], failed_runs: Sequence[str] = (),
                    start_ns: int = 0) -> List[Tuple[LibraryTests, str, Optional[LibraryResults]]]:
    """``(library, state, results)`` per library: a state of
    ``gpsimd_build.results_summary`` from the state SCons left its test node
    in (module docstring); results for the counted states."""
    out = []
    for lib in libraries:
        state = lib.node.get_state()
        if state in (SCons.Node.executed, SCons.Node.up_to_date):
            res = _numbers(lib.node.abspath)
            how = (states.KEPT if state == SCons.Node.up_to_date else
                   states.CACHED if cache.retrieved(lib.node) else states.RUN)
            out.append((lib, how if res else states.UNREADABLE, res))
        elif state == SCons.Node.failed and _written_since(lib.failed_path, start_ns):
            res = _numbers(lib.failed_path)
            out.append((lib, states.RUN if res else states.UNREADABLE, res))
        elif state == SCons.Node.failed and lib.node.path in failed_runs:
            out.append((lib, states.NO_RESULTS, None))
        else:
            old = os.path.exists(lib.node.abspath) or os.path.exists(lib.failed_path)
            out.append((lib, states.STALE if old else states.NOT_RUN, None))
    return out


def _remove(path: str) -> None:
    """Remove the file ``path`` (a link: the link itself) if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def summary_lines(libraries: Sequence[LibraryTests], everything: bool,
                  failed_runs: Sequence[str] = (), start_ns: int = 0,
                  states_=None) -> List[str]:
    """The summary's lines (``gpsimd_build.results_summary``).
    ``failed_runs``: paths of the test nodes whose run ended with an error
    in this build (not an interrupt); ``start_ns``: when this build started
    (``time.time_ns()``); ``states_``: ``_library_states`` when already
    known."""
    return states.summary_lines(
        ((lib.name, state, res) for lib, state, res in
         states_ or _library_states(libraries, failed_runs, start_ns)), everything)


class Summary:
    """Prints the summary at exit for the libraries the build's targets
    ask for (``all``/``test``/the default: every library; ``test-<lib>``,
    ``<lib>`` or a library's results file: that library). ``libraries``
    are those of this run's graph, ``collection_size`` the number in the
    whole collection. ``collection``: ``(name, multicore)`` of every library
    of the collection, for the report (default: those of ``libraries``, as
    single-core); ``checks``: whether the tests run with the emulator's
    checks (the report says why a multicore vector has no write sets)."""

    def __init__(self, libraries: Sequence[LibraryTests], profile_dir: str,
                 collection_size: Optional[int] = None, all_aliases=("all", "test"),
                 collection: Optional[Sequence[Tuple[str, bool]]] = None, checks: bool = True,
                 explore_nodes: Optional[Dict[str, Sequence[object]]] = None):
        import time
        self.start_ns = time.time_ns()
        self.libraries = list(libraries)
        self.profile_dir = profile_dir
        self.collection = list(collection if collection is not None
                               else [(lib.name, False) for lib in self.libraries])
        self.checks = checks
        #: each library's explore node(s) (``scons explore-<lib>``)
        self.explore_nodes = dict(explore_nodes or {})
        #: libraries in the whole collection (this run's graph may hold fewer)
        self.collection_size = len(self.libraries) if collection_size is None else collection_size
        self.all_aliases = set(all_aliases)
        self.by_name: Dict[str, LibraryTests] = {lib.name: lib for lib in self.libraries}
        self.by_path: Dict[str, LibraryTests] = {lib.node.path: lib for lib in self.libraries}

    def wanted(self, targets: Sequence[object]) -> List[LibraryTests]:
        """The libraries the build targets ask for, in collection order: by
        an alias, a library's name, its test node's path, or a folder that
        holds its test node (``scons .``, ``scons build/host``: SCons builds
        every target below a folder), as given or absolute."""
        names = set()
        for t in targets:
            text = str(t)
            if text in self.all_aliases:
                return list(self.libraries)
            if text.startswith("test-") and text[5:] in self.by_name:
                names.add(text[5:])
            elif text in self.by_name:
                names.add(text)
            else:
                path = os.path.normpath(text)
                here = os.getcwd()              # (SCons runs in the project's folder)
                if os.path.isabs(path) and (path == here or path.startswith(here + os.sep)):
                    path = os.path.relpath(path, here)
                below = "" if path == "." else path.rstrip(os.sep) + os.sep
                names.update(lib.name for node, lib in self.by_path.items()
                             if node == path or node.startswith(below))
        return [lib for lib in self.libraries if lib.name in names]

    def explored(self, targets: Sequence[str]) -> List[str]:
        """The libraries the build targets explore (``explore``,
        ``explore-<lib>``), in collection order."""
        names = set(self.explore_nodes) if "explore" in targets else \
            {t[8:] for t in targets if t.startswith("explore-")}
        return [lib.name for lib in self.libraries if lib.name in names]

    def at_exit(self) -> None:
        """Print (and record) the summary; never raises."""
        import SCons.Script
        try:
            targets = [str(t) for t in SCons.Script.BUILD_TARGETS]
            wanted = self.wanted(targets)
            if not wanted:
                self._untested()
                explored = self.explored(targets)
                if explored:
                    self.explored_report(explored)
                return
            everything = len(wanted) == self.collection_size
            from . import signals
            failed_runs = [] if signals.interrupted() else [
                str(f.node) for f in SCons.Script.GetBuildFailures()
                if getattr(f, "errstr", "") != "Build interrupted."]
            found = _library_states(wanted, failed_runs, self.start_ns)
            lines = summary_lines(wanted, everything, states_=found)
            text = "\n".join(lines) + "\n"
            sys.stdout.write(text)
            sys.stdout.flush()
            summary = os.path.join(self.profile_dir, states.SUMMARY_FILE)
            if everything:
                write_atomically(summary, text.encode("utf-8"))
            elif any(state != states.KEPT for _, state, _ in found):
                # (a build of some libraries writes no summary; an earlier
                # build's would still speak for a library this one changed
                # or could not test: `relu: 10 passed` after relu's compile
                # failed. A test run removes it as it starts; this is for
                # the libraries whose tests did not run)
                _remove(summary)
        except BrokenPipeError:   # `scons | head`: the reader has gone
            return
        except Exception as e:  # at exit: report, never a traceback
            sys.stderr.write(f"scons: the test summary could not be made: {_why(e)}\n")
            return
        try:
            self.write_report(found, lines[-1])
        except Exception as e:  # noqa: BLE001 - at exit: report, never a traceback
            sys.stderr.write(f"scons: the test report could not be written: {_why(e)}\n")

    def _untested(self) -> None:
        """A build that tests nothing but made (or took from the cache, or
        failed to make) what a library's tests run on (``scons
        build/host/relu/relu.packed.so``): the last test run's summary and
        report no longer speak for it, and go, as a test run removes them
        as it starts (the pack step removes them too, the ninja path's way;
        a pack from the cache runs none)."""
        touched = [lib.name for lib in self.libraries if any(
            c.get_state() in (SCons.Node.executed, SCons.Node.failed)
            for c in lib.node.children(scan=False))]
        if touched:
            for name in (states.SUMMARY_FILE, states.REPORT_FILE):
                _remove(os.path.join(self.profile_dir, name))
            sys.stderr.write(f"scons: {', '.join(touched)}: rebuilt and not tested; the test "
                             f"summary and report are removed (scons {touched[0]} tests it)\n")

    def _report_entries(self, found) -> List[Tuple[str, str, Optional[str], bool]]:
        """``(name, state, results file or None, multicore)`` per library of
        the collection: this build's state, or ``stale``/``not run`` from
        the files an earlier build left."""
        by_name = {lib.name: (state, lib) for lib, state, _ in found}
        out = []
        for name, multicore in self.collection:
            state, lib = by_name.get(name, (None, None))
            passed = os.path.join(self.profile_dir, name, "test-results.json")
            failed = os.path.join(self.profile_dir, name, "test-results.failed.json")
            if state in states.COUNTED:
                ok = lib.node.get_state() in (SCons.Node.executed, SCons.Node.up_to_date)
                out.append((name, states.report_state(state), passed if ok else failed,
                            multicore))
                continue
            if state in (states.UNREADABLE, states.NO_RESULTS):
                out.append((name, "no results", None, multicore))
                continue
            old = [p for p in (passed, failed) if os.path.exists(p)]
            newest = max(old, key=lambda p: os.stat(p).st_mtime_ns) if old else None
            out.append((name, "stale" if newest else "not run", newest, multicore))
        return out

    def write_report(self, found, totals: str) -> None:
        """Write ``report.html`` unless the key of what it shows is unchanged
        (module docstring)."""
        from gpsimd_build import report, report_files
        entries = self._report_entries(found)
        code = os.stat(report.__file__)   # a new renderer renders again
        key = hashlib.sha256(repr((self.checks, totals, code.st_size, code.st_mtime_ns)).encode())
        for name, state, path, multicore in entries:
            st = os.stat(path) if path else None
            key.update(repr((name, state, path, multicore, st and (st.st_size, st.st_mtime_ns),
                             report_files.explore_key(self.profile_dir, name))).encode())
        page = os.path.join(self.profile_dir, states.REPORT_FILE)
        key_path = os.path.join(self.profile_dir, ".report-key")
        digest = key.hexdigest().encode()
        try:
            with open(key_path, "rb") as f:
                if f.read() == digest and os.path.exists(page):
                    return
        except OSError:
            pass
        write_if_changed(page, report_files.render_from_files(
            entries, self.checks, totals, os.path.join(self.profile_dir, ".report-cache"),
            records_dir=self.profile_dir))
        write_atomically(key_path, digest)
        write_atomically(os.path.join(self.profile_dir, _ENTRIES),
                         json.dumps({"entries": entries, "totals": totals}) + "\n")

    def explored_report(self, explored: Sequence[str]) -> None:
        """After a build that only explored (``scons explore-<lib>``): the
        report again, with each library's last explore. This build ran no
        test: results the last report counted are ``kept`` when the
        library's test node is up to date (SCons would not run it: its
        results are those of its sources as they are now), else ``stale``
        (its objects, plan, references or the model changed since, even
        in a build that ran no test; a library outside this build's graph
        was not looked at); the other states stay as they were, and the
        totals count the kept ones."""
        try:
            with open(os.path.join(self.profile_dir, _ENTRIES), encoding="utf-8") as f:
                saved = json.load(f)
            entries = [tuple(e) for e in saved["entries"]]
            totals = str(saved["totals"])
        except (OSError, ValueError, KeyError, TypeError):
            entries, totals = self._report_entries([]), ""
        from gpsimd_build import report, report_files
        current = {lib.name for lib in self.libraries if _up_to_date(lib.node)}
        entries = [(n, st if st not in report.COUNTED_STATES else
                    "kept" if n in current else "stale", p, m) for n, st, p, m in entries]
        kept = [(n, _numbers(p) if st == "kept" and p else None) for n, st, p, _ in entries]
        totals = states.summary_lines([(n, states.KEPT if res else states.STALE, res)
                                       for n, res in kept],
                                      totals.startswith(states.TOTALS[0]))[-1]
        write_if_changed(os.path.join(self.profile_dir, states.REPORT_FILE),
                         report_files.render_from_files(
                             entries, self.checks, totals,
                             os.path.join(self.profile_dir, ".report-cache"),
                             records_dir=self.profile_dir))
        _remove(os.path.join(self.profile_dir, ".report-key"))    # (the next build renders it)


def _why(e: Exception) -> str:
    """An error at exit in words: a file's error as ``PATH: WHY (errno
    N)``, as the build's other messages say it."""
    if isinstance(e, OSError) and e.filename and e.errno is not None:
        return f"{e.filename}: {e.strerror} (errno {e.errno})"
    return str(e)
