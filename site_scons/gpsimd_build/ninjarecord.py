"""The inputs record (``gpsimd_build.freshness``) on the ninja path: what
ninja built each library from, written by the summary step at the end of
a ninja run from ninja's own logs, read-only.

``scons --experimental=ninja`` writes the *spec* (``SPEC_NAME`` in the
profile's folder, :func:`spec_text`): per library (and the emulator's
program, ``freshness.ZYGOTE_ENTRY``) its key, its roots, and each step
below them with the files no step makes that it reads (kernel sources,
generated texts, the runtime's sources). The summary step then records a
library (:func:`update`) when ninja holds it up to date, as ninja itself
decides it:

* every root exists, and every step has an entry in ninja's build log
  (``.ninja_log``; a step without one is one ninja would run again);
* every file a step reads (the spec's, and the headers ninja's deps log
  ``.ninja_deps`` holds for it, since ``deps = gcc`` removes the depfiles)
  is no newer than the time the log records for that step: ninja records
  the command's *start* time there (ninja 1.11 and later), so a file
  edited while its compile ran is newer, and the library is left
  unrecorded (its old entry then names a changed file: stale).

Formats read: the build log ``# ninja log v5``-``v7`` (tab-separated
``start end mtime path hash``, the last entry of a path wins) and the
deps log version 4 (``# ninjadeps\\n``, int32 version, then records of a
uint32 size whose high bit marks a deps record: int32 output id, uint64
mtime as two uint32, int32 input ids; else a path record: the path,
NUL-padded to 4 bytes, and a uint32 check, the one's complement of its
id), as ninja's ``src/build_log.cc`` and ``src/deps_log.cc`` write them.
"""

import json
import os
import struct
from typing import Dict, Iterable, List, Optional, Tuple

from . import freshness

__all__ = ["SPEC_NAME", "spec_text", "read_build_log", "read_deps_log", "current", "update"]

#: The spec's name in ``<BUILD_DIR>/<profile>/``.
SPEC_NAME = "inputs-spec.json"
_DEPS_MAGIC = b"# ninjadeps\n"


def spec_text(libraries: Dict[str, Tuple[str, List[str], Dict[str, List[str]]]],
              allowed: Iterable[str] = ()) -> str:
    """The spec: ``libraries`` maps a name to ``(key, root paths, {a step's
    output path: the source paths it reads})``; ``allowed``: the folders
    outside the project the manifest may name (relative to the project),
    whose headers in ninja's deps log are recorded too."""
    return json.dumps({"format": 2, "allowed": sorted(allowed), "libraries": {
        name: {"key": key, "roots": sorted(roots),
               "steps": {out: sorted(set(srcs)) for out, srcs in sorted(steps.items())}}
        for name, (key, roots, steps) in sorted(libraries.items())}},
        sort_keys=True, separators=(",", ":")) + "\n"


def read_build_log(path: str) -> Dict[str, int]:
    """{output path: the mtime (ns) the log records for its last run} of
    the ninja build log at ``path``; empty when it is missing or of a
    version this does not read."""
    out: Dict[str, int] = {}
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            head = f.readline()
            if head.strip() not in ("# ninja log v5", "# ninja log v6", "# ninja log v7"):
                return {}
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 5 and fields[2].isdigit():
                    out[fields[3]] = int(fields[2])
    except OSError:
        return {}
    return out


