"""What a library's core objects were built from, so that a front end that
runs vectors on objects ``scons`` built (the pytest plugin) can tell when
they are out of date instead of testing old code.

At the end of every ``scons`` run the tool records, for each library whose
core objects (and shape library) were built or found up to date in that
run, every source file they depend on: the kernel and shape sources, every
header SCons's scanner found, the runtime's sources and headers. The record
is ``<BUILD_DIR>/<profile>/inputs.json``::

    {"format": 2,
     "files": {"kernels/relu/relu.cpp": [1234, 1733000000123456789], ...},
     "libraries": {"relu": ["kernels/relu/relu.cpp", ...], ...}}

``files``: ``[size in bytes, mtime in ns]`` of each file, once however
many libraries use it (the runtime's are every library's); ``libraries``:
the sorted paths each library's objects were built from. Paths are as the
build names them (relative to the project root when inside it). A
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

__all__ = ["FORMAT", "RECORD_NAME", "Record", "stat_files", "update_record", "read_record",
           "stale_input"]

FORMAT = 2
#: The record's name in ``<BUILD_DIR>/<profile>/``.
RECORD_NAME = "inputs.json"


class Record:
    """The record: ``files`` (path -> ``(size, mtime_ns)``) and
    ``libraries`` (name -> sorted paths)."""

    def __init__(self, files: Optional[Dict[str, Tuple[int, int]]] = None,
                 libraries: Optional[Dict[str, List[str]]] = None):
        self.files = files or {}
        self.libraries = libraries or {}

    def to_text(self) -> str:
        used = {p for paths in self.libraries.values() for p in paths}
        return json.dumps({"format": FORMAT,
                           "files": {p: list(self.files[p]) for p in sorted(used)},
                           "libraries": dict(sorted(self.libraries.items()))},
                          separators=(",", ":")) + "\n"


def stat_files(paths: Iterable[str], root: str = ".") -> Dict[str, Tuple[int, int]]:
    """``{path: (size in bytes, mtime in ns)}`` of each path that exists
    (``root``: where relative paths start)."""
    out = {}
    for path in set(paths):
        try:
            st = os.stat(os.path.join(root, path))
        except OSError:
            continue
        out[path] = (st.st_size, st.st_mtime_ns)
    return out


def read_record(path: str) -> Record:
    """The record at ``path``; an empty one when it is missing, damaged or
    of another format (nothing is then known to be up to date)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            return Record()
        files = {str(p): (int(size), int(mtime)) for p, (size, mtime) in doc["files"].items()}
        libraries = {str(name): [str(p) for p in paths]
                     for name, paths in doc["libraries"].items()}
        if any(p not in files for paths in libraries.values() for p in paths):
            return Record()
        return Record(files, libraries)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Record()


def update_record(path: str, libraries: Dict[str, Iterable[str]], root: str = ".") -> None:
    """Record ``libraries`` (name -> the paths its objects were built from)
    with the files as they are now, keeping the others' entries; written
    whole-or-nothing, and only when the text changes.

    Raises:
        OSError: the record cannot be written.
    """
    record = read_record(path)
    wanted = {name: sorted(set(paths)) for name, paths in libraries.items()}
    stats = stat_files({p for paths in wanted.values() for p in paths}, root)
    for name, paths in wanted.items():
        record.libraries[name] = [p for p in paths if p in stats]
    record.files.update(stats)
    write_if_changed(path, record.to_text())


def stale_input(record: Record, library: str, root: str = ".") -> Optional[str]:
    """Why ``library``'s objects cannot be trusted to be those of its
    sources as they are now, or None when every recorded input is as it
    was built: ``"no record of what its objects were built from"`` or
    ``"<path> changed since"`` / ``"<path> is gone since"``."""
    paths = record.libraries.get(library)
    if not paths:
        return "no record of what its objects were built from"
    for path in paths:
        try:
            st = os.stat(os.path.join(root, path))
        except OSError:
            return f"{path} is gone since"
        if (st.st_size, st.st_mtime_ns) != record.files[path]:
            return f"{path} changed since"
    return None
