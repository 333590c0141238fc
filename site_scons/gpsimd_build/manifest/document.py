"""One manifest file: its JSON Schema stage, its ``defaults:``, its
``allow_paths:`` (top manifest only), its libraries, its ``include:``
entries and the paths it names, resolved against its own folder, held to
the path policy (:mod:`.paths`) and mapped to the root. Ops and vectors
are checked by the :class:`~.vectors._OpChecks` part of the same class,
the files it names by :class:`~.files._FileChecks`.

Every check looks only at the nodes it needs: a schema error in one node
(or a node left out by the YAML reading) skips the checks that need that
node and nothing else, so one run reports every independent problem.
"""

import os
from typing import Any, Dict, List, Optional, Tuple

from ..buildnames import reserved_reason
from ..diagnostics import Diagnostic, DocPath, Location, shown
from ..yamlloc import LocatedDocument
from .defaults import _Defaults
from .model import Library, Op
from .shapes import LibraryShapes
from .paths import KIND_WORDS, PathPolicy, has_magic, split_pattern
from .reads import Recorder
from .rules import MAX_DIAGNOSTICS_PER_FILE, RESERVED_LIBRARY_NAMES
from .commandtext import command_message, command_problem
from .files import OUTSIDE_RULE, _FileChecks
from .schema import (_describe, _nonfinite_tolerances, _schema_diagnostics, _validator,
                     _without_values)
from .vectors import _OpChecks


class TooManyProblems(Exception):
    """A file has more than :data:`MAX_DIAGNOSTICS_PER_FILE` problems: its
    checks stop."""