def read_deps_log(path: str) -> Dict[str, List[str]]:
    """{output path: the input paths ninja's deps log holds for it} of the
    log at ``path`` (the last record of an output wins); empty when it is
    missing, of another version, or damaged from its first bad record on
    (ninja itself drops a torn tail)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if not data.startswith(_DEPS_MAGIC) or len(data) < 16 or \
            struct.unpack_from("<i", data, 12)[0] != 4:
        return {}
    paths: List[str] = []
    deps: Dict[int, List[int]] = {}
    at = 16
    while at + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, at)
        is_deps, size = bool(size >> 31), size & 0x7FFFFFFF
        body = data[at + 4:at + 4 + size]
        if len(body) != size or size % 4:
            break
        if is_deps:
            if size < 12:
                break
            ids = struct.unpack_from(f"<{size // 4}i", body)
            deps[ids[0]] = list(ids[3:])
        else:
            if size < 4 or struct.unpack_from("<I", body, size - 4)[0] != \
                    (~len(paths)) & 0xFFFFFFFF:
                break
            paths.append(body[:size - 4].rstrip(b"\0").decode("utf-8", "surrogateescape"))
        at += 4 + size
    return {paths[o]: [paths[i] for i in ins if 0 <= i < len(paths)]
            for o, ins in deps.items() if 0 <= o < len(paths)}


def _read_spec(path: str) -> Optional[Tuple[dict, List[str]]]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return (doc["libraries"], [str(a) for a in doc["allowed"]]) if doc.get("format") == 2 \
            else None
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None


def _mtime(path: str, root: str) -> Optional[int]:
    try:
        return os.stat(os.path.join(root, path)).st_mtime_ns
    except OSError:
        return None


def up_to_date(entry: dict, built: Dict[str, int], deps: Dict[str, List[str]],
               root: str = ".", allowed: Iterable[str] = (),
               build_dir: str = "") -> Optional[List[str]]:
    """The files a spec ``entry`` is built from when ninja holds it up to
    date (roots first), or None (module text). An absolute path (a header
    of the deps log) is left out (the compiler's own headers) unless it
    lies in one of the ``allowed`` folders (relative to ``root``) and not in
    ``build_dir`` (what we wrote there): then it is named relative to
    ``root``, as the inputs record names such files."""
    inside = tuple(os.path.join(os.path.realpath(os.path.join(root, a)), "") for a in allowed)
    ours = os.path.join(os.path.realpath(build_dir), "") if build_dir else "\0"
    files = list(entry["roots"])
    if any(_mtime(p, root) is None for p in files):
        return None
    for out, sources in entry["steps"].items():
        started = built.get(out)
        if started is None:
            return None
        for src in list(sources) + deps.get(out, []):
            if os.path.isabs(src):
                real = os.path.realpath(src)
                if not inside or not real.startswith(inside) or real.startswith(ours):
                    continue
                src = os.path.relpath(src, os.path.abspath(root))
            mtime = _mtime(src, root)
            if mtime is None or mtime > started:
                return None
            files.append(src)
    return list(dict.fromkeys(files))


def current(spec_path: str, ninja_dir: str,
            root: str = ".") -> Optional[Dict[str, Tuple[str, List[str]]]]:
    """{name: (key, the files it is built from)} of every entry of the spec
    at ``spec_path`` that ninja (its logs in ``ninja_dir``) holds up to
    date (:func:`up_to_date`); None when the spec cannot be read."""
    spec = _read_spec(spec_path)
    if spec is None:
        return None
    libraries, allowed = spec
    built = read_build_log(os.path.join(ninja_dir, ".ninja_log"))
    deps = read_deps_log(os.path.join(ninja_dir, ".ninja_deps"))
    done: Dict[str, Tuple[str, List[str]]] = {}
    for name, entry in libraries.items():
        files = up_to_date(entry, built, deps, root, allowed,
                           os.path.dirname(os.path.dirname(os.path.abspath(spec_path))))
        if files is not None:
            done[name] = (entry["key"], files)
    return done


def update(spec_path: str, ninja_dir: str, record_path: str, root: str = ".",
           done: Optional[Dict[str, Tuple[str, List[str]]]] = None) -> List[str]:
    """Record (``freshness.update_record``) every library of the spec at
    ``spec_path`` that ninja (its logs in ``ninja_dir``) holds up to date
    (``done``: :func:`current`'s answer, when the caller has it); the
    others keep their entries. Returns the names recorded.

    Raises:
        OSError: the record cannot be written.
    """
    if done is None:
        done = current(spec_path, ninja_dir, root)
    if done:
        stats = freshness.stat_files((p for _, files in done.values() for p in files), root)
        freshness.update_record(record_path, done, stats, root)
    return sorted(done or ())
