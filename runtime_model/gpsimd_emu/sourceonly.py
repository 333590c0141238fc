"""A reference's loading and calls (:func:`load_reference`): references,
and the modules they import from the project, compiled from their source
at every run, never from a bytecode cache (whose check goes by whole
seconds), each reference with modules of its own (:func:`own_modules`), so
that every project module file it runs is known and one the build did not
count as its dependency fails its vectors (docs/manifest.md). A module is
the project's when it comes from the reference's folder or the project's
root, as the build counts them (``gpsimd_build.manifest.imports``), and
from no more specific ``sys.path`` entry (a virtual environment inside the
project keeps its caches).
"""

import contextlib
import importlib
import importlib.machinery
import importlib.util
import itertools
import os
import signal
import sys
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from gpsimd_device.plan import PlanError, ReferenceSpec

__all__ = ["OutOfTime", "SourceOnlyLoader", "counted", "load_reference", "local_folder",
           "own_modules", "reference_scope", "short_exc", "time_limit", "user_frame"]

#: The sets of :func:`own_modules` in progress, each given the path of
#: every module a :class:`SourceOnlyLoader` runs.
_LOADING: List[Set[str]] = []
#: The name of every module a :class:`SourceOnlyLoader` ran in this
#: process (so that :func:`own_modules` never walks all of ``sys.modules``).
_NAMES: Set[str] = set()
#: Those of the project's namespace packages (folders without ``__init__``).
_NAMESPACES: Set[str] = set()


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """A source file's module, compiled from its text every time (no
    bytecode read or written)."""

    def get_code(self, fullname):
        return self.source_to_code(self.get_data(self.path), self.path)

    def exec_module(self, module):
        _NAMES.add(module.__name__)
        for loaded in _LOADING:
            loaded.add(self.path)
        super().exec_module(module)


def _project(module) -> bool:
    """Is ``module`` the project's: one a :class:`SourceOnlyLoader` loaded,
    or a namespace package of the local folders?"""
    if isinstance(getattr(module, "__loader__", None), SourceOnlyLoader):
        return True
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.origin is None and spec.name in _NAMESPACES


@contextlib.contextmanager
def own_modules(mine: Dict[str, object], loaded: Set[str]):
    """A reference's load or call: of the project's modules (those a
    :class:`SourceOnlyLoader` loaded), ``sys.modules`` holds only ``mine``,
    those this reference loaded before, so that each other one it reaches,
    however it names it (one an earlier reference loaded too), is loaded
    again and its file (absolute) added to ``loaded``; then the modules
    loaded join ``mine`` and the others are back. (A loaded reference keeps
    its modules: its globals hold them; each reference has its own, an
    ``import helpers`` finds its own folder's whatever ran before.)"""
    others = _take()
    sys.modules.update(mine)
    count = len(sys.modules)
    _LOADING.append(loaded)
    try:
        yield
    finally:
        _LOADING.remove(loaded)
        if len(sys.modules) != count:   # (modules came: one under a name of its own making too)
            _NAMES.update(name for name, m in list(sys.modules.items()) if _project(m))
        mine.update(_take())
        sys.modules.update(others)


def _take() -> Dict[str, object]:
    """The project's modules, taken out of ``sys.modules``."""
    return {name: sys.modules.pop(name) for name in sorted(_NAMES)
            if _project(sys.modules.get(name))}


def counted(ref: ReferenceSpec, loaded: Set[str], root: str) -> None:
    """Raise PlanError when the reference ``ref`` loaded (``loaded``, as
    :func:`own_modules` fills it) a project module file the build did not
    count as its dependency (``ref.imports``, root-relative; None: not
    checked)."""
    counted = {os.path.normpath(p).replace(os.sep, "/") for p in (ref.imports or ()) + (
        (ref.file,) if ref.file else ())}
    extra = sorted({os.path.relpath(p, os.path.abspath(root)).replace(os.sep, "/")
                    for p in loaded} - counted) if ref.imports is not None else []
    if extra:
        raise PlanError(f"reference {ref.label}:{ref.function} imported {', '.join(extra)}, "
                        "which the build cannot see as a dependency (a computed import): an "
                        "edit to it would not run this test again; import it with a plain "
                        "import statement (docs/manifest.md)")


