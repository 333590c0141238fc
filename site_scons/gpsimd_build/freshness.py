"""What a library's core objects were built from, so that a front end that
runs vectors on objects ``scons`` built (the pytest plugin) can tell when
they are out of date instead of testing old code.

At the end of every ``scons`` run the tool records, for each library whose
core objects (and shape library) were built or found up to date in that
run, every source file they depend on: the kernel and shape sources, every
header SCons's scanner found, the runtime's sources and headers. The record
is ``<BUILD_DIR>/<profile>/inputs.json``::

    {"format": 1, "libraries": {"relu": [["kernels/relu/relu.cpp", 1234, 1733000000123456789], ...]}}

one ``[path, size in bytes, mtime in ns]`` per file, paths as the build
names them (relative to the project root when inside it), sorted. A
library's entry is replaced whenever it is recorded again, so a revert
that SCons finds up to date (content signatures) is recorded with its new
time and the check passes again.

A file that differs in size or time from the record, or is gone, makes the
library stale: content that changed behind the build is never tested as if
it had been built. (A file whose size and time were both kept by an edit is
not noticed, as in SCons's own ``FAST=1``.)
"""

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from gpsimd_device.atomic import write_if_changed

__all__ = ["FORMAT", "RECORD_NAME", "Entry", "stat_entries", "update_record", "read_record",
           "stale_input"]

FORMAT = 1
#: The record's name in ``<BUILD_DIR>/<profile>/``.
RECORD_NAME = "inputs.json"
#: ``(path, size in bytes, mtime in ns)`` of one input file.
Entry = Tuple[str, int, int]


def stat_entries(paths: Iterable[str], root: str = ".") -> List[Entry]:
    """The entry of each path that exists (``root``: where relative paths
    start), sorted by path."""
    out = []
    for path in sorted(set(paths)):
        try:
            st = os.stat(os.path.join(root, path))
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return out


def read_record(path: str) -> Dict[str, List[Entry]]:
    """The libraries' entries recorded in ``path``; ``{}`` when it is
    missing, damaged or of another format (nothing is then known to be up
    to date)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            return {}
        libraries = doc["libraries"]
        return {str(name): [(str(p), int(s), int(t)) for p, s, t in entries]
                for name, entries in libraries.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def update_record(path: str, libraries: Dict[str, Sequence[Entry]]) -> None:
    """Replace the entries of ``libraries`` in the record at ``path`` (the
    others are kept); written whole-or-nothing, and only when it changes.

    Raises:
        OSError: the record cannot be written.
    """
    record = read_record(path)
    record.update({name: [list(e) for e in entries] for name, entries in libraries.items()})
    text = json.dumps({"format": FORMAT, "libraries": dict(sorted(record.items()))},
                      separators=(",", ":")) + "\n"
    write_if_changed(path, text)


def stale_input(record: Dict[str, List[Entry]], library: str,
                root: str = ".") -> Optional[str]:
    """Why ``library``'s objects cannot be trusted to be those of its
    sources as they are now, or None when every recorded input is as it
    was built: ``"no record of what its objects were built from"`` or
    ``"<path> changed since"`` / ``"<path> is gone since"``."""
    entries = record.get(library)
    if not entries:
        return "no record of what its objects were built from"
    for path, size, mtime in entries:
        try:
            st = os.stat(os.path.join(root, path))
        except OSError:
            return f"{path} is gone since"
        if st.st_size != size or st.st_mtime_ns != mtime:
            return f"{path} changed since"
    return None
