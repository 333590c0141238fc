"""What a library's core objects were built from, so that a front end that
runs vectors on objects ``scons`` built (the pytest plugin) can tell when
they are out of date instead of testing old code.

At the end of every ``scons`` run the tool records, for each library whose
core objects (and shape library) were built or found up to date in that
run, every source file they depend on: the kernel and shape sources, every
header SCons's scanner found, the runtime's sources and headers. The record
is ``<BUILD_DIR>/<profile>/inputs.json``::

    {"format": 4,
     "files": {"kernels/relu/relu.cpp": [1234, 1733000000123456789, "<sha256>"], ...},
     "libraries": {"relu": {"key": "<sha256>", "files": ["kernels/relu/relu.cpp", ...]}}}

``files``: ``[size in bytes, mtime in ns, SHA-256 (hex) or null]`` of each file, once however
many libraries use it (the runtime's are every library's), as SCons saw
it when it first read it in that run (so an edit made while the build ran
is seen as a change); the library's own outputs that a front end loads
(core objects, shape library, the plan it runs) are there too, as they
were at the end. ``libraries``: per library, :func:`library_key` of its
manifest entry when it was built (sources, includes, ``cflags``, shape
sources, ops: what its objects are made from besides files), and the
sorted paths. A library's entry is replaced whenever it is recorded
again, so a revert that SCons finds up to date (content signatures) is
recorded with its new time and the check passes again.

A file that differs in size from the record, or is gone, makes the
library stale: content that changed behind the build is never tested as if
it had been built. One of the same size whose time differs is compared by
content with the recorded digest, so that a built tree that travelled (a CI
artifact, a restored cache, a copy: new times, the same bytes) is still
current; the digest is recorded only when the file, as the record is
written, still has the size and time the build saw when it read it (an
edit made while the build ran leaves the digest out: such a file is then
stale by time alone). Digests are computed once per size and time: a file
recorded again unchanged keeps its digest. (A file whose size and time
were both kept by an edit is not noticed, as in SCons's own ``FAST=1``.)

:func:`identity` names, from the record, what a run of the vectors tests
(the objects, the emulator's program, the vectors and the files they
read), the same for every build of one commit on any machine and in any
``BUILD_DIR``: what ``gpsimd_pytest.merge`` compares across shards.
"""

import hashlib
import json
import os
from typing import Dict, Iterable, List, Optional, Tuple

from gpsimd_device.atomic import file_digest, write_if_changed

__all__ = ["FORMAT", "RECORD_NAME", "ZYGOTE_ENTRY", "Record", "library_key", "stat_files",
           "update_record", "read_record", "stale_input", "stale_entry", "identity"]

FORMAT = 4
#: The record's name in ``<BUILD_DIR>/<profile>/``.
RECORD_NAME = "inputs.json"
#: The entry (name and key) of the emulator's program (gpsimd-zygote), which
#: the vectors of every library run under (not a library name: those are
#: identifiers).
ZYGOTE_ENTRY = ":zygote"
#: ``(size in bytes, mtime in ns)`` of a file.
Stat = Tuple[int, int]
#: ``(size in bytes, mtime in ns, SHA-256 hex or None)`` of a recorded file.
Recorded = Tuple[int, int, Optional[str]]


class Record:
    """The record: ``files`` (path -> :data:`Recorded`) and ``libraries``
    (name -> ``(key, sorted paths)``); ``matched``: the files :func:`stale_entry`
    found equal to the record by content, by (path, size, time), so that a
    file every library uses (the runtime's) is read once per record."""

    def __init__(self, files: Optional[Dict[str, Recorded]] = None,
                 libraries: Optional[Dict[str, Tuple[str, List[str]]]] = None):
        self.files = files or {}
        self.libraries = libraries or {}
        self.matched: set = set()

    def to_text(self) -> str:
        used = {p for _, paths in self.libraries.values() for p in paths}
        return json.dumps({"format": FORMAT,
                           "files": {p: list(self.files[p]) for p in sorted(used)},
                           "libraries": {name: {"key": key, "files": paths} for name, (key, paths)
                                         in sorted(self.libraries.items())}},
                          separators=(",", ":")) + "\n"


def library_key(lib) -> str:
    """SHA-256 (hex) of what a library's objects are made from besides
    files: its name, multicore flag, sources, includes, ``cflags``, shape
    sources and each op's schema and kernel name (``lib``: a manifest
    ``Library``). Test vectors are not in it: they change no object."""
    doc = [lib.name, lib.multicore, list(lib.sources), list(lib.includes), list(lib.cflags),
           list(lib.shape_sources), [[op.schema_text, op.function] for op in lib.ops]]
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode("utf-8")).hexdigest()


def stat_files(paths: Iterable[str], root: str = ".") -> Dict[str, Stat]:
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
        files = {str(p): (int(size), int(mtime), None if digest is None else str(digest))
                 for p, (size, mtime, digest) in doc["files"].items()}
        libraries = {str(name): (str(entry["key"]), [str(p) for p in entry["files"]])
                     for name, entry in doc["libraries"].items()}
        if any(p not in files for _, paths in libraries.values() for p in paths):
            return Record()
        return Record(files, libraries)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Record()