class _LocalFinder:
    """Python's path finder, with :class:`SourceOnlyLoader` for the source
    modules of the local folders (placed just before the path finder in
    ``sys.meta_path``: built-in modules keep their precedence)."""

    def __init__(self) -> None:
        self.folders: Set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader \
                and self._local(spec.origin):
            spec.loader = SourceOnlyLoader(fullname, spec.origin)
        elif spec is not None and spec.origin is None and any(
                self._local(os.path.join(p, "__init__.py"))
                for p in spec.submodule_search_locations or ()):
            _NAMES.add(fullname)        # (a namespace package of the project's)
            _NAMESPACES.add(fullname)
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


def local_folder(folder: str, root: str) -> None:
    """Before a reference of ``folder`` loads or is called: make ``folder``
    and the project's ``root`` local, so that a module imported from them
    from now on is compiled from its source."""
    _FINDER.folders.update({os.path.abspath(folder), os.path.abspath(root)})
    if _FINDER not in sys.meta_path:
        at = next((k for k, f in enumerate(sys.meta_path)
                   if f is importlib.machinery.PathFinder), len(sys.meta_path))
        sys.meta_path.insert(at, _FINDER)


_REF_CACHE: Dict[Tuple[Optional[str], Optional[str]], Any] = {}
_REF_COUNTER = itertools.count()


class OutOfTime(BaseException):
    """Raised in a reference's code by :func:`time_limit`'s alarm (a
    BaseException, so that an ``except Exception`` of the reference does
    not take it for its own)."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Run the block (a reference's import and call) within ``seconds``:
    past them a SIGALRM raises :class:`OutOfTime` in it, made here the
    PlanError ``<what> did not return within N s``. A reference runs in
    the worker, outside any run of the cores, so that without it one that
    never returns held the whole test run until the supervisor's limit
    (six runs per vector and more: an hour at the default 60 s). The
    worker runs references in its main thread; in another (a caller of
    ``LibrarySession`` of its own), where no signal handler can be set,
    the block runs without this limit, under the supervisor's alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise OutOfTime()
    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except OutOfTime:
        raise PlanError(f"{what} did not return within {seconds:g} s (the vector's time "
                        "limit)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Output:
    """This process's reader of references' output: a pipe and a thread
    that reads it, made once (and again in a forked child); a call's end is
    a token of this reader written after it (what a process the reference
    left writes after the token is dropped)."""

    def __init__(self) -> None:
        self.pid, self.token = os.getpid(), os.urandom(16)
        self.r, self.w = os.pipe()
        self.ended = threading.Event()
        self.start()
        threading.Thread(target=self._drain, name="reference output", daemon=True).start()

        #: the threads a call started that outlived it (``_Routed``)
        self.left: Set[int] = set()

    def start(self) -> None:
        self.head, self.tail, self.total, self.carry = bytearray(), bytearray(), 0, b""
        self.ended.clear()
        if getattr(self, "stream", None) is None or self.stream.closed:    # (a call closed it)
            self.stream = open(self.w, "w", encoding="utf-8", errors="backslashreplace",
                               closefd=False)

    def _drain(self) -> None:
        from .control import ZY
        keep, n = ZY["OUTPUT_KEEP"], len(self.token)
        while True:
            data = os.read(self.r, 1 << 16)
            if self.ended.is_set():
                continue
            data = self.carry + data
            at = data.find(self.token)
            end = at if at >= 0 else max(len(data) - n + 1, 0)
            mine, self.carry = data[:end], (b"" if at >= 0 else data[end:])
            self.total += len(mine)
            room = keep - len(self.head)
            self.head += mine[:room]
            self.tail = (self.tail + mine[max(room, 0):])[-keep:]
            if at >= 0:
                self.ended.set()

    def text(self) -> str:
        """What the call wrote: the kept bytes, and how many were dropped."""
        from .control import kept_text
        return kept_text(self.head, self.tail, self.total)


_OUTPUT: List[_Output] = []


class _Routed:
    """``sys.stdout`` or ``sys.stderr`` after a call that left threads
    running: what those threads write goes to the references' pipe (the
    next call's output, or dropped between calls), never to ``stream``,
    the process's own (printed by a thread a reference left, a ``PASS``
    line reached the build's output as the emulator's)."""

    def __init__(self, stream, out: _Output) -> None:
        self.stream, self.out = stream, out

    def _target(self):
        return self.out.stream if threading.get_ident() in self.out.left else self.stream

    def write(self, text):
        return self._target().write(text)

    def flush(self):
        return self._target().flush()

    def __getattr__(self, name):
        return getattr(self._target(), name)


@contextlib.contextmanager
def reference_scope(seconds: float, what: str, prefix: str):
    """Run the block, a reference's import and call, in the worker: within
    ``seconds`` (:func:`time_limit`), what it writes kept and shown after
    ``prefix`` (:func:`_shown_output`), and the working folder and umask
    it may change given back after it (a reference that changed folder
    made every later vector's relative paths, and the results file, miss)."""
    folder, mask = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), os.umask(0o22)
    os.umask(mask)
    try:
        with _shown_output(prefix), time_limit(seconds, what):
            yield
    finally:
        os.fchdir(folder)
        os.close(folder)
        os.umask(mask)


