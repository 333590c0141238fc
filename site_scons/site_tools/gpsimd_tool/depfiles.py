"""Every header a compile read, from the compiler's own depfile, as the
object's dependencies on the SCons path.

SCons's C scanner (``SCons.Scanner.C.CScanner``) finds ``#include "x"``
and ``#include <x>`` lines in ``CPPPATH`` (the graph gives it the folders
of a library's ``includes`` and ``cflags``, and makes the files ``cflags``
force in, ``-include`` and ``-imacros``, explicit dependencies:
``SConsGraph.compile``); it cannot see a header a macro names
(``#include FACTOR_HEADER``), nor follow a flag it does not know. The
compiler knows: each compile writes a depfile (``Profile.depfile``; on the
host ``-MD -MF <obj>.d``) naming every file it read, which make and ninja
(``deps = gcc``) rebuild from. Here:

* :data:`SCANNER`, the compile builder's target scanner (SCons's public
  scanner interface), returns the files the object's depfile names, when
  there is one: the object depends on them as on the headers the C
  scanner finds, so an edit to any rebuilds it (and a cache key holds
  them). Files outside the project and the build folder (the toolchain's
  own headers) are left out: they change with the compiler, a dependency
  of every compile already.
* A compile that read a file neither scanner named (its first compile, or
  an edit that reached a new header) gives its object a new dependency
  in the next build, which compiles it once more: SCons records a
  dependency's signature before the command runs, and that file may have
  changed while the compiler read it. Until then :func:`unseen` names
  such files: the object is not pushed to a build cache (``cache.py``:
  its key did not hold them) and its library is not recorded as current
  (``inputs_record.py``).

The scanner also judges whether the compile depended on a file's absence
(``probes.judge``). On the ninja path ninja reads the depfiles itself
(``ninja_path``), and the scanner returns nothing.
"""

import os
from typing import Any, Callable, Dict, List, Optional

import SCons.Node
import SCons.Scanner

from gpsimd_build.depfile import read_prerequisites

from . import probes

__all__ = ["Depfiles", "SCANNER", "unseen"]

#: The construction variable that holds an environment's :class:`Depfiles`.
VARIABLE = "GPSIMD_DEPFILES"


class Depfiles:
    """The depfiles of one environment's compiles.

    ``env``: the environment (its nodes); ``depfile_of``: the profile's
    ``depfile`` (an object's path -> its depfile's, or None); ``top``: the
    project's folder, where compiles run (absolute); ``build_dir``: the
    build folder, as the graph names it; ``scan``: False on the ninja
    path (ninja reads them)."""

    def __init__(self, env: Any, depfile_of: Callable[[str], Optional[str]], top: str,
                 build_dir: str, scan: bool = True):
        self.env = env
        self.depfile_of = depfile_of
        self.top = os.path.abspath(top)
        self.scan = scan
        build = os.path.abspath(os.path.join(self.top, build_dir))
        self.build = build
        self._inside = tuple(d.rstrip(os.sep) + os.sep for d in (self.top, build))
        self._full: Dict[str, str] = {}
        self._nodes: Dict[str, Any] = {}

    def paths(self, obj: Any) -> List[str]:
        """The absolute paths of the files the last compile of ``obj``
        read, in its depfile's order, its sources and explicit dependencies
        (a ``-include`` file) and files outside the project and the build
        folder left out; [] without a depfile. (Creates no node: a cache
        push asks from a build thread.)"""
        where = self.depfile_of(obj.get_abspath())
        written = read_prerequisites(where) if where else None
        if not written:
            return []
        sources = {s.get_abspath() for s in obj.sources + obj.depends}
        out = []
        for path in written:
            full = self._full.get(path)
            if full is None:
                full = os.path.normpath(os.path.join(self.top, path))
                if os.path.isabs(path) and not full.startswith(self._inside):
                    full = ""
                self._full[path] = full
            if full and full not in sources:
                out.append(full)
        return out

    def read(self, obj: Any) -> List[Any]:
        """The File nodes of :meth:`paths` (the target scanner's answer),
        but those of files gone since that compile that no builder makes:
        a header removed with its ``#include`` is no dependency of the
        next compile (one removed but still included fails that compile,
        with the compiler's message), where SCons would stop the build for
        good at a missing dependency."""
        out = []
        for full in self.paths(obj):
            node = self._nodes.get(full)
            if node is None:
                node = self._nodes[full] = self.env.File(full)
            if node.has_builder() or os.path.exists(full):
                out.append(node)
        return out

    def unseen(self, obj: Any) -> List[str]:
        """The absolute paths of the files the last compile of ``obj`` read
        that are not among its dependencies (see the module docstring)."""
        children = {c.get_abspath() for c in obj.children(scan=False)}
        return [p for p in self.paths(obj) if p not in children]


def _scan(node, env, path=()) -> List[Any]:
    depfiles = env.get(VARIABLE)
    if depfiles is None or not depfiles.scan:
        return []
    found = depfiles.read(node)
    # (does it depend on a file's absence? probes.py)
    probes.judge(node, found, depfiles._inside)
    return found


#: The compile builder's target scanner (``builders.py``).
SCANNER = SCons.Scanner.ScannerBase(_scan, name="GpsimdDepfile", recursive=False)


def unseen(node: Any) -> List[str]:
    """:meth:`Depfiles.unseen` of a compile's target ``node`` built in
    this run (being built, or done); [] for any other node (not a compile
    of an environment with depfiles, or not built in this run: an
    up-to-date object's depfile was read before it was judged)."""
    if node.get_state() not in (SCons.Node.executing, SCons.Node.executed):
        return []
    env = node.get_build_env()
    depfiles = env.get(VARIABLE) if env is not None else None
    if depfiles is None or not depfiles.scan or node.builder is None \
            or node.builder.target_scanner is not SCANNER:
        return []
    return depfiles.unseen(node)
