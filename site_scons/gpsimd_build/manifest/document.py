"""One manifest file: its JSON Schema stage, its ``defaults:``, its
libraries, its ``include:`` entries and the paths it names, resolved
against its own folder and mapped to the root. Ops and vectors are checked
by the :class:`~.vectors._OpChecks` part of the same class.
"""

import difflib
import glob
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from ..diagnostics import Diagnostic, DocPath, Location
from ..yamlloc import LocatedDocument
from .defaults import _Defaults
from .model import Library, Op, Reference
from .probes import _ITEMSIZE, _NPY_DTYPES, _read_npy_header, _top_level_names
from .rules import DTYPES, MAX_DIM_SIZE, MAX_DIMS, RESERVED_LIBRARY_NAMES
from .schema import _describe, _schema_diagnostics, _validator
from .vectors import _OpChecks

_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_GLOB_RE = re.compile(r"[*?\[]")


class _ManifestFile(_OpChecks):
    """Checks one manifest file and builds its part of the model.

    Owns the file's :class:`LocatedDocument` (diagnostics name this file),
    resolves the paths it contains against its own folder, and maps them to
    ``root``. ``inherited`` are the defaults of the manifests that include
    it; ``defaults`` adds its own ``defaults:``. ``diagnostics`` collects
    every problem.
    """

    def __init__(self, doc: LocatedDocument, display: str, root: str,
                 inherited: Optional[_Defaults] = None):
        self.doc = doc
        self.display = display
        self.root_abs = os.path.abspath(root)
        self.folder_abs = os.path.dirname(os.path.abspath(display))
        self.model_file = os.path.relpath(os.path.abspath(display),
                                          self.root_abs).replace(os.sep, "/")
        self.diagnostics: List[Diagnostic] = []
        self._schema_error_paths: List[DocPath] = []
        self.inherited = inherited or _Defaults()
        self.own_defaults = _Defaults()
        self.defaults = self.inherited

    # -- helpers ------------------------------------------------------------

    def error(self, path: DocPath, message: str, *, key: bool = False,
              offset: Optional[int] = None) -> None:
        """Record a diagnostic at ``path`` (its key, or a character offset of its scalar)."""
        self.diagnostics.append(self.doc.diagnostic(path, message, key=key, offset=offset))

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
        absolute = os.path.normpath(os.path.join(self.folder_abs, written))
        relative = os.path.relpath(absolute, self.root_abs).replace(os.sep, "/")
        return absolute, relative

    def clean(self, prefix: DocPath, *, except_items_of: Optional[str] = None) -> bool:
        """No schema error at or under ``prefix`` (ignoring errors inside the
        items of the child list ``except_items_of``, checked separately)."""
        n = len(prefix)
        for p in self._schema_error_paths:
            if p[:n] != prefix:
                continue
            if except_items_of is not None and len(p) > n + 1 and p[n] == except_items_of:
                continue
            return False
        return True

    # -- stages -------------------------------------------------------------

    def validate(self) -> bool:
        """The JSON Schema stage and this file's ``defaults:``. False when the
        document is not a mapping (nothing more can be checked)."""
        value = self.doc.value
        if not isinstance(value, dict):
            self.error((), "a manifest is a mapping with the keys 'version' and 'libraries', "
                           f"got {_describe(value)}")
            return False
        for err in _validator().iter_errors(value):
            self._schema_error_paths.append(tuple(err.absolute_path))
            self.diagnostics.extend(_schema_diagnostics(self.doc, err))
        self.own_defaults = self.defaults_at(("defaults",), value.get("defaults"))
        self.defaults = self.own_defaults.over(self.inherited)
        return True

    def defaults_at(self, path: DocPath, given: Any) -> _Defaults:
        """The valid keys of a ``defaults:`` mapping (manifest or library level)."""
        if not isinstance(given, dict):
            return _Defaults()
        out: Dict[str, Any] = {}
        for key in ("cflags", "multicore", "stack_size", "rtol", "atol"):
            if key in given and self.clean(path + (key,)):
                value = given[key]
                out[key] = tuple(value) if key == "cflags" else \
                    float(value) if key in ("rtol", "atol") else value
        if "includes" in given and self.clean(path + ("includes",)):
            out["includes"] = tuple(self.existing_paths(
                path + ("includes",), given["includes"], "include directory", True))
        return _Defaults(**out)

    def libraries(self) -> List[Optional[Library]]:
        """Check every library of this file and its ops; one model (or None) each."""
        libraries = self.doc.value.get("libraries")
        if not isinstance(libraries, list):
            return []
        return [self.library(("libraries", i), lib) for i, lib in enumerate(libraries)]

    def include_entries(self) -> List[Tuple[DocPath, List[str]]]:
        """Each ``include:`` entry with the absolute paths of the files it
        names (a glob's matches sorted, without this file); reports absolute
        entries, missing files, directories, globs without a match and an
        entry listed twice."""
        entries = self.doc.value.get("include")
        if not isinstance(entries, list) or not self.clean(("include",)):
            return []
        out: List[Tuple[DocPath, List[str]]] = []
        first: Dict[str, int] = {}
        me = os.path.realpath(self.display)
        for k, written in enumerate(entries):
            path = ("include", k)
            if os.path.isabs(written) or written.startswith(("/", "\\")):
                self.error(path, f"include '{written}' is an absolute path; write it relative "
                                 "to this manifest's folder so the tree can move")
                continue
            absolute, relative = self.resolve(written)
            if _GLOB_RE.search(written):
                pattern = os.path.join(glob.escape(self.folder_abs), written)
                matches = [os.path.normpath(p) for p in glob.glob(pattern, recursive=True)
                           if os.path.isfile(p) and os.path.realpath(p) != me]
                matches.sort(key=lambda p: os.path.relpath(p, self.folder_abs)
                             .replace(os.sep, "/"))
                if not matches:
                    self.error(path, f"include pattern '{written}' matches no manifest "
                                     f"(resolved to {relative})")
                    continue
                out.append((path, matches))
                continue
            if relative in first:
                self.error(path, f"include '{written}' is listed twice (first at line "
                                 f"{first[relative]})")
                continue
            first[relative] = self.line(path)
            if os.path.isdir(absolute):
                self.error(path, f"include '{written}' is a directory (resolved to {relative}); "
                                 "name the manifest file")
                continue
            if not os.path.isfile(absolute):
                self.error(path, f"included manifest '{written}' not found "
                                 f"(resolved to {relative})")
                continue
            out.append((path, [absolute]))
        return out

    def library(self, path: DocPath, lib: Any) -> Optional[Library]:
        """Check one library and its ops; its model (every default applied), or None."""
        if not isinstance(lib, dict):
            return None
        name = lib.get("name") if isinstance(lib.get("name"), str) else "?"
        lib_ok = self.clean(path, except_items_of="ops")
        sources: List[str] = []
        includes: List[str] = []
        if lib_ok:
            if name in RESERVED_LIBRARY_NAMES:
                self.error(path + ("name",),
                           f"library name '{name}' is reserved (device-api.md Limits)")
            sources = self.existing_paths(path + ("sources",), lib["sources"], "source file", False)
            if "includes" in lib:
                includes = self.existing_paths(path + ("includes",), lib["includes"],
                                               "include directory", True)
            else:
                includes = list(self.defaults.includes or ())
        defaults = self.defaults_at(path + ("defaults",), lib.get("defaults")).over(self.defaults)
        ops_value = lib.get("ops")
        ops: List[Optional[Op]] = []
        if isinstance(ops_value, list):
            names: Dict[str, DocPath] = {}
            for j, op in enumerate(ops_value):
                ops.append(self.op(path + ("ops", j), op, name, names, defaults))
        if not lib_ok:
            return None
        multicore = lib.get("multicore", self.defaults.multicore)
        cflags = lib["cflags"] if "cflags" in lib else (self.defaults.cflags or ())
        return Library(
            name=name, multicore=bool(multicore),
            sources=tuple(sources), includes=tuple(includes),
            cflags=tuple(cflags), ops=tuple(ops),  # type: ignore[arg-type]
            location=self.location(path), manifest=self.model_file)

    def existing_paths(self, path: DocPath, written: list, what: str, directory: bool) -> List[str]:
        """Resolve each path of a list; report missing ones and duplicates."""
        out: List[str] = []
        first: Dict[str, int] = {}
        for k, item in enumerate(written):
            absolute, relative = self.resolve(item)
            if relative in first:
                self.error(path + (k,), f"{what} '{item}' is listed twice "
                                        f"(first at line {first[relative]})")
                continue
            first[relative] = self.line(path + (k,))
            exists = os.path.isdir(absolute) if directory else os.path.isfile(absolute)
            if not exists:
                if os.path.exists(absolute):
                    kind = "a file" if directory else "a directory"
                    self.error(path + (k,), f"{what} '{item}' is {kind} (resolved to {relative})")
                else:
                    self.error(path + (k,), f"{what} '{item}' not found (resolved to {relative})")
            out.append(relative)
        return out

    def reference(self, path: DocPath, text: str) -> Optional[Reference]:
        """Parse 'path/file.py:function' or 'dotted.module:function'."""
        target, _, function = text.rpartition(":")
        if target.endswith(".py") or "/" in target or "\\" in target:
            if not target.endswith(".py"):
                self.error(path, f"reference file '{target}' is not a .py file")
                return None
            absolute, relative = self.resolve(target)
            if not os.path.isfile(absolute):
                self.error(path, f"reference file '{target}' not found (resolved to {relative})")
                return None
            names = _top_level_names(absolute)
            if isinstance(names, str):
                self.error(path, f"reference file '{target}' {names}")
                return None
            if names is not None and function not in names:
                close = difflib.get_close_matches(function, sorted(names), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.error(path, f"reference file '{target}' defines no '{function}'{hint}")
                return None
            return Reference(file=relative, module=None, function=function)
        if not _MODULE_RE.fullmatch(target):
            self.error(path, f"'{target}' is neither a .py file nor a dotted module name")
            return None
        return Reference(file=None, module=target, function=function)

    def npy(self, path: DocPath, written: str,
            tensor: bool) -> Optional[Tuple[str, str, Tuple[int, ...]]]:
        """Check a .npy file: (root-relative path, numpy descr, shape), or
        None after reporting. A ``tensor`` input's array must also respect
        the device's shape limits."""
        absolute, relative = self.resolve(written)
        if not os.path.isfile(absolute):
            self.error(path, f".npy file '{written}' not found (resolved to {relative})")
            return None
        try:
            descr, shape = _read_npy_header(absolute)
        except (OSError, ValueError) as err:
            self.error(path, f"'{written}' is not a readable .npy file ({err})")
            return None
        if tensor and len(shape) > MAX_DIMS:
            self.error(path, f"the array in '{written}' has {len(shape)} dimensions; a tensor "
                             f"has at most {MAX_DIMS} (device-api.md Limits)")
            return None
        if tensor and any(d > MAX_DIM_SIZE for d in shape):
            self.error(path, f"the array in '{written}' has shape {list(shape)}; each dimension "
                             f"is at most {MAX_DIM_SIZE} (device-api.md Limits)")
            return None
        return relative, descr, shape

    def npy_dtype(self, path: DocPath, written: str, descr: str,
                  given: Optional[str]) -> Optional[str]:
        """The dtype of a tensor input read from .npy: the file's, checked
        against ``given`` (the input's ``dtype``) if both are known; the
        given one when the file holds raw bytes (``<V2``: how numpy saves
        ml_dtypes' bfloat16 and fp8). None after reporting."""
        known = _NPY_DTYPES.get(descr)
        raw = re.fullmatch(r"[<>|=]V([0-9]+)", descr)
        if known is not None:
            if given is not None and given != known:
                self.error(path + ("dtype",), f"dtype '{given}' does not match the .npy "
                                              f"file '{written}', which holds {known}")
                return None
            return known
        if raw is not None:
            size = int(raw.group(1))
            if given is None:
                self.error(path + ("npy",), f"'{written}' holds raw {size}-byte elements "
                                            f"({descr!r}, as numpy saves ml_dtypes types): "
                                            "give the input's dtype")
                return None
            if _ITEMSIZE[given] != size:
                self.error(path + ("dtype",), f"dtype '{given}' has {_ITEMSIZE[given]}-byte "
                                              f"elements but '{written}' holds {size}-byte ones")
                return None
            return given
        self.error(path + ("npy",), f"the array in '{written}' has numpy dtype {descr!r}, "
                                    f"which is not a device dtype ({', '.join(DTYPES)})")
        return None
