"""A whole collection: the top manifest and, depth first, every manifest
it includes (each file once, by real path; diamonds, cycles, missing
files and globs), the cross-file rules, and :func:`load_manifest`.
"""

import gc
import os
from typing import Dict, Iterable, List, Optional, Tuple, Union

from ..diagnostics import Diagnostic, DocPath, shown
from ..yamlloc import MAX_MANIFEST_BYTES, YamlError, decode_yaml_bytes, read_failure, \
    read_yaml_text
from .defaults import _Defaults
from .document import TooManyProblems, _ManifestFile
from .model import Collection, Library, ManifestError
from .paths import KIND_WORDS, PathPolicy
from .reads import Recorder
from .rules import MAX_DIAGNOSTICS_PER_FILE, MAX_INCLUDE_DEPTH

_PathLike = Union[str, "os.PathLike[str]"]


def load_manifest(path: _PathLike, *, root: _PathLike = ".",
                  allow_paths: Union[str, Iterable[_PathLike], None] = ()) -> Collection:
    """Load, validate and model the collection whose top manifest is ``path``.

    ``path`` (relative to ``root`` unless absolute) is used as given in
    diagnostics (``FILE`` of ``FILE:LINE:COL``);
    an included manifest is named by joining the including manifest's name
    with the include entry (``teams/vision/ops.yaml``). Paths written in a
    manifest (sources, include directories, ``.npy`` files, reference ``.py``
    files, ``include:`` entries, ``defaults.includes``, ``allow_paths``) are
    relative to that manifest's own folder; paths in the model are normalised
    POSIX paths relative to ``root``. Files the manifests name must exist
    and be regular files (include directories: directories).

    Trust rule (docs/manifest.md "Trust model"): every path a manifest names must
    resolve, after symlinks, inside ``root`` or inside an allowed folder: one
    listed in the top manifest's ``allow_paths:`` or in ``allow_paths``
    here (a string of paths separated by ``os.pathsep``, as the SConstruct
    option ``ALLOW_PATHS=`` gives, or a sequence of paths; relative ones are
    relative to ``root``).

    ``include:`` entries are relative paths or globs (``*``, ``?``, ``[..]``,
    ``**``); a glob's matches are taken in sorted order and never include the
    including file itself. A manifest reached twice (a diamond: the top
    includes ``teams/*/ops.yaml`` and ``vision`` includes ``../shared``) is
    loaded once, at its first place in depth-first order; it is an error if
    it would inherit different ``defaults:`` at its second place (its
    libraries are built once). Include cycles, missing files, globs that
    match nothing, absolute entries and an entry listed twice are errors at
    the include entry.

    ``defaults:`` (precedence: vector > op > library (``defaults:`` of the
    library for op/vector keys) > the declaring manifest's ``defaults:`` >
    the defaults of the manifests that include it, nearest first > built-in
    values) give ``cflags``, ``includes``, ``multicore``, ``stack_size``,
    ``rtol``, ``atol``; the nearest level that sets a key gives its whole
    value (lists are replaced, not appended).

    Every file is checked completely before the result is returned, and
    every problem of every file is reported (YAML, JSON Schema, semantic
    checks, cross-file rules: a library name used twice anywhere is reported
    at each place), at most :data:`MAX_DIAGNOSTICS_PER_FILE` per file. A
    YAML syntax problem ends the checks of its file only. Limits:
    ARCHITECTURE.md "The generated wrapper" (op schemas, 32-char op names), docs/kernel-api.md
    "Limits" (10 ops, ``builtin``, 8 dims of at most 65535), and the reading
    bounds of docs/manifest.md "Limits of the manifest reader".

    The result's ``reads`` lists every filesystem fact the validation
    depended on (:func:`~.reads.reads_still_hold` re-checks them).

    Raises :class:`ManifestError` with every problem found, sorted by file,
    line and column (never another exception for bad input: a missing file,
    a directory, a FIFO, undecodable bytes or a YAML list each give a
    ``FILE:1:1: $: ...`` diagnostic).
    """
    # The load builds many small objects that all stay alive: the cyclic
    # garbage collector would only rescan them (BENCHMARKS.md).
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_collection(path, root, allow_paths)
    except ManifestError:
        raise
    except Exception as err:  # the last net (each file has its own): a line, not a traceback
        raise ManifestError([Diagnostic(
            os.fspath(path), 1, 1, (), "internal error while loading the collection "
            f"({type(err).__name__}: {shown(str(err))}); please report it")]) from None
    finally:
        if gc_enabled:
            gc.enable()


