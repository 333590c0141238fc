"""Is a build folder safe to build in?

Every file the build writes in ``BUILD_DIR`` (ours, the compiler's, the
linker's, SCons's database, ninja's) is written by whoever runs the build,
root included. Another user who can create entries in that folder, or in a
folder inside it, or replace a folder or link on the way to it, can plant a
symbolic or hard link where an output will be written, and have the build
overwrite any file its user may write; or plant a file the build reads back
(its cached manifest is a pickle). Our own writes refuse links
(``gpsimd_device.atomic``, the lock), but the other tools' do not, so the
real protection is the folder, as git's ``safe.directory`` check is for a
repository: :func:`check` refuses

* a build folder owned by another user (root excepted) or writable by
  others (``o+w``, sticky or not);
* a folder inside it owned by another user or writable by others, and a
  symbolic link inside it owned by another user;
* on the way to it, as written and as the links resolve, a folder owned by
  another user or writable by others without the sticky bit, or a
  symbolic link owned by another user, up to the first folder owned by
  root or carrying the sticky bit.

Before anything is read from the folder or written to it, a build makes it
when it is missing (:func:`make`: by this process, so that no other user's
folder can take its name after the check: in a sticky folder such as /tmp
no one may rename over another's entry) and then checks it whole; a run
that makes nothing (``scons -h``, ``-c``) reads nothing from a folder that
was not there before its check. The check reads again only the folders
that changed since the last one (:data:`REMEMBERED`): a build of 5,000 ops
has about 2,000 folders, 60 ms to read whole, 6 ms to ``lstat``.
"""

import contextlib
import json
import os
import pwd
import stat
import tempfile

from gpsimd_device.atomic import open_private

__all__ = ["UnsafeBuildFolder", "check", "check_cache", "make"]


class UnsafeBuildFolder(Exception):
    """The build folder is not safe to build in; the message says why and
    how to fix it."""


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _planted(what: str, path: str, uid: int, me: int) -> UnsafeBuildFolder:
    return UnsafeBuildFolder(
        f"{what} {path} is owned by {_owner(uid)}, not by you ({_owner(me)}): that user could "
        f"plant links there that this build would write through. Build into a folder of your "
        f"own (BUILD_DIR=...), or give this one to yourself (chown)")


def _open_to_all(what: str, path: str, mode: int) -> UnsafeBuildFolder:
    return UnsafeBuildFolder(
        f"{what} {path} is writable by every user (mode {stat.S_IMODE(mode):o}): another user "
        f"could plant links there that this build would write through. Take that right away "
        f"(chmod o-w {path}), or build into a folder of your own")


def _walk_up(path: str, me: int, first: str, depth: int = 0) -> None:
    """Check ``path`` and the folders above it, as written (a symbolic link
    on the way is checked, and where it leads too), up to the first folder
    owned by root or carrying the sticky bit. ``first``: how to name
    ``path`` itself (the build folder is held to the strict rule)."""
    strict = first == "the build folder"
    what = first
    while True:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (me, 0):
                raise _planted(f"{what.rstrip(',')}, a symbolic link,", path, st.st_uid, me)
            if depth < 8:
                # every link its resolution meets (a link in its target
                # too) is checked, and every folder it passes through (one
                # it leaves again by '..' too): whoever may replace one
                # points the build elsewhere
                links, folders = _resolution(path)
                for link in links:
                    owner = os.lstat(link).st_uid
                    if owner not in (me, 0):
                        raise _planted(f"a symbolic link on the way to {first.rstrip(',')} "
                                       f"{path},", link, owner, me)
                for folder in folders:
                    _walk_up(folder, me, "the folder above the build folder,", depth + 1)
                # where it leads: resolved whole, so no link is left
                target = os.path.realpath(path)
                while not os.path.lexists(target):      # (a link to nothing yet)
                    target = os.path.dirname(target)
                _walk_up(target, me, what if target == os.path.realpath(path) else
                         "the folder above the build folder,", depth + 1)
        elif stat.S_ISDIR(st.st_mode):
            sticky = bool(st.st_mode & stat.S_ISVTX)
            if st.st_uid not in (me, 0):
                raise _planted(what, path, st.st_uid, me)
            if st.st_mode & stat.S_IWOTH and (strict or not sticky):
                raise _open_to_all(what, path, st.st_mode)
            if not strict and (st.st_uid == 0 or sticky):
                return
        else:
            raise UnsafeBuildFolder(f"{what} {path} is not a folder")
        parent = os.path.dirname(path)
        if parent == path:
            return
        path, strict, what = parent, False, "the folder above the build folder,"