@contextlib.contextmanager
def _shown_output(prefix: str):
    """Run the block (a reference's import and call) with its stdout and
    stderr (``sys.stdout``, ``sys.stderr`` and file descriptors 1 and 2,
    one stream) read by a thread and
    kept as the cores' are (``GPSIMD_ZY_OUTPUT_KEEP`` bytes from the start
    and as many from the end, the rest counted), then printed to stderr,
    each line after ``prefix`` and made visible (``gpsimd_device.printable``).
    Written straight to the worker's streams, a reference that printed in a
    loop flooded the build's output, and one that printed a ``PASS`` line
    or a carriage return was taken for the emulator's own text."""
    from gpsimd_device.printable import prefixed
    if not _OUTPUT or _OUTPUT[0].pid != os.getpid():
        _OUTPUT[:] = [_Output()]
    out = _OUTPUT[0]
    out.start()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved, streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
    threads = set(threading.enumerate())
    os.dup2(out.w, 1)
    os.dup2(out.w, 2)
    sys.stdout = sys.stderr = out.stream
    try:
        yield
    finally:
        # (what it left in a buffer of the process's streams is its own:
        # written while fds 1 and 2 are still the pipe; it may have closed one)
        for stream in (out.stream, *streams, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        alive = set(threading.enumerate())
        out.left = {t.ident for t in alive - threads} | (out.left & {t.ident for t in alive})
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        sys.stdout, sys.stderr = (s if isinstance(s, _Routed) or not out.left else
                                  _Routed(s, out) for s in map(_open, streams, (1, 2)))
        os.write(out.w, out.token)
        out.ended.wait()
        if out.total:
            print("\n".join(prefixed(prefix, out.text())), file=sys.stderr, flush=True)


def _open(stream, fd: int):
    """``stream``, the process's own ``sys.stdout`` or ``sys.stderr`` (on
    ``fd``), or, when a reference closed it (``sys.__stdout__.close()``),
    a new one on ``fd`` in its place (``sys.__stdout__`` too): the worker's
    next line raised, and the whole run's results were lost, unsaid."""
    own = stream.stream if isinstance(stream, _Routed) else stream
    if not getattr(own, "closed", False):
        return stream
    again = open(fd, "w", buffering=1 if own.line_buffering else -1, encoding=own.encoding,
                 errors=own.errors, closefd=False)
    for name in ("__stdout__", "__stderr__"):
        if getattr(sys, name) is own:
            setattr(sys, name, again)
    if isinstance(stream, _Routed):
        stream.stream = again
        return stream
    return again


def short_exc(e: BaseException) -> str:
    """``Type: message`` of ``e``, cut to 400 characters."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 400 else text[:400] + "..."


@contextlib.contextmanager
def _in_folder(folder: str, root: str, mine: Dict[str, Any], loaded: Set[str]):
    """``folder`` and the project's ``root`` local (``sourceonly.local_folder``)
    and first on ``sys.path``, ``folder`` before it, and the reference's own
    modules in ``sys.modules`` (``sourceonly.own_modules``), for a
    reference's load and each call, wherever this process runs."""
    local_folder(folder, root)
    sys.path[:0] = [folder, root]
    try:
        with own_modules(mine, loaded):
            yield
    finally:
        for entry in (folder, root):
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def load_reference(ref: ReferenceSpec, root: str = ".") -> Callable:
    """The reference function ``ref.function`` of ``ref.file`` (imported by
    path under a unique module name) or of the importable ``ref.module``,
    loaded and called in its folder (the project's root for a module) with
    its own modules (``_in_folder``); cached per file/module for the process.

    Raises:
        PlanError: the file/module cannot be imported (message gives the
            exception and the failing line of the reference), it has no
            callable ``function``, or it loaded (as it loads and, from the
            function returned, as it runs) a project module the build did
            not count as its dependency (``ref.imports``, when given).
    """
    file, module, func = ref.file, ref.module, ref.function
    if not func:
        raise PlanError("reference without a function")
    if not (file or module):
        raise PlanError("reference needs a file or a module")
    full = os.path.join(root, file) if file else None
    top = os.path.abspath(root)
    folder = os.path.dirname(os.path.abspath(full)) if full else top
    cached = _REF_CACHE.get((full, module))
    if cached is None:
        if file and not os.path.isfile(full):
            raise PlanError(f"reference {file}: no such file")
        mine: Dict[str, Any] = {}
        loaded: Set[str] = set()
        try:
            with _in_folder(folder, top, mine, loaded):
                if module and not file:
                    mod = importlib.import_module(module)
                else:
                    stem = os.path.splitext(os.path.basename(full))[0]
                    name = f"_gpsimd_ref_{next(_REF_COUNTER)}_{stem}"
                    # (with a loader given, a spec is always made)
                    spec = importlib.util.spec_from_file_location(
                        name, full, loader=SourceOnlyLoader(name, full))
                    mod = sys.modules[name] = importlib.util.module_from_spec(spec)
                    try:
                        spec.loader.exec_module(mod)
                    except BaseException:
                        sys.modules.pop(name, None)
                        raise
        except OutOfTime:           # (time_limit says so)
            raise
        except BaseException as e:  # SyntaxError, ImportError, SystemExit, ...
            raise PlanError(f"reference {ref.label} cannot be imported: {short_exc(e)}"
                            f"{user_frame(e, file)}") from None
        cached = _REF_CACHE[(full, module)] = (mod, mine, loaded, [-1])
    mod, mine, loaded, checked = cached

    def check() -> None:
        """``counted``, once for each set of modules ``loaded`` (it only grows)."""
        if len(loaded) != checked[0]:
            counted(ref, loaded, root)
            checked[0] = len(loaded)
    check()
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise PlanError(f"reference {ref.label} has no function {func!r}")

    def call(*args):
        with _in_folder(folder, top, mine, loaded):
            result = fn(*args)
        check()
        return result
    return call


def user_frame(e: BaseException, file: Optional[str]) -> str:
    """`` (at file:line)`` of the innermost frame in the reference file."""
    if isinstance(e, SyntaxError) and e.lineno:
        return f" (at {file or e.filename}:{e.lineno})"
    base = os.path.basename(file) if file else None
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if base and os.path.basename(fr.filename) == base:
            return f" (at {file}:{fr.lineno})"
    return ""
