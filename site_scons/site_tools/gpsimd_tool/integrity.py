"""A build is never wrong: what is on disk is checked against what the last
completed build recorded, before anything is built.

SCons decides whether a target is up to date from the signatures of its
dependencies; it never looks at what the target itself holds. A build
killed between writing an object and recording it (SIGKILL, a CI timeout,
a power cut), a half-written file left by an interrupted compiler, or an
output edited by hand would then be taken as current, and a broken kernel
could pass (or a correct one fail) until someone deletes files by hand.

Like ninja's log of finished commands and Bazel's output digests checked
against its action cache, this module keeps its own record of every output
of a completed action, ``<BUILD_DIR>/.gpsimd-outputs`` (path -> size,
nanosecond mtime, content signature), written when a build ends (also an
interrupted one, as SCons writes its ``.sconsign``). When a build starts,
:func:`verify_outputs` compares each output of the graph with it: same size
and mtime, it is trusted without reading it; otherwise its content is hashed
and compared with the recorded signature; an output with no record, or
whose bytes differ, is deleted, so SCons rebuilds it and everything that
depends on it.

Because every built file is known to hold what was recorded,
:func:`decide_built` (the graph's decider, :func:`decider`) can compare recorded signatures
instead of hashing built files on every run (sources keep content
signatures): a null build reads no built file.
"""

import os
import pickle
import sys
from typing import Dict, Iterable, List, Optional, Tuple

import SCons.Node
import SCons.Node.FS
from gpsimd_device.atomic import open_private, write_atomically

from . import sconsign

__all__ = ["OutputRecord", "RECORD_NAME", "decide_built", "file_csig", "read_an_edit"]

#: The record's file name, under BUILD_DIR.
RECORD_NAME = ".gpsimd-outputs"
_FORMAT = 1

Entry = Tuple[int, int, str]   # size (bytes), st_mtime_ns, content signature


def file_csig(path: str) -> Optional[str]:
    """The content signature SCons would compute for ``path`` (its hash
    function, hex digest), or None when the file cannot be read."""
    import SCons.Util
    try:
        return SCons.Util.hash_file_signature(path, 2 ** 20)
    except OSError:
        return None


class OutputRecord:
    """The record of every output of a completed action under one build
    folder (see the module docstring)."""

    def __init__(self, build_dir: str):
        self.path = os.path.join(build_dir, RECORD_NAME)
        self.entries: Dict[str, Entry] = {}
        self._stats: Dict[str, os.stat_result] = {}
        self._nodes: List[SCons.Node.FS.File] = []
        try:
            with open_private(self.path) as f:      # (a pickle)
                doc = pickle.load(f)
            if isinstance(doc, dict) and doc.get("format") == _FORMAT:
                self.entries = doc["entries"]
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, KeyError, TypeError,
                AttributeError):
            self.entries = {}   # no record (or a damaged one): nothing is trusted

    def verify_outputs(self, nodes: Iterable[SCons.Node.FS.File]) -> List[str]:
        """Delete every output among ``nodes`` whose bytes are not those the
        last completed build recorded (or that has no record); returns their
        paths. Each node is remembered for :meth:`save`."""
        removed = []
        for node in nodes:
            self._nodes.append(node)
            path = node.path
            try:
                st = os.stat(path)
            except OSError:
                continue            # not built yet: SCons builds it
            self._stats[path] = st
            entry = self.entries.get(path)
            if entry is not None and entry[0] == st.st_size and entry[1] == st.st_mtime_ns:
                continue
            if entry is not None and entry[0] == st.st_size and file_csig(path) == entry[2]:
                self.entries[path] = (st.st_size, st.st_mtime_ns, entry[2])   # touched only
                continue
            try:
                os.unlink(path)
            except OSError:
                continue
            self._stats.pop(path, None)
            removed.append(path)
        return removed

    def stored_csig(self, path: str) -> Optional[str]:
        """The recorded content signature of an output verified this run."""
        entry = self.entries.get(path)
        return entry[2] if entry is not None else None

    def save(self) -> None:
        """Record the outputs of this build: an output built or found up to
        date now gets its size, mtime and signature; any other (not visited,
        its action failed or was interrupted) keeps its old record, so that
        if its action touched it, the next build finds it different and
        rebuilds it. When SCons's own record could not be written
        (``sconsign.written``), what this build made is not recorded either:
        that record says what an output was built from, and an output newer
        than it must not be trusted. Written atomically; an error is
        reported on stderr, never raised. An output whose action read a
        source that changed while the build ran (:func:`read_an_edit`) is
        not recorded either: it may hold the edit, which SCons's record
        says it was not built from, so that a revert of the edit would leave
        it trusted; the next build makes it again."""
        signatures_saved = sconsign.written()
        for node in self._nodes:
            path = node.path
            state = node.get_state()
            if state == SCons.Node.executed and signatures_saved and read_an_edit(node):
                self.entries.pop(path, None)
            elif state == SCons.Node.executed and signatures_saved:
                try:
                    st = os.stat(path)
                except OSError:
                    self.entries.pop(path, None)
                    continue
                csig = getattr(node.get_ninfo(), "csig", None) or file_csig(path)
                if csig:
                    self.entries[path] = (st.st_size, st.st_mtime_ns, csig)
            elif state == SCons.Node.up_to_date:
                st = self._stats.get(path)
                if st is not None and path not in self.entries:
                    csig = file_csig(path)
                    if csig:
                        self.entries[path] = (st.st_size, st.st_mtime_ns, csig)
        data = pickle.dumps({"format": _FORMAT, "entries": self.entries},
                            protocol=pickle.HIGHEST_PROTOCOL)
        try:
            write_atomically(self.path, data, make_folder=True, private=True)
        except OSError as e:
            sys.stderr.write(f"scons: cannot write {self.path}: {e.strerror} (errno {e.errno}); "
                             "the next build will check every output by content\n")


