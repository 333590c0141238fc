"""Where a manifest may point, and include globs that always end.

:class:`PathPolicy` is the trust rule for paths (docs/manifest.md "Trust model"):
every path a manifest names (``include:``, ``sources``, ``includes``,
``.npy`` files, reference ``.py`` files) must resolve, after symlinks,
inside the project's root or inside a folder the top manifest's
``allow_paths:`` or the user's ``ALLOW_PATHS=`` allows.

:func:`walk_glob` expands one include pattern (``*``, ``?``, ``[..]``,
``**`` for any depth, as :mod:`glob` does: hidden names only for a part that
starts with ``.``). Unlike :func:`glob.glob` it visits each real directory
once per pattern part (a symlink to a directory is followed once, a loop is
seen and left), never enters a directory outside the allowed roots, and
stops after :data:`MAX_GLOB_MATCHES` matches of one pattern or
:data:`MAX_GLOB_ENTRIES` directory entries examined by one collection.
"""

import fnmatch
import os
import re
import stat
from typing import Callable, Dict, List, Optional, Sequence, Tuple

#: Most files one include pattern may match.
MAX_GLOB_MATCHES = 1000
#: Most directory entries the include patterns of one collection may list
#: (each folder listed once, whatever the number of patterns; about 1 s; a
#: walk through a larger tree stops here with an error).
MAX_GLOB_ENTRIES = 500_000

_MAGIC = re.compile(r"[*?\[]")


def has_magic(text: str) -> bool:
    """Whether ``text`` is a glob pattern (``*``, ``?`` or ``[``)."""
    return _MAGIC.search(text) is not None


def kind_of_mode(mode: int) -> str:
    """The file kind of a ``stat`` mode: ``"regular"``, ``"dir"``, ``"fifo"``,
    ``"chardev"``, ``"blockdev"``, ``"socket"`` or ``"other"``."""
    if stat.S_ISREG(mode):
        return "regular"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode):
        return "chardev"
    if stat.S_ISBLK(mode):
        return "blockdev"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "other"


