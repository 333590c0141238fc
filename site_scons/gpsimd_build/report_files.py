"""The HTML report from files (``gpsimd_build.report`` renders it): each
library's section from its results file and its last explore record,
kept in a cache of sections so that after one library's edit only its
section is rendered (:func:`render_from_files`), and the page written
whole-or-nothing (:func:`write_report`). Stdlib only (the build's own
steps run it under ``python -S``).
"""

import hashlib
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from gpsimd_device.atomic import file_digest
from gpsimd_device.results import LibraryResults

from . import report
from .report import ReportLibrary, library_section, page, render_report

__all__ = ["EXPLORE_RECORD", "render_from_files", "write_report", "libraries_from_files",
           "explore_key"]

_CACHE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def render_from_files(entries: Iterable[Tuple[str, str, Optional[str], bool]], checks: bool,
                      totals: str, cache_dir: str, title: str = "GPSIMD test report",
                      records_dir: Optional[str] = None) -> str:
    """The page of :func:`render_report` for libraries given as ``(name,
    state, results path or None, multicore)`` (as :func:`libraries_from_files`),
    each library's section taken from ``cache_dir/<name>.html`` when that
    was rendered from the same results file (same size and ns time), the
    same state, flags and renderer, else rendered and kept there: after one
    library's edit, one section is rendered and the other results files are
    not read. The same input gives the same text as rendering them all.
    A cache that cannot be written is only slower. ``records_dir``: where
    each library's last explore record is (``<name>/explore.json``)."""
    from gpsimd_device.atomic import write_if_changed
    code = os.stat(report.__file__)     # (a new renderer renders again)
    sections = []
    for entry in entries:
        name, state, path, multicore = entry
        st = os.stat(path) if path and os.path.exists(path) else None
        record = os.path.join(records_dir, name, EXPLORE_RECORD) if records_dir else None
        explored = explore_key(records_dir, name)
        key = hashlib.sha256(repr((code.st_size, code.st_mtime_ns, checks, entry,
                                   st and (st.st_size, st.st_mtime_ns),
                                   explored)).encode()).hexdigest()
        cached = os.path.join(cache_dir, f"{name}.html") if _CACHE_NAME.match(name) else None
        head = f"<!-- {key} -->\n"
        text = None
        if cached:
            try:
                with open(cached, encoding="utf-8") as f:
                    got = f.read()
                if got.startswith(head):
                    text = got[len(head):]
            except (OSError, UnicodeDecodeError):
                pass
        if text is None:
            (lib,) = libraries_from_files([entry])
            lib.checks = checks
            lib.explored = _read_record(record) if explored else None
            text = library_section(lib)
            if cached:
                try:
                    write_if_changed(cached, head + text)
                except OSError:
                    pass
        sections.append(text)
    return page(sections, title, totals)


def write_report(path: str, libraries: Sequence[ReportLibrary], totals: str = "") -> bool:
    """Render the page and write it to ``path`` (atomically) unless the file
    already holds exactly it. Returns whether it wrote.

    Raises:
        OSError: the file cannot be written.
    """
    from gpsimd_device.atomic import write_if_changed
    return write_if_changed(path, render_report(libraries, totals=totals))


#: Each library's last explore record, in its folder (``gpsimd_explore --record``).
EXPLORE_RECORD = "explore.json"
#: The plans an explore may have read, in the library's folder (the shaped
#: one where the library has shape sources): the record is current when it
#: names the digest of one of them (``gpsimd_build.testplan``).
EXPLORED_PLANS = ("testplan.shaped.json", "testplan.json")


def _load(path: str) -> Optional[Dict[str, Any]]:
    """The JSON object at ``path``, or None when it cannot be read as one."""
    import json
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _inputs(record: str, doc: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """``{path: SHA-256}`` of the files the explore ran (its ``inputs``, by
    path relative to the record's folder), by path as the record's is."""
    inputs = doc.get("inputs") if doc else None
    folder = os.path.dirname(record)
    return {os.path.normpath(os.path.join(folder, str(p))): d
            for p, d in inputs.items()} if isinstance(inputs, dict) else {}


def explore_key(records_dir: Optional[str], name: str) -> Any:
    """What library ``name``'s explore rows are rendered from, by size and
    time: its record (``records_dir/<name>/explore.json``), the plans and
    the files the record says the explore ran (None for one gone); None
    when there is no record."""
    record = os.path.join(records_dir, name, EXPLORE_RECORD) if records_dir else None
    if not record or not os.path.exists(record):
        return None
    plans = [os.path.join(records_dir, name, p) for p in EXPLORED_PLANS]

    def stat(path):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)
    return (stat(record), [stat(p) for p in plans],
            sorted((p, stat(p)) for p in _inputs(record, _load(record))))


def _read_record(path: str) -> Optional[Dict[str, Any]]:
    """The explore record at ``path`` (``<lib>/explore.json``), or None when
    it cannot be read as one; ``"stale"``: why its results are not those of
    this build (it explored none of the :data:`EXPLORED_PLANS` beside it as
    they are now, its ``plan_sha256``; or a file it ran, its ``inputs``:
    the core objects, the shape library, the emulator's program, has
    changed or gone since), else ``""``."""
    doc = _load(path)
    if doc is None:
        return None
    folder = os.path.dirname(path)
    plans = {file_digest(os.path.join(folder, p)) for p in EXPLORED_PLANS} - {None}
    inputs = _inputs(path, doc)
    now = {p: file_digest(p) for p in inputs}
    changed = sorted(p for p, digest in inputs.items() if now[p] != digest)
    if doc.get("plan_sha256") not in plans:
        doc["stale"] = "it explored another plan than this build's (the manifest changed since)"
    elif not inputs:
        doc["stale"] = "it does not name the objects it explored (an earlier version's explore)"
    elif changed:
        doc["stale"] = (f"it explored other objects than this build's ({changed[0]} "
                        f"{'is gone' if now[changed[0]] is None else 'changed'} since)")
    else:
        doc["stale"] = ""
    return doc


def libraries_from_files(entries: Iterable[Tuple[str, str, Optional[str], bool]]
                         ) -> List[ReportLibrary]:
    """``ReportLibrary`` objects from ``(name, state, results path or None,
    multicore)``; a results file that cannot be read makes the state
    ``"no results"``."""
    from gpsimd_device.results import ResultsError
    out = []
    for name, state, path, multicore in entries:
        res = None
        if path is not None:
            try:
                res = LibraryResults.load(path)
            except ResultsError:
                state = "no results"
        out.append(ReportLibrary(name, state, res, multicore))
    return out