#: In the build folder: what the last check of it saw, so that the next one
#: reads again only the folders that changed since (JSON, mode 0600).
REMEMBERED = ".gpsimd-folders"
#: A folder changed this close (ns) to a check, on the file system's clock,
#: is read again by the next one: a change just after ours could carry the
#: same coarse ``ctime``.
_RACY_NS = 2_000_000_000


def _walk_down(top: str, me: int, remember: bool) -> None:
    """Check every folder and symbolic link inside ``top`` (files are not
    read: only a folder's owner may make entries in it). Every folder is
    ``lstat``-ed (its owner and mode); its entries are read again only when
    it changed since the last check (:data:`REMEMBERED`): a new, removed or
    renamed entry, or a change of the folder's mode or owner, sets its
    ``ctime``, and a folder of the same inode, ``ctime``, ``mtime`` and link
    count holds the same entries, as git's index trusts a file's stat.
    ``top`` itself is read each time (the record is in it). With
    ``remember``, what was seen is recorded for the next check."""
    record = os.path.join(top, REMEMBERED)
    known = _recall(record)
    seen = {}
    todo = [("", top)]
    while todo:
        rel, folder = todo.pop()
        try:
            st = os.lstat(folder)
        except (OSError, ValueError):
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue            # (the entry its folder's record named is gone)
        old = None
        if rel:
            if st.st_uid not in (me, 0):
                raise _planted("a folder in the build folder,", folder, st.st_uid, me)
            if st.st_mode & stat.S_IWOTH:
                raise _open_to_all("a folder in the build folder,", folder, st.st_mode)
            old = known.get(rel)
        stamp = [st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_nlink]
        if isinstance(old, list) and len(old) == 5 and old[:4] == stamp:
            inside = _names(old[4])
        else:
            inside = _read_folder(folder, me)
            if inside is None:
                continue
        if rel:
            seen[rel] = stamp + [inside]
        todo.extend((f"{rel}/{name}" if rel else name, f"{folder}/{name}") for name in inside)
    if remember and seen != known:
        _remember(top, record, seen, known)


def _names(names) -> list:
    """The folder names of a record's entry that stay inside their folder
    (each once)."""
    if not isinstance(names, list):
        return []
    return sorted({n for n in names if isinstance(n, str) and n not in ("", ".", "..")
                   and "/" not in n and "\0" not in n})


def _read_folder(folder: str, me: int):
    """The names of the folders in ``folder`` (None: it is gone), after
    checking the symbolic links in it."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    inside = []
    for entry in entries:
        if entry.is_symlink():
            uid = entry.stat(follow_symlinks=False).st_uid
            if uid not in (me, 0):
                raise _planted("a symbolic link in the build folder,", entry.path, uid, me)
        elif entry.is_dir(follow_symlinks=False):
            inside.append(entry.name)
    return sorted(inside)


def _recall(record: str) -> dict:
    """What the last check saw: empty unless the record is a regular file of
    ours with one name that no one else may write (a FIFO is not waited for)."""
    try:
        with open_private(record) as f:
            known = json.loads(f.read(1 << 26))
        return known if isinstance(known, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _remember(top: str, record: str, seen: dict, known: dict) -> None:
    """Record ``seen`` but the folders changed within :data:`_RACY_NS` of
    now on the file system's clock (the ``ctime`` of the record's new file,
    made 0600 with ``O_EXCL``), when that differs from ``known``; a record
    that cannot be written is no record (the next check reads every folder)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{REMEMBERED}.", suffix=".tmp", dir=top)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            now = os.fstat(f.fileno()).st_ctime_ns
            seen = {rel: entry for rel, entry in seen.items() if entry[1] < now - _RACY_NS}
            if seen != known:
                f.write(json.dumps(seen, separators=(",", ":"), sort_keys=True).encode())
        if seen != known:
            os.replace(tmp, record)
            return
    except OSError:
        pass
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def make(build_dir: str) -> None:
    """Make ``build_dir`` and the folders missing above it, each with
    ``mkdir`` by this process; one that appears in between (``EEXIST``) is
    left for :func:`check` to judge.

    Raises:
        OSError: a folder cannot be made.
    """
    # (where its links lead: a link to nothing yet gets its target made
    # now, by this process, not by whoever makes it first)
    path, missing = os.path.realpath(build_dir), []
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass


