"""References, and the modules they import from the project, are compiled
from their source at every run, never taken from a bytecode cache.

Python trusts a ``__pycache__`` file while the source's size and its
modification time *in whole seconds* are those it recorded, so an edit
made within the same second that keeps the size (``FACTOR = 2`` to ``3``)
would run the old code: a test the build rightly runs again would judge
against the old reference. A module is the project's when it comes from
the reference's folder or the folder the emulator runs in (the project's
root), as the build counts them (``gpsimd_build.manifest.imports``), and
from no more specific ``sys.path`` entry (a virtual environment inside the
project keeps its caches).
"""

import importlib.machinery
import os
import sys
from typing import Optional, Set

__all__ = ["SourceOnlyLoader", "local_folder"]


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """A source file's module, compiled from its text every time (no
    bytecode read or written)."""

    def get_code(self, fullname):
        return self.source_to_code(self.get_data(self.path), self.path)


class _LocalFinder:
    """Python's path finder, with :class:`SourceOnlyLoader` for the source
    modules of the local folders (placed just before the path finder in
    ``sys.meta_path``: built-in modules keep their precedence)."""

    def __init__(self) -> None:
        self.folders: Set[str] = set()
        #: The folder ``local_folder`` last made ready (its modules in
        #: ``sys.modules``), or None.
        self.entered: Optional[str] = None

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader \
                and self._local(spec.origin):
            spec.loader = SourceOnlyLoader(fullname, spec.origin)
        return spec

    def _local(self, origin: Optional[str]) -> bool:
        """Is ``origin`` below a local folder, and below no longer entry of
        ``sys.path``?"""
        if not origin:
            return False
        origin = os.path.abspath(origin)
        entries = {os.path.abspath(p or os.curdir) for p in sys.path if isinstance(p, str)}
        inside = [e for e in entries | self.folders if origin.startswith(os.path.join(e, ""))]
        return bool(inside) and max(inside, key=len) in self.folders


_FINDER = _LocalFinder()


def local_folder(folder: str) -> None:
    """Before a reference of ``folder`` loads, and before each of its calls
    when a reference of another folder came between: make ``folder`` (and
    the folder this process runs in) local, so that a module imported from
    it from now on is compiled from its source; and first drop from
    ``sys.modules`` each project module (one a :class:`SourceOnlyLoader`
    loaded) whose top-level name ``folder`` holds too (``a.py`` or ``a/``)
    but which is not that file or package (one of another folder, a
    subfolder's included), with its submodules, so that the reference's
    ``import helpers`` finds the ``helpers`` of its own folder, not one an
    earlier reference of another folder loaded under that name. (A loaded
    reference keeps the modules it imported: its globals hold them.
    Modules no name of ``folder`` shadows stay.)"""
    folder = os.path.abspath(folder)
    if _FINDER.entered == folder:
        return
    for name, module in list(sys.modules.items()):
        if not isinstance(getattr(module, "__loader__", None), SourceOnlyLoader):
            continue
        base = os.path.join(folder, name.split(".")[0])
        origin = os.path.abspath(getattr(module, "__file__", "") or "")
        if (os.path.isdir(base) or os.path.isfile(base + ".py")) and origin != base + ".py" \
                and not origin.startswith(os.path.join(base, "")):
            del sys.modules[name]
    _FINDER.entered = folder
    _FINDER.folders.update({folder, os.path.abspath(os.curdir)})
    if _FINDER not in sys.meta_path:
        at = next((k for k, f in enumerate(sys.meta_path)
                   if f is importlib.machinery.PathFinder), len(sys.meta_path))
        sys.meta_path.insert(at, _FINDER)