def _recorded(path: str, seen: Stat, old: Optional[Recorded]) -> Recorded:
    """The record's entry of a file the build saw as ``seen``: the digest
    of ``old`` when that was recorded for the same size and time, else
    computed now when the file still has them (before and after reading
    it), else None (module text)."""
    if old is not None and old[:2] == tuple(seen) and old[2] is not None:
        return old
    def now():
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)
    digest = file_digest(path) if now() == tuple(seen) else None
    return (seen[0], seen[1], digest if digest is not None and now() == tuple(seen) else None)


def update_record(path: str, libraries: Dict[str, Tuple[str, Iterable[str]]],
                  stats: Dict[str, Stat], root: str = ".") -> None:
    """Record ``libraries`` (name -> ``(library_key, the paths its objects
    and plan were built from)``) with ``stats`` (as the build saw each file;
    a path missing from it was gone: left out) and each file's digest
    (module text; ``root``: where relative paths start), keeping the other
    libraries' entries; written whole-or-nothing, and only when the text
    changes.

    Raises:
        OSError: the record cannot be written.
    """
    record = read_record(path)
    for name, (key, paths) in libraries.items():
        record.libraries[name] = (key, sorted(p for p in set(paths) if p in stats))
    for p, seen in stats.items():
        record.files[p] = _recorded(os.path.join(root, p), seen, record.files.get(p))
    write_if_changed(path, record.to_text())


def stale_input(record: Record, lib, root: str = ".") -> Optional[str]:
    """Why the objects of ``lib`` (a manifest ``Library``) cannot be trusted
    to be those of its manifest entry and sources as they are now, or None:
    ``"no record of what its objects were built from"``, ``"its manifest
    entry changed since"`` (sources, includes, flags or ops), or
    ``"<path> changed since"`` / ``"<path> is gone since"``."""
    return stale_entry(record, lib.name, library_key(lib), root)


def stale_entry(record: Record, name: str, key: str, root: str = ".") -> Optional[str]:
    """``stale_input`` of the record's entry ``name`` (a library, or
    ``ZYGOTE_ENTRY``), expected to have been recorded with ``key``."""
    entry = record.libraries.get(name)
    if not entry or not entry[1]:
        return "no record of what its objects were built from"
    recorded, paths = entry
    if recorded != key:
        return "its manifest entry (sources, includes, cflags or ops) changed since"
    for path in paths:
        try:
            st = os.stat(os.path.join(root, path))
        except OSError:
            return f"{path} is gone since"
        size, mtime, digest = record.files[path]
        seen = (path, st.st_size, st.st_mtime_ns)
        if (st.st_size, st.st_mtime_ns) == (size, mtime) or seen in record.matched:
            continue
        if st.st_size != size or digest is None or file_digest(os.path.join(root, path)) != digest:
            return f"{path} changed since"
        record.matched.add(seen)
    return None


def identity(record: Record, libraries: Iterable, build_dir: str, root: str = ".") -> str:
    """SHA-256 (hex) of what a run of the vectors of ``libraries`` (manifest
    ``Library`` objects: every library the run collected) tests on the
    build ``record`` describes: per library, its recorded key and each
    recorded file's digest (a path in ``build_dir``, relative to ``root``
    or absolute, named relative to it), its ops' plans and the digests of
    the files its vectors read (references, ``.npy``); the same of the
    emulator's program (:data:`ZYGOTE_ENTRY`), and the digest of each of
    the emulator's Python files (``layout.emulator_python_files``, named
    relative to the folder of the packages). No time, and no path of the
    build folder: builds are deterministic, so one commit built anywhere
    has one identity. The test plans the build wrote are left out (they
    name the objects by their paths in ``build_dir``; the rest of them is
    the ops' plans and the shape libraries, both in). A digest the record
    lacks (an edit while the build ran) is that of the file as it is now:
    what the run tested when the file is as the build saw it, and when it
    is not, the library's vectors failed as stale. A library the record
    does not hold is in as such (its vectors failed, saying to build it).
    """
    from . import testplan
    plans = {testplan.PLAN_NAME, testplan.SHAPED_PLAN_NAME}
    folder = os.path.normpath(build_dir) + os.sep

    def entry(name: str):
        if name not in record.libraries:
            return None
        key, paths = record.libraries[name]
        files = []
        for path in paths:
            inside = os.path.normpath(path).startswith(folder)
            if inside and os.path.basename(path) in plans:
                continue
            digest = record.files[path][2] or file_digest(os.path.join(root, path))
            # (a file outside the project, in an allowed folder, is named
            # relative to the project: by its digest alone, wherever it is)
            files.append(["<BUILD_DIR>/" + os.path.normpath(path)[len(folder):] if inside
                          else "<outside>" if path.startswith("..") else path, digest])
        return [key, sorted(files)]

    from . import layout
    packages = os.path.dirname(layout.emulator_dir())    # (gpsimd_device's too)
    code = [[os.path.relpath(p, packages), file_digest(p)] for p in layout.emulator_python_files()]
    doc = [entry(ZYGOTE_ENTRY), code]
    for lib in sorted(libraries, key=lambda lib: lib.name):
        doc.append([lib.name, entry(lib.name), [testplan.op_plan(op).to_json() for op in lib.ops],
                    [[p, file_digest(os.path.join(root, p))] for p in testplan.plan_files(lib)]])
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
