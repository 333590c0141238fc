"""The loader's one door to the filesystem, and what it saw.

Every file-system access of :func:`~gpsimd_build.manifest.load_manifest`
goes through a :class:`Recorder`: what a path is (:meth:`Recorder.kind`,
never opening it), where it resolves (:meth:`Recorder.real`), a manifest's
bytes, an include glob, a ``.npy`` header, a reference file's top-level
names and imports, the imports of a module a reference imports (where
each module was looked for is a ``kind`` fact: :mod:`.imports`). Each
answer is also kept as a :class:`Read`, a fact the validation depended
on, with a root-relative POSIX path:

==============  ==================  =========================================
kind            path                value
==============  ==================  =========================================
``file``        a manifest          SHA-256 (hex) of its bytes
``kind``        any path checked    ``regular``, ``dir``, ``missing``,
                                    ``fifo``, ``chardev``, ``blockdev``,
                                    ``socket``, ``loop``, ``unreadable``
``real``        any path resolved   its real path (root-relative)
``glob``        the pattern's base  (pattern, ((match, kind), ...), problem)
``npy``         a ``.npy`` file     SHA-256 of its header, or ``!`` + why not
``reference``   a reference ``.py`` SHA-256 of its bytes, or ``!`` + why not
``module``      a local module a    SHA-256 of its bytes, or ``!`` + why not
                reference imports
``source``      a shape source      SHA-256 of its bytes, or ``!`` + why not
``allow``       an allowed root     its real path (root-relative)
==============  ==================  =========================================

:func:`reads_still_hold` asks each question again: a cache of a validated
collection is still good exactly when it returns True.

Only regular files are ever opened, without blocking (a FIFO, a device or a
socket is named by :meth:`Recorder.kind`, never read), and each read is
bounded (:data:`~gpsimd_build.fileread.MAX_MANIFEST_BYTES`,
:data:`~.probes.MAX_NPY_HEADER_BYTES`, :data:`~.probes.MAX_REFERENCE_BYTES`).
"""

import hashlib
import os
import stat
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..fileread import MAX_MANIFEST_BYTES, read_regular_file
from .paths import GlobBudget, PathPolicy, kind_of_path, real_path, walk_glob
from .probes import MAX_REFERENCE_BYTES, imports, read_npy_header, top_level_names

#: Bytes of a shape source the loader reads (``gpsimd_build.shapesrc``).
MAX_SOURCE_BYTES = 1 << 20


class Read(NamedTuple):
    """One fact a validation depended on (see the module docstring)."""

    kind: str
    path: str
    value: Any