def read_an_edit(node) -> bool:
    """Has a source file ``node`` is built from directly (a file no step
    makes: a kernel, a header, a generated text) changed since SCons first
    looked at it in this run, when it signed it (its memoized size and
    time, which SCons's record of ``node``'s build holds): an editor that
    saved it while its compile ran?"""
    for child in list(node.sources) + list(node.depends) + list(node.implicit or ()):
        if not isinstance(child, SCons.Node.FS.File) or child.has_builder():
            continue
        seen = child.stat()             # SCons's, from when it first looked
        try:
            st = os.stat(child.get_abspath())
        except OSError:
            return True
        if seen is None or (st.st_size, st.st_mtime_ns) != (seen.st_size, seen.st_mtime_ns):
            return True
    return False


#: The record of this run (set by the graph code), used by decide_built.
CURRENT: Optional[OutputRecord] = None


def decider(fast: bool):
    """The decider of the graph's environment (SCons's public
    ``env.Decider``): a built dependency by :func:`decide_built`, a source
    by content (``FAST``: by timestamp, then content), as SCons's own
    ``content`` and ``content-timestamp`` deciders do."""
    def decide(dependency, target, prev_ni, repo_node=None) -> bool:
        if dependency.has_builder():
            return decide_built(dependency, target, prev_ni, repo_node)
        if fast:
            return dependency.changed_timestamp_then_content(target, prev_ni, repo_node)
        return dependency.changed_content(target, prev_ni, repo_node)
    return decide


def decide_built(dependency, target, prev_ni, repo_node=None) -> bool:
    """Has a built dependency changed since ``target``
    was built (``prev_ni`` is what the target's build recorded of it)?

    A dependency rebuilt in this run is compared by content (its signature
    was computed when it was built). Any other built file holds exactly what
    the last completed build recorded (checked by
    :meth:`OutputRecord.verify_outputs`), so its recorded signature is
    compared and the file is not read.
    """
    if dependency.get_state() != SCons.Node.executed and CURRENT is not None \
            and isinstance(dependency, SCons.Node.FS.File):
        csig = CURRENT.stored_csig(dependency.path)
        if csig is not None:
            # what SCons records of this dependency in the target's build
            # info: the signature it would have computed by reading it
            dependency.get_ninfo().csig = csig
            return csig != getattr(prev_ni, "csig", None)
    return dependency.changed_content(target, prev_ni, repo_node)