class _ManifestFile(_OpChecks, _FileChecks):
    """Checks one manifest file and builds its part of the model.

    Owns the file's :class:`LocatedDocument` (diagnostics name this file),
    resolves the paths it contains against its own folder, and maps them to
    ``root``. ``inherited`` are the defaults of the manifests that include
    it; ``defaults`` adds its own ``defaults:``. ``diagnostics`` collects
    every problem. ``io`` is the load's :class:`Recorder` (every filesystem
    question goes through it), ``policy`` the folders paths may resolve
    into; ``top`` is True for the top manifest.
    """

    def __init__(self, doc: LocatedDocument, display: str, root: str,
                 inherited: Optional[_Defaults] = None, *, io: Optional[Recorder] = None,
                 policy: Optional[PathPolicy] = None, top: bool = True):
        self.doc = doc
        self.display = display
        self.io = io or Recorder(root)
        self.policy = policy or PathPolicy(self.io.root_real)
        self.top = top
        self.root_abs = os.path.abspath(root)
        self.folder_abs = os.path.dirname(self.io.absolute(display))
        self.model_file = os.path.relpath(self.io.absolute(display),
                                          self.root_abs).replace(os.sep, "/")
        self.diagnostics: List[Diagnostic] = []
        self._resolved: Dict[str, Tuple[str, str]] = {}
        # how many error paths (schema errors, nodes the YAML reading left out)
        # are at or under each prefix, and under (prefix, child list, item)
        self._errors_under: Dict[DocPath, int] = {}
        self._errors_in_items: Dict[Tuple[DocPath, Any], int] = {}
        for bad in doc.bad_paths:
            self.mark(bad)
        self.inherited = inherited or _Defaults()
        self.own_defaults = _Defaults()
        self.defaults = self.inherited

    # -- helpers ------------------------------------------------------------

    def error(self, path: DocPath, message: str, *, key: bool = False,
              offset: Optional[int] = None) -> None:
        """Record a diagnostic at ``path`` (its key, or a character offset of
        its scalar). Raises :class:`TooManyProblems` past the file's limit."""
        self.diagnostics.append(self.doc.diagnostic(path, message, key=key, offset=offset))
        if len(self.diagnostics) > MAX_DIAGNOSTICS_PER_FILE:
            raise TooManyProblems()

    def line(self, path: DocPath) -> int:
        """The 1-based line of the node at ``path``."""
        return self.doc.span(path).line

    def location(self, path: DocPath, *, key: bool = False) -> Location:
        """A model location: the manifest's root-relative path, not the
        path as given, so the model does not depend on where it was loaded
        from."""
        where = self.doc.location(path, key=key)
        return Location(self.model_file, where.line, where.column)

    def resolve(self, written: str) -> Tuple[str, str]:
        """(absolute path, normalised POSIX path relative to the root) of a
        path written in this manifest (relative to its folder)."""
        found = self._resolved.get(written)
        if found is None:
            absolute = os.path.normpath(os.path.join(self.folder_abs, written))
            found = (absolute, os.path.relpath(absolute, self.root_abs).replace(os.sep, "/"))
            self._resolved[written] = found
        return found

    def mark(self, path: DocPath) -> None:
        """Record an error at ``path``: checks that read it, or a node above
        it, are skipped (:meth:`clean`)."""
        path = tuple(path)
        under, items = self._errors_under, self._errors_in_items
        for n in range(len(path) + 1):
            prefix = path[:n]
            under[prefix] = under.get(prefix, 0) + 1
            if len(path) > n + 1:
                key = (prefix, path[n])
                items[key] = items.get(key, 0) + 1

    def clean(self, prefix: DocPath, *, except_items_of: Optional[str] = None) -> bool:
        """No schema error (nor node left out by the YAML reading) at or under
        ``prefix`` (ignoring errors inside the items of the child list
        ``except_items_of``, checked separately). Constant time."""
        prefix = tuple(prefix)
        count = self._errors_under.get(prefix, 0)
        if count and except_items_of is not None:
            count -= self._errors_in_items.get((prefix, except_items_of), 0)
        return count == 0

    def usable(self, parent: Any, key: Any, path: DocPath, kind: type) -> bool:
        """``parent[key]`` exists, is a ``kind`` and has no error at or under it."""
        if isinstance(parent, dict):
            present = key in parent
        else:
            present = isinstance(parent, list) and isinstance(key, int) and key < len(parent)
        return present and isinstance(parent[key], kind) and not isinstance(parent[key], bool) \
            and self.clean(path)

    # -- stages -------------------------------------------------------------

    def validate(self) -> bool:
        """The YAML node problems, the JSON Schema stage, ``allow_paths:`` and
        this file's ``defaults:``. False when the document is not a mapping
        (nothing more can be checked)."""
        value = self.doc.value
        for problem in self.doc.problems:
            self.diagnostics.append(problem)
        if not isinstance(value, dict):
            what = "a string" if isinstance(value, str) else _describe(value)
            self.error((), "a manifest is a mapping with the keys 'version' and 'libraries', "
                           f"got {what}")
            return False
        left_out = tuple(self.doc.bad_paths)
        view, values_problems = _without_values(value)
        values_problems += _nonfinite_tolerances(value)
        for path, message in values_problems:
            if not any(path[:len(bad)] == bad for bad in left_out):
                self.mark(path)
                self.error(path, message)
        for err in _validator().iter_errors(view):
            path = tuple(err.absolute_path)
            if any(path[:len(bad)] == bad for bad in left_out):
                continue  # the YAML reading reported this node already
            self.mark(path)
            for diag in _schema_diagnostics(self.doc, err):
                self.diagnostics.append(diag)
            if len(self.diagnostics) > MAX_DIAGNOSTICS_PER_FILE:
                raise TooManyProblems()
        self.allowed_paths(value)
        self.own_defaults = self.defaults_at(("defaults",), value.get("defaults"))
        self.defaults = self.own_defaults.over(self.inherited)
        return True

    def allowed_paths(self, value: dict) -> None:
        """``allow_paths:``: outside folders the collection may name (the
        top manifest only)."""
        if "allow_paths" not in value:
            return
        if not self.top:
            self.error(("allow_paths",), "allow_paths is accepted in the top manifest only "
                       "(an included manifest cannot widen what the collection may read): "
                       "list the folder there, or pass ALLOW_PATHS=", key=True)
            return
        entries = value["allow_paths"]
        if not self.usable(value, "allow_paths", ("allow_paths",), list):
            return
        for k, written in enumerate(entries):
            absolute, relative = self.resolve(written)
            kind = self.io.kind(absolute)
            if kind != "dir":
                self.error(("allow_paths", k), f"allow_paths entry '{shown(written)}' is "
                           f"{'not found' if kind == 'missing' else KIND_WORDS[kind]}; it must "
                           f"be a folder (resolved to {shown(relative)})")
                continue
            self.policy.allow(self.io.allow(absolute))

    def defaults_at(self, path: DocPath, given: Any) -> _Defaults:
        """The valid keys of a ``defaults:`` mapping (manifest or library level)."""
        if not isinstance(given, dict):
            return _Defaults()
        out: Dict[str, Any] = {}
        for key in ("cflags", "multicore", "stack_size", "rtol", "atol"):
            if key in given and self.clean(path + (key,)):
                value = given[key]
                if key == "cflags" and not self.flags_safe(path + (key,), value):
                    continue
                out[key] = tuple(value) if key == "cflags" else \
                    float(value) if key in ("rtol", "atol") else value
        if isinstance(given.get("explore"), dict) and self.clean(path + ("explore",)):
            out["explore"] = dict(given["explore"])
        if "includes" in given and self.usable(given, "includes", path + ("includes",), list):
            out["includes"] = tuple(self.existing_paths(
                path + ("includes",), given["includes"], "include directory", True))
        return _Defaults(**out)

    def flags_safe(self, path: DocPath, flags: list) -> bool:
        """Whether every compiler flag of ``flags`` reaches the compile
        meaning what it says (:mod:`.commandtext`); reports each that would not."""
        return all([self.command_safe(path + (k,), flag, "compiler flag", flag=True)
                    for k, flag in enumerate(flags) if isinstance(flag, str)])

    def libraries(self) -> List[Optional[Library]]:
        """Check every library of this file and its ops; one model (or None) each."""
        libraries = self.doc.value.get("libraries")
        if not isinstance(libraries, list):
            return []
        return [self.library(("libraries", i), lib) for i, lib in enumerate(libraries)]

    def include_entries(self) -> List[Tuple[DocPath, List[str]]]:
        """Each ``include:`` entry with the absolute paths of the files it
        names (a glob's matches sorted, without this file); reports absolute
        entries, paths outside the project, missing files, directories and
        special files, globs without a match or with too many, and an entry
        listed twice."""
        entries = self.doc.value.get("include")
        if not isinstance(entries, list):
            return []
        out: List[Tuple[DocPath, List[str]]] = []
        first: Dict[str, int] = {}
        me = self.io.real(self.io.absolute(self.display))
        for k, written in enumerate(entries):
            path = ("include", k)
            if not self.usable(entries, k, path, str):
                continue
            if os.path.isabs(written) or written.startswith(("/", "\\")):
                self.error(path, f"include '{shown(written)}' is an absolute path; write it "
                                 "relative to this manifest's folder so the tree can move")
                continue
            absolute, relative = self.resolve(written)
            # (a name that exists is that file, '[1]' and all; a glob only
            # when nothing has that name)
            pattern = has_magic(written) and not (
                self.policy.inside(self.io.real(absolute)) and self.io.kind(absolute) != "missing")
            # (a manifest's folder reaches commands, explore's; its file name
            # only build.ninja's dependencies, where '*?[' mean themselves)
            folder = os.path.dirname(relative)
            if not self.command_safe(path, written, "include", glob=True) or (
                    not pattern and folder and not self.command_safe(
                        path, written, "include", relative=folder + "/")):
                continue
            if pattern:
                matches = self.glob_matches(path, written, relative, me)
                if matches:
                    out.append((path, matches))
                continue
            if relative in first:
                self.error(path, f"include '{shown(written)}' is listed twice (first at line "
                                 f"{first[relative]})")
                continue
            first[relative] = self.line(path)
            if not self.inside(path, "include", written, absolute):
                continue
            kind = self.io.kind(absolute)
            where = f"(resolved to {shown(relative)})"
            if kind == "dir":
                self.error(path, f"include '{shown(written)}' is a directory {where}; "
                                 "name the manifest file")
            elif kind == "missing":
                self.error(path, f"included manifest '{shown(written)}' not found {where}")
            elif kind != "regular":
                self.error(path, f"include '{shown(written)}' is {KIND_WORDS[kind]}, not a "
                                 f"regular file {where}")
            else:
                out.append((path, [absolute]))
        return out

    def glob_matches(self, path: DocPath, written: str, relative: str, me: str) -> List[str]:
        """The regular files an include pattern matches (sorted, without this
        file), or [] after reporting."""
        literal, rest = split_pattern(written)
        base = os.path.normpath(os.path.join(self.folder_abs, *literal))
        if not self.inside(path, "include pattern", written, base):
            return []
        found, problem = self.io.glob(base, tuple(rest), self.policy)
        if problem is not None:
            self.error(path, f"include pattern '{shown(written)}' " + (
                "matches more than the most a pattern may match" if problem == "matches" else
                "walks more directory entries than the includes of a collection may "
                "examine") + " (MAX_GLOB_MATCHES, MAX_GLOB_ENTRIES in docs/manifest.md); narrow it")
            return []
        matches = []
        for absolute, kind in found:
            if kind != "regular":
                self.error(path, f"include pattern '{shown(written)}' matches "
                                 f"{shown(self.io.rel(absolute))}, which is {KIND_WORDS[kind]}, "
                                 "not a regular file")
                continue
            real = self.io.real(absolute)
            if real == me:
                continue
            match = self.io.rel(absolute)
            problem = command_problem(os.path.dirname(match) + "/", path=True) or \
                command_problem(os.path.basename(match), path=False, glob=True)
            if problem is not None:
                self.error(path, command_message(f"include pattern '{shown(written)}' matches",
                                                 match, problem))
                continue
            if not self.policy.inside(real):
                self.error(path, f"include pattern '{shown(written)}' matches "
                                 f"{shown(self.io.rel(absolute))}, which is outside the project "
                                 f"(resolved to {shown(self.io.rel(real))}): {OUTSIDE_RULE}")
                continue
            matches.append(os.path.normpath(absolute))
        matches.sort(key=lambda p: os.path.relpath(p, self.folder_abs).replace(os.sep, "/"))
        if not matches and not found:
            self.error(path, f"include pattern '{shown(written)}' matches no manifest "
                             f"(resolved to {shown(relative)})")
        return matches

    def library(self, path: DocPath, lib: Any) -> Optional[Library]:
        """Check one library and its ops; its model (every default applied), or None."""
        if not isinstance(lib, dict):
            return None
        name_ok = self.usable(lib, "name", path + ("name",), str)
        name = lib["name"] if name_ok else "?"
        if name_ok and name in RESERVED_LIBRARY_NAMES:
            self.error(path + ("name",),
                       f"library name '{shown(name)}' is reserved (docs/kernel-api.md, Limits)")
        elif name_ok and reserved_reason(name):
            self.error(path + ("name",), f"library name {reserved_reason(name)}: rename the "
                                         "library (docs/manifest.md \"Names and strings\")")
        sources: List[str] = []
        if self.usable(lib, "sources", path + ("sources",), list):
            sources = self.existing_paths(path + ("sources",), lib["sources"], "source file",
                                          False)
            self.object_collisions(path + ("sources",), lib["sources"], "obj", True)
        shape_sources: List[str] = []
        shapes: Optional[LibraryShapes] = None
        if "shape_sources" in lib and self.usable(lib, "shape_sources", path + ("shape_sources",),
                                                  list):
            shape_sources = self.existing_paths(path + ("shape_sources",), lib["shape_sources"],
                                                "shape source", False)
            self.object_collisions(path + ("shape_sources",), lib["shape_sources"],
                                   "shapes/obj", False)
            for k, item in enumerate(lib["shape_sources"]):
                if isinstance(item, str) and self.resolve(item)[1] in sources:
                    self.error(path + ("shape_sources", k),
                               f"shape source '{shown(item)}' is also in sources: a shape source "
                               "is compiled for the host only, never into a core object; list "
                               "it in one of the two")
            shapes = self.library_shapes(path + ("shape_sources",), lib["shape_sources"],
                                         shape_sources)
        includes: List[str] = list(self.defaults.includes or ())
        if "includes" in lib and self.usable(lib, "includes", path + ("includes",), list):
            includes = self.existing_paths(path + ("includes",), lib["includes"],
                                           "include directory", True)
        defaults = self.defaults_at(path + ("defaults",), lib.get("defaults")).over(self.defaults)
        ops_value = lib.get("ops")
        ops: List[Optional[Op]] = []
        if isinstance(ops_value, list):
            names: Dict[str, DocPath] = {}
            kernels: Dict[str, DocPath] = {}
            for j, op in enumerate(ops_value):
                ops.append(self.op(path + ("ops", j), op, name, names, defaults, shapes,
                                   kernels))
        if "cflags" in lib and self.usable(lib, "cflags", path + ("cflags",), list):
            self.flags_safe(path + ("cflags",), lib["cflags"])
        if not self.clean(path, except_items_of="ops"):
            return None
        multicore = lib.get("multicore", self.defaults.multicore)
        cflags = lib["cflags"] if "cflags" in lib else (self.defaults.cflags or ())
        namespace = shapes.namespace if shapes is not None else None
        return Library(
            name=name, multicore=bool(multicore),
            sources=tuple(sources), includes=tuple(includes),
            cflags=tuple(cflags), ops=tuple(ops),  # type: ignore[arg-type]
            location=self.location(path), manifest=self.model_file,
            shape_sources=tuple(shape_sources),
            namespace=namespace[0] if namespace else None)

    def library_shapes(self, path: DocPath, written: list,
                       relative: List[str]) -> Optional[LibraryShapes]:
        """Read the library's shape sources that exist (``relative``, in
        order); a file that cannot be read is reported at its entry."""
        files = []
        for k, item in enumerate(written):
            if not isinstance(item, str):
                continue
            absolute, rel = self.resolve(item)
            if rel in relative and self.io.kind(absolute) == "regular":
                files.append((rel, absolute, k))
        shapes = LibraryShapes([(rel, absolute) for rel, absolute, _ in files], self.io)
        for rel, _, k in files:
            if rel in shapes.unreadable:
                self.error(path + (k,), f"shape source '{shown(written[k])}' cannot be read "
                                        f"({shown(shapes.unreadable[rel])})")
        return shapes

    def existing_paths(self, path: DocPath, written: list, what: str, directory: bool) -> List[str]:
        """Resolve each path of a list; report those outside the project,
        missing or of the wrong kind, and duplicates."""
        out: List[str] = []
        first: Dict[str, int] = {}
        for k, item in enumerate(written):
            if not self.usable(written, k, path + (k,), str):
                continue
            absolute, relative = self.resolve(item)
            if relative in first:
                self.error(path + (k,), f"{what} '{shown(item)}' is listed twice "
                                        f"(first at line {first[relative]})")
                continue
            first[relative] = self.line(path + (k,))
            self.named_path(path + (k,), item, what, "dir" if directory else "regular")
            out.append(relative)
        return out