def _allowed(allow_paths: Union[str, Iterable[_PathLike], None]) -> List[str]:
    if not allow_paths:
        return []
    if isinstance(allow_paths, (str, os.PathLike)):
        return [p for p in os.fspath(allow_paths).split(os.pathsep) if p]
    return [os.fspath(p) for p in allow_paths if os.fspath(p)]


def _load_collection(path, root, allow_paths) -> "Collection":
    loader = _CollectionLoader(os.fspath(root))
    for folder in _allowed(allow_paths):
        loader.policy.allow(loader.io.allow(os.path.join(loader.io.root, folder)))
    top = loader.load(os.fspath(path), _Defaults(), None)
    loader.check_unique_library_names()
    if top is not None and not loader.diagnostics and not loader.libraries:
        loader.diagnostics.append(Diagnostic(
            top.display, 1, 1, (), "the collection has no library (its manifests "
            "give no 'libraries')"))
    if loader.diagnostics or top is None:
        raise ManifestError(loader.diagnostics or [
            Diagnostic(os.fspath(path), 1, 1, (), "the manifest could not be loaded")])
    return Collection(top.model_file,
                      tuple(lib for lib, _, _ in loader.libraries),  # type: ignore[misc]
                      tuple(f.model_file for f in loader.files)).with_reads(loader.io.reads)


