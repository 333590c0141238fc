"""A whole collection: the top manifest and, depth first, every manifest
it includes (each file once, by real path; diamonds, cycles, missing
files and globs), the cross-file rules, and :func:`load_manifest`.
"""

import gc
import os
from typing import Dict, List, Optional, Tuple, Union

from ..diagnostics import Diagnostic, DocPath
from ..yamlloc import YamlError, load_yaml_file
from .defaults import _Defaults
from .document import _ManifestFile
from .model import Collection, Library, ManifestError
from .rules import MAX_INCLUDE_DEPTH

def load_manifest(path: Union[str, "os.PathLike[str]"], *, root: Union[str, "os.PathLike[str]"] = ".") -> Collection:
    """Load, validate and model the collection whose top manifest is ``path``.

    ``path`` is used as given in diagnostics (``FILE`` of ``FILE:LINE:COL``);
    an included manifest is named by joining the including manifest's name
    with the include entry (``teams/vision/ops.yaml``). Paths written in a
    manifest (sources, include directories, ``.npy`` files, reference ``.py``
    files, ``include:`` entries, ``defaults.includes``) are relative to that
    manifest's own folder; paths in the model are normalised POSIX paths
    relative to ``root``. Files the manifests name must exist.

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
    at each place). Limits: build-front-end.txt §2-§4 (op schemas, 32-char
    op names) and device-api.md "Limits" (10 ops, ``builtin``, 8 dims of
    at most 65535).

    Raises :class:`ManifestError` with every problem found, sorted by file,
    line and column (never another exception for bad input: a missing file,
    a directory, undecodable bytes or a YAML list each give a
    ``FILE:1:1: $: ...`` diagnostic).
    """
    # The load builds many small objects that all stay alive: the cyclic
    # garbage collector would only rescan them (BENCHMARKS.md).
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_collection(path, root)
    finally:
        if gc_enabled:
            gc.enable()


def _load_collection(path, root) -> "Collection":
    loader = _CollectionLoader(os.fspath(root))
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
                      tuple(f.model_file for f in loader.files))


class _CollectionLoader:
    """Loads a top manifest and, depth first, every manifest it includes.

    Each file is loaded once (by its real path); ``files`` holds them in load
    order, ``libraries`` every library declared (model or None, its file, its
    document path) in collection order, ``diagnostics`` every problem.
    """

    def __init__(self, root: str):
        self.root = root
        self.diagnostics: List[Diagnostic] = []
        self.files: List["_ManifestFile"] = []
        self.libraries: List[Tuple[Optional[Library], "_ManifestFile", DocPath]] = []
        self._loaded: Dict[str, Tuple[Optional["_ManifestFile"], str]] = {}
        self._stack: List[Tuple[str, str]] = []

    def load(self, display: str, inherited: "_Defaults",
             via: Optional[Tuple["_ManifestFile", DocPath]]) -> Optional["_ManifestFile"]:
        """Load the manifest ``display`` (inheriting ``inherited``), then its
        includes. ``via`` is the including file and include entry (None for
        the top manifest). Returns the file, or None if it could not be read."""
        real = os.path.realpath(display)
        where = "the top manifest" if via is None else \
            f"included at {via[0].doc.location(via[1])}"
        self._loaded[real] = (None, where)
        try:
            doc = load_yaml_file(display)
        except YamlError as err:
            self.diagnostics.extend(err.diagnostics)
            return None
        manifest = _ManifestFile(doc, display, self.root, inherited)
        self._loaded[real] = (manifest, where)
        self.files.append(manifest)
        self._stack.append((real, display))
        try:
            if manifest.validate():
                for k, lib in enumerate(manifest.libraries()):
                    self.libraries.append((lib, manifest, ("libraries", k)))
                for entry_path, matches in manifest.include_entries():
                    for match in matches:
                        self.include(manifest, entry_path, match)
        finally:
            self._stack.pop()
            self.diagnostics.extend(manifest.diagnostics)
        return manifest

    def include(self, includer: "_ManifestFile", entry_path: DocPath, absolute: str) -> None:
        """Follow one include match of ``includer`` (its entry at ``entry_path``)."""
        real = os.path.realpath(absolute)
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
                    f"'{display}' is already part of the collection ({where}) with other "
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
