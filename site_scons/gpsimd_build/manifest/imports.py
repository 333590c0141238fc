"""The local Python modules a reference imports, found without running it.

A reference runs in the emulator: ``file.py:function`` is imported by path
with the file's folder first on ``sys.path`` while it loads, in a process
started with ``python -m`` in the project's root (the root is next on
``sys.path``); ``module:function`` imports the module from that
``sys.path`` (``gpsimd_emu.sourceonly.load_reference``). Its result depends
on every module it imports from those two folders, transitively: such a
module is a dependency of the test, as the reference file is. Modules
found elsewhere (the standard library, site-packages such as numpy,
``PYTHONPATH``) are not the project's and are left out.

:func:`local_modules` follows every import statement of the reference and
of each local module it reaches, at any depth of the code (in a function,
under ``try``: a superset of what one run imports): ``import a.b`` (the
package ``a``'s ``__init__`` and ``a/b``), ``from a import b`` (and
``a/b`` when it is a submodule), relative imports in a package (``from .
import b``, ``from ..c import d``), and ``importlib.import_module("a")`` or
``__import__("a")`` with a constant name (see :func:`imports_of`), and the
submodules a package's ``__all__`` names (what ``from package import *``
imports). A name is resolved as Python's
path finder does (``importlib.machinery.PathFinder``: in each folder, a
package ``a/__init__.<suffix>``, then a module ``a.<suffix>``, extension
modules first, then source, then bytecode; a folder without ``__init__`` is
a namespace package), through the loader's
:class:`~gpsimd_build.manifest.reads.Recorder`: each place looked at is a
fact of the collection's reads, so that a module created, removed or
edited later loads the manifest again. An import computed at run time
(``import_module(name)``, a changed ``sys.path``) cannot be seen, nor a
data file a module reads (``np.load``, ``open``): such files are no
dependency of the test (the emulator fails a vector whose reference
loads a module of the project not found here: ``gpsimd_emu.sourceonly``).
"""

import ast
import importlib.machinery
import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["Import", "MAX_MODULES", "imports_of", "local_modules"]

#: Most local modules one reference may import (files, transitively).
MAX_MODULES = 1000

#: The suffixes of a module file, in the order the path finder tries them.
_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES + importlib.machinery.SOURCE_SUFFIXES
                  + importlib.machinery.BYTECODE_SUFFIXES)


class Import(NamedTuple):
    """One import: ``level`` dots (0: absolute), the dotted ``module``
    after them ("" for ``from . import x``) and the ``names`` a ``from``
    import takes from it (``()`` for ``import module``)."""

    level: int
    module: str
    names: Tuple[str, ...]