def check(build_dir: str, inside: bool = True, remember: bool = True) -> None:
    """Check ``build_dir`` (which need not exist yet: then its first
    existing folder is checked as the folder above it) and, with
    ``inside``, every folder and link inside it (module text: one
    ``lstat`` a folder or link, files are not visited). With ``remember``
    (a run that builds; not ``scons -n``), what was seen is recorded in the
    folder for the next check.

    Raises:
        UnsafeBuildFolder: the message names the folder or link, its owner
            or mode, and the fix.
    """
    me = os.geteuid()
    path = os.path.abspath(build_dir)
    first = "the build folder"
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return
        path, first = parent, "the folder above the build folder,"
    _walk_up(path, me, first)
    if inside and first == "the build folder":
        _walk_down(os.path.realpath(path), me, remember)


def check_cache(cache_dir: str) -> None:
    """A shared cache (``CACHE_DIR``) trusts everyone who may write it: refuse
    one that every user may write (``o+w``, sticky or not), or with such a
    folder just inside it (where SCons stores its entries; one that is a
    symbolic link is judged where it leads), or one that every user may
    replace: a folder above it (as written, and as the links resolve) that
    every user may write without the sticky bit, where anyone may rename
    the cache (or a link on its way) and put their own in its place.

    Raises:
        UnsafeBuildFolder: the message names the folder, its mode and the fix.
    """
    folders = [cache_dir] + sorted(e.path for e in os.scandir(cache_dir) if e.is_dir())
    for folder in folders:
        real = os.path.realpath(folder)
        mode = os.stat(real).st_mode
        if mode & stat.S_IWOTH:
            raise UnsafeBuildFolder(
                f"the cache folder {folder} is writable by every user (mode "
                f"{stat.S_IMODE(mode):o}): anyone could store an object under another "
                f"source's key, and every build that reads the cache would take it. Take "
                f"that right away (chmod o-w {folder}), or use a cache only your team can write")
        if folder == cache_dir or os.path.islink(folder):    # (the others: the cache's way)
            # the way as written (a link on it is replaced by whoever may
            # write the folder that holds it), then as the links resolve
            for above in dict.fromkeys((os.path.dirname(os.path.abspath(folder)),
                                        os.path.dirname(real),
                                        *map(os.path.dirname, _resolution(folder)[0]))):
                _check_cache_way(folder, above)


def _resolution(path: str) -> tuple:
    """``(links, folders)``: the symbolic links met while ``path`` is
    resolved (as ``os.path.realpath`` does, a link in a link's target
    included; at most 40), each as a path with no link before its last
    part, and the existing folders the resolution passes through (one it
    leaves again by ``..`` too), the same way."""
    todo, current, links, folders = os.path.abspath(path).split(os.sep)[1:], os.sep, [], []
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        if os.path.islink(step) and len(links) < 40:
            links.append(step)
            target = os.readlink(step)
            current = os.sep if os.path.isabs(target) else current
            todo = target.split(os.sep) + todo
        else:
            current = step
            if os.path.isdir(step) and step not in folders:
                folders.append(step)
    return links, folders


def _check_cache_way(folder: str, above: str) -> None:
    """Refuse a folder from ``above`` up (``stat``: a link on the way as
    where it leads) that every user may write without the sticky bit."""
    while True:
        mode = os.stat(above).st_mode
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            raise UnsafeBuildFolder(
                f"the folder {above}, on the way to the cache folder {folder}, is writable "
                f"by every user without the sticky bit (mode {stat.S_IMODE(mode):o}): anyone "
                f"could rename the cache away and put one of their own in its place, which "
                f"every build that reads the cache would trust. Set the sticky bit (chmod "
                f"+t {above}) or take that right away (chmod o-w {above})")
        if os.path.dirname(above) == above:
            return
        above = os.path.dirname(above)
