"""``[done/total]`` in front of every action line, as ninja prints it.

SCons decides what is out of date while it walks the graph, so it never
knows how many actions a run will take. :class:`Progress` keeps the graph's
action nodes (one per action, in the order they were created, which is a
topological order) and does nothing until the first action line is
printed: a null build pays nothing. At that first line it predicts, once,
which of the actions this run's targets reach will run: an action runs when
one of its targets is missing, has no record in SCons's ``.sconsign``, is
always built, has another command line than the one recorded, or when a
file it depended on last time (the dependencies the record lists, with
their size and time; for an alias, the files it names) has another size
or time or is rebuilt by an action predicted to run. That is ninja's view of a build: an
edge is dirty when an input is newer, and the total shrinks when a rebuilt
input turns out unchanged. Here too the total is then corrected as the
walk goes: an action predicted that SCons finds up to date (a file touched
but equal, an object rebuilt to the same bytes) leaves the total, and an
action not predicted (a changed command line) joins it. ``done`` never
passes ``total``.

``quiet`` (``QUIET=1``): action lines are not printed at all.

:class:`Timer`: with ``scons --debug=time``, the tool's own steps' times.
"""

import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import SCons.Node
import SCons.Script
import SCons.Util

__all__ = ["Progress", "Timer"]


class Progress:
    """The ``PRINT_CMD_LINE_FUNC`` of the tool's environment (and the
    ``Progress`` callback that tells it which nodes SCons has looked at)."""

    def __init__(self, top: str, quiet: bool = False, stream=None):
        self.top = top
        self.quiet = quiet
        self.stream = stream or sys.stdout
        self.actions: List[Any] = []      # first target of each action, topological
        self.done = 0
        self.total: Optional[int] = None
        self.predicted: Dict[int, Any] = {}
        self.looked_at: List[Any] = []
        self.lock = threading.Lock()
        self._aliases: Dict[str, bool] = {}     # alias name -> a file it names changed

    # -- the graph code --------------------------------------------------------
    def add(self, nodes) -> None:
        """Record the action that builds ``nodes`` (a node or a list of its
        targets)."""
        self.actions.append(nodes if hasattr(nodes, "get_executor") else nodes[0])

    def install(self, env) -> None:
        """Print ``env``'s action lines through :meth:`print_line`; use
        SCons's ``Progress`` hook unless the SConstruct set its own."""
        env["PRINT_CMD_LINE_FUNC"] = self.print_line
        import SCons.Script.Main
        if SCons.Script.Main.ProgressObject is None:
            SCons.Script.Progress(self.seen)

    # -- SCons's callbacks -------------------------------------------------------
    def seen(self, node) -> None:
        """SCons's ``Progress`` callback: ``node`` is about to be decided.
        Before the prediction every node is kept: one SCons began to decide
        before the first action line (``-j2``: the job thread prints while
        the main thread decides) and finds up to date after it must still
        leave the total."""
        if self.total is None or id(node) in self.predicted:
            self.looked_at.append(node)

    def print_line(self, line: str, target, source, env) -> None:
        if self.quiet:
            return
        with self.lock:
            first = target[0] if target else None
            if self.total is None:
                self._predict()
            self._reconcile()
            self.done += 1
            if first is not None and self.predicted.pop(id(first), None) is None:
                self.total += 1                     # an action not predicted
            self.total = max(self.total, self.done)
            self.stream.write(f"[{self.done}/{self.total}] {line}\n")
            self.stream.flush()

    # -- prediction ----------------------------------------------------------------
    def _reconcile(self) -> None:
        """Predicted actions SCons has since found up to date leave the total."""
        keep = []
        for node in self.looked_at:
            if id(node) not in self.predicted:
                continue
            state = node.get_state()
            if state in (SCons.Node.up_to_date,):
                if self.predicted.pop(id(node), None) is not None:
                    self.total -= 1
            elif state in (SCons.Node.no_state, SCons.Node.pending, SCons.Node.executing):
                keep.append(node)
        self.looked_at = keep

    def _predict(self) -> None:
        wanted = self._reachable()
        dirty_paths = set()
        predicted = {}
        for node in self.actions:
            state = node.get_state()
            if id(node) not in wanted or state not in (SCons.Node.no_state, SCons.Node.pending,
                                                       SCons.Node.executing):
                continue
            targets = node.get_executor().get_all_targets()
            if state == SCons.Node.executing or self._will_run(node, targets, dirty_paths):
                predicted[id(node)] = node
                dirty_paths.update(str(t) for t in targets)
        self.predicted = predicted
        self.total = self.done + len(predicted)

    def _reachable(self) -> set:
        """ids of every node this run's targets reach through sources and
        explicit dependencies (no scanning); a command line's targets are
        names, looked up as aliases, else as files."""
        import SCons.Node.Alias
        import SCons.Node.FS
        seen = set()
        stack = []
        for target in SCons.Script.BUILD_TARGETS:
            if isinstance(target, str):     # (a command line's: an alias, else a file)
                target = (SCons.Node.Alias.default_ans.lookup(target)
                          or SCons.Node.FS.get_default_fs().Entry(target))
            if hasattr(target, "sources"):
                stack.append(target)
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.extend(node.sources or ())
            stack.extend(node.depends or ())
            stack.extend(getattr(node, "prerequisites", None) or ())
        return seen

    def _will_run(self, node, targets, dirty_paths) -> bool:
        if getattr(node, "always_build", False):
            return True
        for t in targets:
            if not os.path.exists(os.path.join(self.top, str(t))):
                return True
        try:
            binfo = node.get_stored_info().binfo
            paths = list(binfo.bsources) + list(binfo.bdepends) + list(binfo.bimplicit)
            infos = list(binfo.bsourcesigs) + list(binfo.bdependsigs) + list(binfo.bimplicitsigs)
        except AttributeError:
            return True                     # no record of a completed build
        if not paths and not infos:
            return True
        try:   # the command line (the signature SCons compares)
            if binfo.bactsig != SCons.Util.hash_signature(node.get_executor().get_contents()):
                return True
        except Exception:   # noqa: BLE001 - a prediction only
            return True
        for path, info in zip(paths, infos):
            path = str(path)
            if path in dirty_paths:
                return True
            size = getattr(info, "size", None)
            stamp = getattr(info, "timestamp", None)
            if size is None or stamp is None:   # an alias or value: no file facts
                if self._alias_changed(path):
                    return True
                continue
            if self._changed(os.path.join(self.top, path), size, stamp):
                return True
        return False

    @staticmethod
    def _changed(path: str, size, stamp) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return True
        return st.st_size != size or int(st.st_mtime) != int(stamp)

    def _alias_changed(self, name: str) -> bool:
        """Has a file the alias ``name`` names (the emulator's code, the
        steps') another size or time than its record? (Once per alias; not
        an alias: False.)"""
        if name not in self._aliases:
            import SCons.Node.Alias
            alias = SCons.Node.Alias.default_ans.lookup(name)
            changed = False
            for child in (alias.children() if alias is not None else ()):
                ninfo = getattr(child.get_stored_info(), "ninfo", None)
                size = getattr(ninfo, "size", None)
                stamp = getattr(ninfo, "timestamp", None)
                if size is None or stamp is None or \
                        self._changed(child.get_abspath(), size, stamp):
                    changed = True
                    break
            self._aliases[name] = changed
        return self._aliases[name]


class Timer:
    """With ``scons --debug=time``, how long each of this tool's own steps
    took, printed as SCons prints its own times (seconds)."""

    def __init__(self):
        self.on = "time" in (SCons.Script.GetOption("debug") or ())
        self.t = time.perf_counter()

    def lap(self, what: str) -> None:
        if self.on:
            now = time.perf_counter()
            print(f"gpsimd: {what}: {now - self.t:.3f} seconds")
            self.t = now

    def timed(self, fn, what: str):
        """``fn`` (no arguments), timed like :meth:`lap` when it runs."""
        if not self.on:
            return fn

        def run():
            self.t = time.perf_counter()
            fn()
            self.lap(what)
        return run