class _CollectionLoader:
    """Loads a top manifest and, depth first, every manifest it includes.

    Each file is loaded once (by its real path); ``files`` holds them in load
    order, ``libraries`` every library declared (model or None, its file, its
    document path) in collection order, ``diagnostics`` every problem.
    ``io`` answers (and records) every filesystem question, ``policy`` holds
    the folders paths may resolve into.
    """

    def __init__(self, root: str):
        self.root = root
        self.io = Recorder(root)
        self.policy = PathPolicy(self.io.root_real)
        self.diagnostics: List[Diagnostic] = []
        self.files: List["_ManifestFile"] = []
        self.libraries: List[Tuple[Optional[Library], "_ManifestFile", DocPath]] = []
        self._loaded: Dict[str, Tuple[Optional["_ManifestFile"], str]] = {}
        self._stack: List[Tuple[str, str]] = []

    def read(self, display: str) -> Optional["_ManifestFile"]:
        """Read and parse one manifest file; None after reporting why not."""
        absolute = self.io.absolute(display)
        kind = self.io.kind(absolute)
        try:
            if kind == "missing":
                raise YamlError([Diagnostic(display, 1, 1, (), "cannot read the file: no such "
                                            "file or directory")])
            if kind not in ("regular", "dir", "loop", "unreadable"):
                raise YamlError([Diagnostic(display, 1, 1, (), "cannot read the file: is "
                                            f"{KIND_WORDS[kind]}, not a regular file")])
            try:
                data = self.io.manifest_bytes(absolute)
            except OSError as err:
                message = read_failure(err)
                if "larger than" in message:
                    message += (f", the most a manifest may be ({MAX_MANIFEST_BYTES // 1048576} "
                                "MiB, MAX_MANIFEST_BYTES)")
                raise YamlError([Diagnostic(display, 1, 1, (), message)]) from None
            return read_yaml_text(decode_yaml_bytes(data, display), display)
        except YamlError as err:
            self.diagnostics.extend(err.diagnostics)
            return None

    def load(self, display: str, inherited: "_Defaults",
             via: Optional[Tuple["_ManifestFile", DocPath]]) -> Optional["_ManifestFile"]:
        """Load the manifest ``display`` (inheriting ``inherited``), then its
        includes. ``via`` is the including file and include entry (None for
        the top manifest). Returns the file, or None if it could not be read."""
        real = self.io.real(self.io.absolute(display))
        where = "the top manifest" if via is None else \
            f"included at {via[0].doc.location(via[1])}"
        self._loaded[real] = (None, where)
        doc = self.read(display)
        if doc is None:
            return None
        manifest = _ManifestFile(doc, display, self.root, inherited, io=self.io,
                                 policy=self.policy, top=via is None)
        self._loaded[real] = (manifest, where)
        self.files.append(manifest)
        self._stack.append((real, display))
        entries: List[Tuple[DocPath, List[str]]] = []
        try:
            try:
                if manifest.validate():
                    for k, lib in enumerate(manifest.libraries()):
                        self.libraries.append((lib, manifest, ("libraries", k)))
                    entries = manifest.include_entries()
            except TooManyProblems:
                kept = sorted(manifest.diagnostics,
                              key=lambda d: (d.line, d.column))[:MAX_DIAGNOSTICS_PER_FILE]
                manifest.diagnostics = kept + [Diagnostic(
                    display, 1, 1, (), f"more than {MAX_DIAGNOSTICS_PER_FILE} problems in this "
                    "file: its checks stopped here (MAX_DIAGNOSTICS_PER_FILE)")]
            except (RecursionError, MemoryError) as err:
                manifest.diagnostics.append(Diagnostic(
                    display, 1, 1, (), f"this file is too large or deep to check "
                    f"({type(err).__name__})"))
            except Exception as err:  # the last net: a located line, never a traceback
                manifest.diagnostics.append(Diagnostic(
                    display, 1, 1, (), "internal error while checking this file "
                    f"({type(err).__name__}: {shown(str(err))}); please report it"))
            for entry_path, matches in entries:
                for match in matches:
                    self.include(manifest, entry_path, match)
        finally:
            self._stack.pop()
            self.diagnostics.extend(manifest.diagnostics)
        return manifest

    def include(self, includer: "_ManifestFile", entry_path: DocPath, absolute: str) -> None:
        """Follow one include match of ``includer`` (its entry at ``entry_path``)."""
        real = self.io.real(absolute)
        display = os.path.normpath(os.path.join(
            os.path.dirname(includer.display), os.path.relpath(absolute, includer.folder_abs)))
        stack_reals = [r for r, _ in self._stack]
        if real in stack_reals:
            chain = [d for _, d in self._stack[stack_reals.index(real):]] + [display]
            self.diagnostics.append(includer.doc.diagnostic(
                entry_path, "include cycle: " + " -> ".join(chain)))
            return
        if len(self._stack) >= MAX_INCLUDE_DEPTH:
            self.diagnostics.append(includer.doc.diagnostic(
                entry_path, f"includes nested more than {MAX_INCLUDE_DEPTH} deep"))
            return
        if real in self._loaded:
            first, where = self._loaded[real]
            if first is None:
                return  # could not be read: reported once, where it was first included
            again = first.own_defaults.over(includer.defaults)
            if again != first.defaults:
                self.diagnostics.append(includer.doc.diagnostic(
                    entry_path,
                    f"'{shown(display)}' is already part of the collection ({where}) with other "
                    f"defaults ({'; '.join(first.defaults.differences(again))}); its "
                    "libraries are built once: set these keys in its own defaults"))
            return
        self.load(display, includer.defaults, (includer, entry_path))

    def check_unique_library_names(self) -> None:
        """Report every library name used twice or more in the collection, at
        each of its places (``line N`` in the same file, ``FILE:LINE:COL`` in
        another)."""
        seen: Dict[str, List[Tuple["_ManifestFile", DocPath]]] = {}
        for _, manifest, path in self.libraries:
            lib = manifest.doc.value["libraries"][path[1]]
            name_path = path + ("name",)
            if isinstance(lib, dict) and isinstance(lib.get("name"), str) \
                    and manifest.clean(name_path):
                seen.setdefault(lib["name"], []).append((manifest, name_path))
        for name, places in seen.items():
            if len(places) < 2:
                continue
            for k, (manifest, path) in enumerate(places):
                lines = [str(manifest.line(p)) for j, (f, p) in enumerate(places)
                         if j != k and f is manifest]
                others = [str(f.doc.location(p)) for j, (f, p) in enumerate(places)
                          if j != k and f is not manifest]
                if lines:
                    others.insert(0, ("line " if len(lines) == 1 else "lines ")
                                  + ", ".join(lines))
                self.diagnostics.append(manifest.doc.diagnostic(
                    path, f"duplicate library name '{name}' (also at {', '.join(others)})"))