def imports_of(tree: ast.AST) -> Tuple[Import, ...]:
    """Every import of the parsed module ``tree``, in the order written:
    import statements; calls of ``import_module`` / ``__import__`` (also
    under another name: ``from importlib import import_module as im``,
    ``im = importlib.import_module``) whose name, and package for a
    relative name (a constant or ``__package__``), are constant strings
    (``"." + "sub"`` too), given by position or keyword, with
    ``__import__``'s ``fromlist`` and ``level``; and the constant strings
    a package's ``__all__`` is given (``=``, ``: list =``, ``+=``), which a
    ``from package import *`` imports as submodules where they are."""
    out: List[Import] = []
    callers = {"import_module", "__import__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "importlib":
            callers.update(a.asname for a in node.names
                           if a.name == "import_module" and a.asname)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _name(node.value) in callers:
            callers.update(t.id for t in _targets(node) if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [Import(0, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(Import(node.level or 0, node.module or "",
                              tuple(a.name for a in node.names if a.name != "*")))
        elif isinstance(node, ast.Call) and _name(node.func) in callers:
            imp = _call_import(node, _name(node.func) == "__import__")
            if imp is not None:
                out.append(imp)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in _targets(node)) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            names = tuple(n for n in map(_string, node.value.elts) if n)
            if names:
                out.append(Import(1, "", names))
    return tuple(out)


def _targets(node: ast.AST) -> List[ast.AST]:
    """What the assignment ``node`` (``=``, ``:``, ``+=``) assigns."""
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _name(node: Optional[ast.AST]) -> str:
    """The name ``node`` (``f`` or ``x.f``) ends with, or ""."""
    return node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""


def _call_import(call: ast.Call, dunder: bool) -> Optional[Import]:
    """What the call of ``import_module`` (or ``__import__``: ``dunder``)
    imports, or None when its name is not constant."""
    target = _string(_arg(call, 0, "name"))
    if target is None:
        return None
    if dunder:          # (name, globals, locals, fromlist, level)
        listed = _arg(call, 3, "fromlist")
        names = tuple(n for n in map(_string, getattr(listed, "elts", ())) if n)
        level = _arg(call, 4, "level")
        level = level.value if isinstance(level, ast.Constant) and \
            isinstance(level.value, int) and level.value > 0 else 0
        return Import(level, target, names)
    level = len(target) - len(target.lstrip("."))
    package = _arg(call, 1, "package")
    if level and isinstance(package, ast.Name) and package.id == "__package__":
        return Import(level, target[level:], ())
    target = _absolute(target, _string(package)) if level else target
    return Import(0, target, ()) if target else None


def _arg(call: ast.Call, position: int, keyword: str) -> Optional[ast.AST]:
    """The argument of ``call`` at ``position`` or named ``keyword``, or None."""
    return call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == keyword), None)


def _string(node: Optional[ast.AST]) -> Optional[str]:
    """The constant string ``node`` is (``"a"``, ``"." + "a"``), or None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left), _string(node.right)
        return None if left is None or right is None else left + right
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _absolute(name: str, package: Optional[str]) -> Optional[str]:
    """``importlib.import_module``'s resolution of the relative ``name``
    (``.a``, ``..a``) in ``package``, or None (no package, or above it)."""
    level = len(name) - len(name.lstrip("."))
    parts = package.split(".") if package else []
    if not parts or level > len(parts):
        return None
    base = parts[:len(parts) - level + 1]
    rest = name[level:]
    return ".".join(base + ([rest] if rest else []))


#: A module's packages, innermost first, each as its folders: the chain a
#: relative import climbs (``()`` for a top-level module).
Chain = Tuple[Tuple[str, ...], ...]


class _Spec(NamedTuple):
    """Where a module was found: its file (None for a namespace package)
    and, for a package, the folders of its submodules."""

    file: Optional[str]
    locations: Optional[Tuple[str, ...]]


class _Finder:
    """Resolves module names in folders through a Recorder (``io``) and
    collects the local files (see :func:`local_modules`)."""

    def __init__(self, io, policy):
        self.io = io
        self.policy = policy

    def _regular(self, path: str) -> bool:
        return self.io.kind(path) == "regular"

    def find(self, name: str, folders: Sequence[str]) -> Optional[_Spec]:
        """The path finder's answer for the one-part ``name`` in
        ``folders`` (absolute), or None."""
        portions: List[str] = []
        for folder in folders:
            base = os.path.join(folder, name)
            if self.io.kind(base) == "dir":
                for suffix in _SUFFIXES:
                    init = os.path.join(base, "__init__" + suffix)
                    if self._regular(init):
                        return _Spec(init, (base,))
                portions.append(base)
            for suffix in _SUFFIXES:
                if self._regular(base + suffix):
                    return _Spec(base + suffix, None)
        return _Spec(None, tuple(portions)) if portions else None

    def resolve(self, dotted: str, folders: Sequence[str],
                chain: Chain) -> List[Tuple[_Spec, Chain]]:
        """Each part of the dotted name (``a``, ``a.b``, ...) found from
        ``folders``, as far as they are found, with its chain (``chain``:
        that of the package the folders are, ``()`` for ``sys.path``)."""
        out: List[Tuple[_Spec, Chain]] = []
        for part in dotted.split("."):
            spec = self.find(part, folders) if part else None
            if spec is None:
                break
            if spec.locations is None:      # a module: its package's chain
                out.append((spec, chain))
                break
            chain = (spec.locations,) + chain
            out.append((spec, chain))
            folders = spec.locations
        return out

    def inside(self, path: str) -> bool:
        """Whether ``path`` resolves inside the allowed folders (an import
        of a file that leads outside them is not the project's)."""
        return self.policy.inside(self.io.real(path))


def local_modules(io, policy, root: str, file: Optional[str] = None,
                  module: Optional[str] = None) -> Tuple[Tuple[str, ...], Optional[str]]:
    """The local modules the reference ``file`` (absolute) or ``module``
    (a dotted name) imports, transitively: ``(root-relative paths, sorted;
    a problem or None)``. ``io``: the loader's Recorder; ``policy``: its
    ``PathPolicy``; ``root``: the project's folder (absolute). A module
    whose text does not parse is a dependency whose own imports are not
    followed (importing it fails in the emulator, which says why). The
    problem is a message when more than :data:`MAX_MODULES` files are
    found, when a module cannot be read (larger than
    :data:`~.probes.MAX_REFERENCE_BYTES`, say): Python may still import
    it, and the modules it imports would be no dependency of the test; or
    when a module found in those folders resolves outside the allowed
    ones (a symbolic link out of the project): Python imports it, and the
    test would not depend on it."""
    finder = _Finder(io, policy)
    walk = _Walk(finder)
    # (sys.path as the reference loads: its folder, then the root; as its
    # functions run later: the root; each answer counts)
    searches: List[Tuple[str, ...]] = [(root,)]
    if file is not None:
        folder = os.path.dirname(file)
        if folder != root:
            searches.insert(0, (folder, root))
        walk.todo.append((file, ()))
        walk.seen.add((file, ()))
    else:
        walk.add(finder.resolve(module or "", (root,), ()))
    while walk.todo:
        if len(walk.found) > MAX_MODULES:
            return (), f"imports more than {MAX_MODULES} local modules (MAX_MODULES)"
        path, chain = walk.todo.pop()
        imports = io.reference_imports(path) if path == file else \
            io.module_imports(path) if path.endswith(".py") else None
        unread = io.module_unread(path) if imports is None and path != file \
            and path.endswith(".py") else None
        if unread is not None:      # (Python may import it: what it imports is unknown)
            return (), (f"imports {io.rel(path)}, which {unread}: the modules it imports "
                        "(the test's dependencies) cannot be found")
        for imp in imports or ():
            if not imp.level:
                for search in searches:
                    _import(finder, walk, imp, search, ())
            elif imp.level <= len(chain):       # (else beyond the top-level package)
                _import(finder, walk, imp, chain[imp.level - 1], chain[imp.level - 1:])
    if walk.outside is not None:    # (Python imports it: an edit of it must run the test)
        return (), (f"imports {io.rel(walk.outside)}, which is outside the project (resolved "
                    f"to {io.rel(io.real(walk.outside))}): list its folder in allow_paths or "
                    "ALLOW_PATHS= to make it a dependency of the test")
    return tuple(sorted(io.rel(p) for p in walk.found)), None


def _import(finder: "_Finder", walk: "_Walk", imp: Import, folders: Sequence[str],
            chain: Chain) -> None:
    """Note what ``imp`` imports when its module is looked for in
    ``folders`` (a package's, with its ``chain``; ``sys.path``'s with ``()``)."""
    if imp.module:
        specs = finder.resolve(imp.module, folders, chain)
        walk.add(specs)
        if len(specs) != len(imp.module.split(".")) or specs[-1][0].locations is None:
            return          # (not found, or a module: the names are its attributes)
        folders, chain = specs[-1][0].locations, specs[-1][1]
    for name in imp.names:      # (a submodule of the package, when there is one)
        walk.add(finder.resolve(name, folders, chain))


class _Walk:
    """The files found so far, and those whose imports are still to read."""

    def __init__(self, finder: "_Finder"):
        self.finder = finder
        self.found: Dict[str, None] = {}
        self.seen: set = set()      # (file, chain): read once each way it is reached
        self.todo: List[Tuple[str, Chain]] = []
        #: the first file found that resolves outside the allowed folders
        self.outside: Optional[str] = None

    def add(self, specs: Sequence[Tuple[_Spec, Chain]]) -> None:
        """Note the files of ``specs``: those inside the allowed folders
        are found, the first outside them is :attr:`outside`."""
        for spec, chain in specs:
            if spec.file is None or (spec.file, chain) in self.seen:
                continue
            self.seen.add((spec.file, chain))
            if spec.file in self.found or self.finder.inside(spec.file):
                self.found[spec.file] = None
                self.todo.append((spec.file, chain))
            elif self.outside is None:
                self.outside = spec.file