def kind_of_path(absolute: str) -> str:
    """The kind of what ``absolute`` names, symlinks followed: a
    :func:`kind_of_mode` kind, ``"missing"`` (nothing there, a dangling
    symlink, a file used as a folder), ``"loop"`` (a symlink loop) or
    ``"unreadable"`` (no permission to look, a name too long)."""
    try:
        return kind_of_mode(os.stat(absolute).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as err:
        return "loop" if err.errno == 40 else "unreadable"
    except ValueError:  # a NUL byte in the path
        return "missing"


#: A file kind in words, for messages ("is a FIFO (named pipe)").
KIND_WORDS = {
    "regular": "a regular file", "dir": "a directory", "fifo": "a FIFO (named pipe)",
    "chardev": "a character device", "blockdev": "a block device", "socket": "a socket",
    "other": "not a regular file", "loop": "a symlink loop",
    "unreadable": "not readable (no permission to look)", "missing": "missing",
}


def real_path(absolute: str) -> str:
    """``os.path.realpath`` of a normalised absolute path, in time that
    grows with the part of it that exists: the components after the first
    missing one are joined as written (Python's realpath looks each one up,
    which costs the square of the path's length)."""
    parts = absolute.split(os.sep)
    current = parts[0] + os.sep if parts[0] else os.sep
    for i in range(1, len(parts)):
        if not parts[i]:
            continue
        following = os.path.join(current, parts[i])
        try:
            os.lstat(following)
        except (OSError, ValueError):
            rest = [p for p in parts[i:] if p]
            return os.path.normpath(os.path.join(os.path.realpath(current), *rest))
        current = following
    return os.path.realpath(absolute)


class PathPolicy:
    """The folders a manifest's paths may resolve into: the root, and the
    allowed outside roots (real paths)."""

    def __init__(self, root_real: str):
        self.roots: List[str] = [root_real]

    def allow(self, real: str) -> None:
        """Allow the folder ``real`` (a real path) and everything under it."""
        if real not in self.roots:
            self.roots.append(real)

    def inside(self, real: str) -> bool:
        """Whether the real path ``real`` is in an allowed folder."""
        for top in self.roots:
            if real == top or real.startswith(top if top.endswith(os.sep) else top + os.sep):
                return True
        return False


class GlobBudget:
    """Directory entries the include patterns of one collection may still
    list (:data:`MAX_GLOB_ENTRIES`), and the listings made so far (by real
    folder: a folder is listed once per collection)."""

    def __init__(self, entries: Optional[int] = None):
        self.entries = MAX_GLOB_ENTRIES if entries is None else entries
        self.listings: Dict[Tuple[int, int], List[Tuple[str, bool, bool]]] = {}


def split_pattern(written: str) -> Tuple[List[str], List[str]]:
    """(literal leading parts, the rest from the first part with a magic
    character) of a relative pattern, split on ``/`` (and ``os.sep``)."""
    parts = [p for p in re.split(r"[/" + re.escape(os.sep) + r"]", written) if p not in ("", ".")]
    for i, part in enumerate(parts):
        if has_magic(part):
            return parts[:i], parts[i:]
    return parts, []


def walk_glob(base: str, rest: Sequence[str], inside: Callable[[str], bool],
              budget: GlobBudget) -> Tuple[List[Tuple[str, str]], Optional[str]]:
    """Expand the pattern parts ``rest`` under the directory ``base``.

    Returns (matches, problem): each match is (absolute path as reached,
    file kind) for a name that is not a directory (regular files and special
    files alike; dangling symlinks are left out), sorted; ``problem`` is
    None, ``"matches"`` (more than :data:`MAX_GLOB_MATCHES`) or
    ``"entries"`` (the budget ran out). Directories whose real path
    ``inside`` refuses are not entered.
    """
    matches: List[Tuple[str, str]] = []
    seen = set()
    queue: List[Tuple[str, int]] = [(base, 0)]
    last = len(rest) - 1
    head = 0
    while head < len(queue):
        folder, index = queue[head]
        head += 1
        try:
            st = os.stat(folder)
        except (OSError, ValueError):
            continue
        ident = (st.st_dev, st.st_ino, index)
        if ident in seen or not stat.S_ISDIR(st.st_mode):
            continue
        seen.add(ident)
        part = rest[index]
        if part == "**" and index < last:
            queue.append((folder, index + 1))   # ** matches no folder too
        if not has_magic(part):           # a literal part after a magic one
            target = os.path.join(folder, part)
            if index < last:
                queue.append((target, index + 1))
            else:
                _add_match(matches, target)
                if len(matches) > MAX_GLOB_MATCHES:
                    return sorted(matches)[:MAX_GLOB_MATCHES], "matches"
            continue
        entries = budget.listings.get(ident[:2])
        if entries is None:
            try:
                with os.scandir(folder) as scan:
                    entries = []
                    for entry in scan:
                        budget.entries -= 1
                        if budget.entries < 0:
                            return matches, "entries"
                        entries.append((entry.name, _is_dir(entry), entry.is_symlink()))
            except (OSError, ValueError):
                continue
            entries.sort()
            budget.listings[ident[:2]] = entries
        hidden_ok = part.startswith(".")
        for name, is_dir, is_link in entries:
            if name.startswith(".") and not hidden_ok:
                continue
            path = os.path.join(folder, name)
            if part == "**":
                if is_dir:
                    if not is_link or inside(real_path(path)):
                        queue.append((path, index))
                elif index == last:
                    _add_match(matches, path)
            elif not fnmatch.fnmatchcase(name, part):
                continue
            elif index < last:
                if is_dir and (not is_link or inside(real_path(path))):
                    queue.append((path, index + 1))
            elif not is_dir:
                _add_match(matches, path)
            if len(matches) > MAX_GLOB_MATCHES:
                return sorted(matches)[:MAX_GLOB_MATCHES], "matches"
    matches.sort()
    return matches, None


def _is_dir(entry: "os.DirEntry[str]") -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _add_match(matches: List[Tuple[str, str]], path: str) -> None:
    kind = kind_of_path(path)
    if kind not in ("dir", "missing"):
        matches.append((path, kind))
