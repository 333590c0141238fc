"""The files a manifest names, checked without running them: the trust
rule and the kind of every path (:meth:`_FileChecks.named_path`), references
(a ``.py`` file's top-level names, and the local modules a reference
imports: :mod:`.imports`) and ``.npy`` files (their header,
dtype and shape). A part of :class:`~.document._ManifestFile` (it relies on
its ``error``, ``resolve``, ``io`` and ``policy``).
"""

import difflib
import re
from typing import Optional, Tuple

from gpsimd_device.limits import shape_problem

from ..buildnames import WRAPPER_STEM, source_stem
from ..diagnostics import DocPath, shown
from .commandtext import command_message, command_problem
from .imports import local_modules
from .model import Reference
from .paths import KIND_WORDS
from .probes import _ITEMSIZE, _NPY_DTYPES
from .rules import DTYPES

_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

#: The rule a path outside the project breaks (docs/manifest.md "Trust model").
OUTSIDE_RULE = ("a manifest names only paths inside the project root, or inside a folder "
                "listed in the top manifest's allow_paths or in ALLOW_PATHS=")


class _FileChecks:
    """The file checks of a manifest file (mixed into
    :class:`~.document._ManifestFile`)."""

    def inside(self, path: DocPath, what: str, written: str, absolute: str) -> bool:
        """Whether ``absolute`` resolves inside the allowed folders; reports
        it (at ``path``) when not, without saying whether it exists."""
        real = self.io.real(absolute)
        if self.policy.inside(real):
            return True
        self.error(path, f"{what} '{shown(written)}' is outside the project (resolved to "
                         f"{shown(self.io.rel(real))}): {OUTSIDE_RULE}")
        return False

    def command_safe(self, path: DocPath, written: str, what: str, *, relative: Optional[str] = None,
                     glob: bool = False, flag: bool = False) -> bool:
        """Whether the path (root-relative: ``relative``) or flag ``written``
        reaches a command meaning what it says (:mod:`.commandtext`);
        reports the first character that would not, at that character."""
        text = written if relative is None else relative
        problem = command_problem(text, path=relative is not None, glob=glob, flag=flag)
        if problem is None:
            return True
        at = written.find(text[problem[0]])
        self.error(path, command_message(what, written, problem), offset=at if at >= 0 else None)
        return False

    def named_path(self, path: DocPath, written: str, what: str, want: str) -> Optional[str]:
        """Check a path written in this manifest: one a command reads as
        written, inside the allowed folders and of the kind ``want``
        (``"regular"`` or ``"dir"``). Its root-relative path, or None after
        reporting."""
        absolute, relative = self.resolve(written)
        if not self.command_safe(path, written, what, relative=relative):
            return None
        if not self.inside(path, what, written, absolute):
            return None
        kind = self.io.kind(absolute)
        if kind == want:
            return relative
        where = f"(resolved to {shown(relative)})"
        if kind == "missing":
            self.error(path, f"{what} '{shown(written)}' not found {where}")
        elif kind in ("regular", "dir"):
            self.error(path, f"{what} '{shown(written)}' is "
                             f"{'a file' if kind == 'regular' else 'a directory'} {where}")
        else:
            noun = "a directory" if want == "dir" else "a regular file"
            self.error(path, f"{what} '{shown(written)}' is {KIND_WORDS[kind]}, not {noun} "
                             f"{where}")
        return None

    def object_collisions(self, path: DocPath, written: list, folder: str,
                          generated: bool) -> None:
        """Report each source of the list ``written`` (at ``path``) whose
        object (``<folder>/<stem>.o``, :func:`~gpsimd_build.buildnames.source_stem`)
        is another's of the list (``k/r.cpp`` and ``k/r.cc``; ``../x/r.cpp``
        and ``outside/x/r.cpp``) or, with ``generated``, the generated
        wrapper's (a ``wrapper.cpp`` at the root): SCons would see two ways
        to build one file."""
        seen: dict = {WRAPPER_STEM: None} if generated else {}
        for k, item in enumerate(written):
            if not isinstance(item, str) or not self.clean(path + (k,)):
                continue
            relative = self.resolve(item)[1]
            stem = source_stem(relative)
            if stem not in seen:
                seen[stem] = (item, relative, self.line(path + (k,)))
                continue
            first = seen[stem]
            if first is None:
                self.error(path + (k,), f"source '{shown(item)}' compiles to {folder}/{stem}.o, "
                                        "the object of the library's generated wrapper "
                                        f"({WRAPPER_STEM}.cpp): rename the source")
            elif first[1] != relative:   # (the same file twice: reported as listed twice)
                self.error(path + (k,), f"source '{shown(item)}' compiles to {folder}/"
                                        f"{shown(stem)}.o, as '{shown(first[0])}' (line "
                                        f"{first[2]}) does: both would be one object; rename "
                                        "one of them")

    def reference(self, path: DocPath, text: str) -> Optional[Reference]:
        """Parse 'path/file.py:function' or 'dotted.module:function'."""
        target, _, function = text.rpartition(":")
        if target.endswith(".py") or "/" in target or "\\" in target:
            if not target.endswith(".py"):
                self.error(path, f"reference file '{shown(target)}' is not a .py file")
                return None
            relative = self.named_path(path, target, "reference file", "regular")
            if relative is None:
                return None
            names = self.io.reference_names(self.resolve(target)[0])
            if isinstance(names, str):
                self.error(path, f"reference file '{shown(target)}' {names}")
                return None
            if names is not None and function not in names:
                close = difflib.get_close_matches(function, sorted(names), n=1) \
                    if len(function) <= 64 else []
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.error(path, f"reference file '{shown(target)}' defines no "
                                 f"'{shown(function)}'{hint}")
                return None
            found = self.imported(path, f"reference file '{shown(target)}'",
                                  file=self.resolve(target)[0])
            return None if found is None else \
                Reference(file=relative, module=None, function=function, imports=found)
        if not _MODULE_RE.fullmatch(target):
            self.error(path, f"'{shown(target)}' is neither a .py file nor a dotted module name")
            return None
        found = self.imported(path, f"reference module '{shown(target)}'", module=target)
        return None if found is None else \
            Reference(file=None, module=target, function=function, imports=found)

    def imported(self, path: DocPath, what: str, file: Optional[str] = None,
                 module: Optional[str] = None) -> Optional[Tuple[str, ...]]:
        """The local modules the reference ``file`` (absolute) or
        ``module`` imports (:func:`~.imports.local_modules`, once per load),
        or None after reporting."""
        memo = self.io.memo.setdefault("imports", {})
        key = (file, module)
        if key not in memo:
            memo[key] = local_modules(self.io, self.policy, self.io.root, file, module)
        found, problem = memo[key]
        if problem is not None:
            self.error(path, f"{what} {problem}")
            return None
        return found

    def npy(self, path: DocPath, written: str,
            tensor: bool) -> Optional[Tuple[str, str, Tuple[int, ...]]]:
        """Check a .npy file: (root-relative path, numpy descr, shape), or
        None after reporting. A ``tensor`` input's array must also respect
        the device's shape limits."""
        relative = self.named_path(path, written, ".npy file", "regular")
        if relative is None:
            return None
        try:
            descr, shape = self.io.npy_header(self.resolve(written)[0])
        except (OSError, ValueError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            self.error(path, f"'{shown(written)}' is not a readable .npy file "
                             f"({shown(why, 200)})")
            return None
        problem = shape_problem(shape) if tensor else None
        if problem is not None:
            self.error(path, f"the array in '{shown(written)}' has shape "
                             f"{shown(list(shape))}: it {problem} (docs/kernel-api.md, Limits)")
            return None
        return relative, descr, shape

    def npy_dtype(self, path: DocPath, written: str, descr: str,
                  given: Optional[str]) -> Optional[str]:
        """The dtype of a tensor input read from .npy: the file's, checked
        against ``given`` (the input's ``dtype``) if both are known; the
        given one when the file holds raw bytes (``<V2``: how numpy saves
        ml_dtypes' bfloat16 and fp8). None after reporting."""
        known = _NPY_DTYPES.get(descr)
        raw = re.fullmatch(r"[<>|=]V([0-9]{1,9})", descr)
        if known is not None:
            if given is not None and given != known:
                self.error(path + ("dtype",), f"dtype '{given}' does not match the .npy "
                                              f"file '{shown(written)}', which holds {known}")
                return None
            return known
        if raw is not None:
            size = int(raw.group(1))
            if given is None:
                self.error(path + ("npy",), f"'{shown(written)}' holds raw {size}-byte "
                                            f"elements ({descr!r}, as numpy saves ml_dtypes "
                                            "types): give the input's dtype")
                return None
            if _ITEMSIZE[given] != size:
                self.error(path + ("dtype",), f"dtype '{given}' has {_ITEMSIZE[given]}-byte "
                                              f"elements but '{shown(written)}' holds "
                                              f"{size}-byte ones")
                return None
            return given
        self.error(path + ("npy",), f"the array in '{shown(written)}' has numpy dtype "
                                    f"{shown(repr(descr))}, which is not a device dtype "
                                    f"({', '.join(DTYPES)})")
        return None