class _Facts:
    """How each kind of fact is computed from the filesystem, relative to a
    root (shared by the recorder and :func:`reads_still_hold`)."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.root_real = os.path.realpath(root)

    def rel(self, absolute: str) -> str:
        """``absolute`` relative to the root, POSIX separators."""
        return os.path.relpath(absolute, self.root).replace(os.sep, "/")

    def absolute(self, rel: str) -> str:
        """The absolute path of a root-relative path."""
        return os.path.normpath(os.path.join(self.root, rel))

    def kind(self, absolute: str) -> str:
        return kind_of_path(absolute)

    def real(self, absolute: str) -> str:
        try:
            return self.rel(real_path(absolute))
        except (OSError, ValueError):
            return self.rel(absolute)

    def file(self, absolute: str) -> Tuple[str, bytes]:
        data = read_regular_file(absolute, MAX_MANIFEST_BYTES)
        return hashlib.sha256(data).hexdigest(), data

    def npy(self, absolute: str) -> Tuple[str, Any]:
        try:
            fd = _open_regular(absolute)
            with os.fdopen(fd, "rb") as stream:
                descr, shape, header = read_npy_header(stream)
        except (OSError, ValueError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            return "!" + why, err
        return hashlib.sha256(header).hexdigest(), (descr, shape)

    def reference(self, absolute: str, names: bool = True) -> Tuple[str, Any]:
        """The digest of a Python file (a reference, or a module one
        imports) and (``names``) what its text says: ``(top-level names,
        imports)`` (:mod:`.probes`); the digest alone decides whether the
        fact still holds."""
        try:
            data = read_regular_file(absolute, MAX_REFERENCE_BYTES)
        except OSError as err:
            why = err.strerror or str(err)
            return "!" + why, (f"cannot be read ({why})", None)
        return hashlib.sha256(data).hexdigest(), \
            (top_level_names(data), imports(data)) if names else None

    def source(self, absolute: str) -> Tuple[str, Any]:
        """The digest of a shape source and its text (or why it cannot be
        read, a string starting with ``!`` in the digest)."""
        try:
            data = read_regular_file(absolute, MAX_SOURCE_BYTES)
        except OSError as err:
            why = err.strerror or str(err)
            return "!" + why, OSError(0, why)
        return hashlib.sha256(data).hexdigest(), data.decode("utf-8", "replace")

    def glob(self, base: str, pattern: Tuple[str, ...], policy: PathPolicy,
             budget: GlobBudget) -> Tuple[Any, List[Tuple[str, str]]]:
        matches, problem = walk_glob(base, pattern, policy.inside, budget)
        value = ("/".join(pattern), tuple((self.rel(p), k) for p, k in matches), problem)
        return value, matches


def _open_regular(absolute: str) -> int:
    """A read-only descriptor of the regular file ``absolute``; OSError
    (with words) for anything else. Never blocks on a FIFO."""
    kind = kind_of_path(absolute)
    if kind != "regular":
        raise OSError(0, "not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(absolute, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since it was looked at
        os.close(fd)
        raise OSError(0, "not a regular file")
    return fd


def _real(absolute: str) -> str:
    try:
        return real_path(absolute)
    except (OSError, ValueError):  # pragma: no cover - a NUL byte, a vanished folder
        return absolute


class Recorder:
    """Answers the loader's filesystem questions and keeps each answer as a
    :class:`Read`. One recorder serves one load; answers are cached for it
    (a file named twice is looked at once)."""

    def __init__(self, root: str):
        self.facts = _Facts(root)
        self.root = self.facts.root
        self.root_real = self.facts.root_real
        self.glob_budget = GlobBudget()
        self._reads: Dict[Tuple[str, str, str], Read] = {}
        self._cache: Dict[Tuple[str, str], Any] = {}
        self._rel: Dict[str, str] = {}
        #: answers a load computes from the facts, kept for that load
        #: (e.g. each reference's imports, :mod:`.imports`)
        self.memo: Dict[str, Any] = {}

    @property
    def reads(self) -> Tuple[Read, ...]:
        """Every fact recorded, in the order first asked."""
        return tuple(self._reads.values())

    def absolute(self, path: str) -> str:
        """``path`` as an absolute path: a relative one is relative to the
        root (never to the working directory)."""
        return os.path.normpath(os.path.join(self.root, path))

    def rel(self, absolute: str) -> str:
        """``absolute`` relative to the root, POSIX separators."""
        rel = self._rel.get(absolute)
        if rel is None:
            rel = self._rel[absolute] = self.facts.rel(absolute)
        return rel

    def _keep(self, kind: str, absolute: str, value: Any, extra: str = "") -> None:
        key = (kind, absolute, extra)
        if key not in self._reads:
            self._reads[key] = Read(kind, self.rel(absolute), value)

    def _cached(self, kind: str, absolute: str, compute: Callable[[], Any]) -> Any:
        key = (kind, absolute)
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def kind(self, absolute: str) -> str:
        """What ``absolute`` is, symlinks followed (never opened): ``regular``,
        ``dir``, ``missing``, ``fifo``, ``chardev``, ``blockdev``, ``socket``,
        ``loop`` (a symlink loop), ``unreadable``, ``other``."""
        kind = self._cached("kind", absolute, lambda: self.facts.kind(absolute))
        self._keep("kind", absolute, kind)
        return kind

    def real(self, absolute: str) -> str:
        """The real (symlink-free, absolute) path of ``absolute``."""
        real = self._cached("real", absolute, lambda: _real(absolute))
        self._keep("real", absolute, self.rel(real))
        return real

    def allow(self, absolute: str) -> str:
        """Record an allowed outside root; its real path."""
        real = _real(absolute)
        self._keep("allow", absolute, self.rel(real))
        return real

    def manifest_bytes(self, absolute: str) -> bytes:
        """The bytes of a manifest file (regular, at most
        :data:`~gpsimd_build.fileread.MAX_MANIFEST_BYTES`). Raises OSError
        (``strerror`` says why) for anything else."""
        digest, data = self.facts.file(absolute)
        self._keep("file", absolute, digest)
        return data

    def npy_header(self, absolute: str) -> Tuple[str, Tuple[int, ...]]:
        """(numpy descr, shape) of a ``.npy`` file (a regular file; at most
        :data:`~.probes.MAX_NPY_HEADER_BYTES` of header read). Raises
        ValueError or OSError saying why it cannot be read."""
        value, result = self._cached("npy", absolute, lambda: self.facts.npy(absolute))
        self._keep("npy", absolute, value)
        if isinstance(result, Exception):
            raise result
        return result

    def reference_names(self, absolute: str):
        """The top-level names of a reference ``.py`` file (see
        :func:`~.probes.top_level_names`): a frozenset, None (cannot tell),
        or a message saying why it cannot be read or parsed."""
        value, said = self._cached("reference", absolute,
                                   lambda: self.facts.reference(absolute))
        self._keep("reference", absolute, value)
        return said[0]

    def reference_imports(self, absolute: str):
        """The imports of a reference ``.py`` file, as :meth:`module_imports`."""
        value, said = self._cached("reference", absolute,
                                   lambda: self.facts.reference(absolute))
        self._keep("reference", absolute, value)
        return said[1]

    def module_imports(self, absolute: str):
        """The imports (:func:`~.imports.imports_of`) of a Python module a
        reference imports, or None when it cannot be read (a regular file
        of at most :data:`~.probes.MAX_REFERENCE_BYTES`) or parsed."""
        value, said = self._cached("reference", absolute,
                                   lambda: self.facts.reference(absolute))
        self._keep("module", absolute, value)
        return said[1]

    def module_unread(self, absolute: str) -> Optional[str]:
        """Why a Python module a reference imports cannot be read
        (``"cannot be read (why)"``: too large, not a regular file, no
        permission), or None (it was read, whether it parses or not)."""
        value, said = self._cached("reference", absolute,
                                   lambda: self.facts.reference(absolute))
        return said[0] if value.startswith("!") else None

    def source_text(self, absolute: str) -> str:
        """The text of a shape source (a regular file of at most
        :data:`MAX_SOURCE_BYTES`, decoded as UTF-8 with replacement).
        Raises OSError (``strerror`` says why) when it cannot be read."""
        value, text = self._cached("source", absolute, lambda: self.facts.source(absolute))
        self._keep("source", absolute, value)
        if isinstance(text, Exception):
            raise text
        return text

    def glob(self, base: str, pattern: Tuple[str, ...],
             policy: PathPolicy) -> Tuple[List[Tuple[str, str]], Optional[str]]:
        """Expand an include pattern (parts ``pattern`` under the folder
        ``base``, see :func:`~.paths.walk_glob`): ((absolute match, kind),
        ...) and the problem (None, ``"matches"``, ``"entries"``)."""
        key = base + "\0" + "/".join(pattern)
        value, matches = self._cached(
            "glob", key, lambda: self.facts.glob(base, pattern, policy, self.glob_budget))
        self._keep("glob", base, value, value[0])
        return matches, value[2]


def reads_still_hold(reads: Iterable[Read], root: str = ".") -> bool:
    """Whether every fact of ``reads`` (a :attr:`Collection.reads`) is still
    true of the filesystem under ``root``: each file's kind, real path and
    content digest, each glob's matches. Cheap: manifests and references
    are read and hashed, ``.npy`` files only to their header, nothing is
    parsed. Never raises for a changed or vanished file (False)."""
    reads = tuple(reads)
    facts = _Facts(root)
    policy = PathPolicy(facts.root_real)
    for read in reads:
        if read.kind == "allow":
            policy.allow(_real(facts.absolute(read.path)))
    budget = GlobBudget()
    for read in reads:
        absolute = facts.absolute(read.path)
        try:
            if read.kind == "kind":
                now: Any = facts.kind(absolute)
            elif read.kind in ("real", "allow"):
                now = facts.real(absolute)
            elif read.kind == "file":
                now = facts.file(absolute)[0]
            elif read.kind == "npy":
                now = facts.npy(absolute)[0]
            elif read.kind in ("reference", "module"):
                now = facts.reference(absolute, names=False)[0]
            elif read.kind == "source":
                now = facts.source(absolute)[0]
            elif read.kind == "glob":
                pattern = tuple(read.value[0].split("/"))
                now = facts.glob(absolute, pattern, policy, budget)[0]
            else:
                return False
        except (OSError, ValueError):
            return False
        if now != read.value:
            return False
    return True
