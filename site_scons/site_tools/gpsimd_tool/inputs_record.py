"""The record of what each library's core objects were built from
(``gpsimd_build.freshness``), written when ``scons`` exits.

A library is recorded when every one of its roots (its loadable core
objects, and its shape library and the shaped plan when it has them) was
built or found up to date in this run. Its entries are the roots
themselves (as they are at the end) and the source files below them in
the graph: the nodes without a builder (kernel and shape sources, the
headers SCons's scanner found, the runtime's sources, generated texts such
as the LSP sources and the plan), except the programs the commands run
(the compiler, Python: not what an object is built *from*, and absolute
paths) and the files outside the project and outside the folders the
manifest may name (``ALLOW_PATHS``, ``allow_paths:``): the system's
headers, an installed tool's own sources, e.g. the emulator's program's
(the runtime's are mirrored into the build folder and recorded there). A
file in an allowed folder outside the project is recorded by its path
relative to the project (the record, an output, holds no absolute path). A library one of whose objects this run compiled from
a file that was not yet among its dependencies (a header only the
compiler's depfile names, ``depfiles.unseen``) is not recorded: the next
build compiles that object again, and records it. The emulator's program
is an entry of its own (``freshness.ZYGOTE_ENTRY``). A source's size and time are those SCons saw when it first looked
at the file in this run (its memoized ``stat``), so a file edited while
the build ran is recorded as it was before: the front end then sees a
change and asks for another build, never the reverse. Libraries not
visited, or whose objects failed, keep the entries of their last
recording.
"""

import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Set, Tuple

import SCons.Node
import SCons.Node.FS

from gpsimd_build import freshness

from . import collector, depfiles

__all__ = ["InputsRecord"]

_DONE = (SCons.Node.executed, SCons.Node.up_to_date)


class InputsRecord:
    """Collects each library's roots while the graph is read; :meth:`save`
    (registered with ``atexit``) writes ``<profile_dir>/inputs.json``.
    ``programs``: returns the program nodes to leave out."""

    def __init__(self, profile_dir: str, programs: Callable[[], Iterable[Any]] = list,
                 allowed: Iterable[str] = ()):
        """``allowed``: the folders outside the project that the manifest
        may name (resolved here: a header's real path is compared with them,
        so one named through a link to the folder was taken for a system
        header and left out)."""
        self.path = os.path.join(profile_dir, freshness.RECORD_NAME)
        self.roots: Dict[str, Tuple[str, List[Any]]] = {}
        self._programs = programs
        #: the allowed folders outside the project (real paths)
        self.allowed = tuple(os.path.realpath(a) for a in allowed)
        self._allowed = tuple(os.path.join(a, "") for a in self.allowed)
        self._build = os.path.join(os.path.realpath(os.path.dirname(profile_dir)), "")
        self._outside: Dict[str, Any] = {}     # (recorded_path of an absolute path, once)

    def add(self, lib: Any, roots: Iterable[Any]) -> None:
        """``lib``: the manifest library; ``roots``: the nodes a front end
        runs its vectors on."""
        self.roots[lib.name] = (freshness.library_key(lib), list(roots))

    def add_zygote(self, node: Any) -> None:
        """The emulator's program's node (``freshness.ZYGOTE_ENTRY``):
        a front end runs every library's vectors under it."""
        self.roots[freshness.ZYGOTE_ENTRY] = (freshness.ZYGOTE_ENTRY, [node])

    def save(self) -> None:
        """Record every library whose roots are all done; an error is
        reported on stderr, never raised. A library whose entry is already
        the one this run would write (its key, and every file it names as
        big and as old as recorded, with its roots up to date: what the
        graph below them is made of is what it was) is left as it is,
        without walking its graph (a null build's case: 0.6 s at 5,000
        ops)."""
        with collector.paused():
            self._save()

    def _save(self) -> None:
        skip = {id(n) for n in self._programs()}
        memo: Dict[int, Set[Any]] = {}
        unseen: Dict[int, bool] = {}
        done, stats = {}, {}
        old = freshness.read_record(self.path)
        now: Dict[str, Any] = {}
        for name, (key, roots) in self.roots.items():
            if roots and all(n.get_state() == SCons.Node.up_to_date for n in roots) and \
                    _recorded(old, name, key, now):
                continue
            if roots and all(n.get_state() in _DONE for n in roots):
                leaves: Set[Any] = set()
                for node in roots:
                    leaves |= _leaves(node, memo, skip, unseen)
                if any(unseen[id(node)] for node in roots if id(node) in unseen):
                    continue        # (not current until the next build: see the docstring)
                paths = []
                for node in leaves:
                    path = self.recorded_path(node)
                    if path is None:
                        continue
                    paths.append(path)
                    st = node.stat()             # SCons's, from when it first looked
                    if st is not None:
                        stats[path] = (st.st_size, st.st_mtime_ns)
                stats.update(freshness.stat_files(n.path for n in roots))
                done[name] = (key, paths + [n.path for n in roots])
        if not done:
            return
        try:
            freshness.update_record(self.path, done, stats)
        except OSError as e:
            sys.stderr.write(f"scons: cannot write {self.path}: {e.strerror} (errno {e.errno}); "
                             "the pytest plugin will ask for another build\n")


    def recorded_path(self, node: Any) -> Any:
        """The path ``node`` is recorded by, or None when it is not
        recorded: a file outside the project (an absolute path) is, by its
        path relative to the project, when it lies in an allowed folder."""
        if not os.path.isabs(node.path):
            return node.path
        if node.path not in self._outside:      # (a system header: every library's)
            real = os.path.realpath(node.abspath)
            self._outside[node.path] = os.path.relpath(node.abspath) if real.startswith(
                self._allowed or ("\0",)) and not real.startswith(self._build) else None
        return self._outside[node.path]         # (None: a build folder outside: ours)


def _recorded(record: Any, name: str, key: str, now: Dict[str, Any]) -> bool:
    """Is ``record``'s entry ``name`` recorded with ``key``, naming files
    that are all as big and as old as it says (``now``: the stats looked
    at so far, by path)?"""
    entry = record.libraries.get(name)
    if not entry or entry[0] != key or not entry[1]:
        return False
    for path in entry[1]:
        if path not in now:
            try:
                st = os.stat(path)
                now[path] = (st.st_size, st.st_mtime_ns)
            except OSError:
                now[path] = None
        if now[path] is None or tuple(record.files.get(path, ())) != now[path]:
            return False
    return True


def _leaves(root: Any, memo: Dict[int, Set[Any]], skip: Set[int],
            unseen: Dict[int, bool]) -> Set[Any]:
    """The file nodes without a builder below ``root`` (memoized per node;
    iterative, so a deep graph cannot exhaust the stack); ``unseen`` gets,
    for each node with a builder, whether a compile at or below it read a
    file that was not among its dependencies (``depfiles.unseen``)."""
    stack = [(root, False)]
    busy: Set[int] = set()
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in memo or (key in busy and not expanded):
            continue                    # (done, or a cycle SCons itself reports)
        if not node.has_builder():
            memo[key] = ({node} if isinstance(node, SCons.Node.FS.File) and key not in skip
                         else set())
            continue
        children = node.children()
        if not expanded:
            busy.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        out: Set[Any] = set()
        for c in children:
            out |= memo.get(id(c), set())
        memo[key] = out
        unseen[key] = any(unseen.get(id(c), False) for c in children) \
            or bool(depfiles.unseen(node))
    return memo[id(root)]
