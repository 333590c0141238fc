"""Writing a file whole or not at all, and a file's digest: the one way every step of the build
and of the emulator writes an output (test results, plans, packs, reports,
records), so that a build killed at any moment leaves each file either as
it was or complete, never a part (a killed writer leaves its temporary
file, which the next writer of the file removes: :func:`remove_leftovers`;
a writer holds an ``flock`` on its own until the rename, so that a live
one is never taken for a killed one); and
never through a link someone else planted: the temporary file has an
unpredictable name and is created exclusively (``tempfile.mkstemp``:
``O_CREAT|O_EXCL``, which refuses a symbolic link in its place), and the
rename replaces whatever entry has the final name (a planted link
included) without following it.
:func:`file_digest` is the one digest of a file's bytes that the build's
records, the explorer's record and the report compare. :func:`open_private`
reads back a file that only its writer may have written (a record the
build loads with ``pickle``, written ``private``)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
import tempfile
from typing import List, Optional, Union

__all__ = ["write_atomically", "write_if_changed", "leftovers_of", "remove_leftovers", "umask",
           "file_digest", "open_private"]

#: The random part of a temporary file's name (``tempfile.mkstemp``'s).
_RANDOM = re.compile(r"[a-z0-9_]{8}")


def umask() -> int:
    """This process's umask (``/proc/self/status``; elsewhere set and
    restored, which is not thread-safe, as ``os.umask`` is the only way)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: str, data: Union[bytes, str], make_folder: bool = False,
                     private: bool = False) -> None:
    """Write ``data`` (bytes, or text written as UTF-8) to ``path`` through a
    temporary file in the same folder (``.<name>.<random>.tmp``, made
    exclusively, with the mode a new file gets: ``0o666`` less the umask;
    ``private``: ``0o600``, for :func:`open_private`)
    renamed over it; the temporary file is removed if writing fails,
    whatever the exception. A symbolic or hard link at ``path`` is
    replaced, never written through. With ``make_folder``, the folder is
    created first when missing. Then what killed writers of ``path`` left
    is removed (:func:`remove_leftovers`).

    Raises:
        OSError: the file cannot be written; its ``filename`` is ``path``,
            whichever call failed (a write or close on a full disk names
            no file of its own).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(path)
    try:
        if make_folder and folder:
            os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=folder or ".")
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from e
    lock = os.dup(fd)       # (holds the flock until the rename, whatever closes fd)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600 if private else 0o666 & ~umask())
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:   # (about path, not tmp)
            raise OSError(e.errno, e.strerror, path) from e
        raise
    finally:
        os.close(lock)
    remove_leftovers(path)


def leftovers_of(path: str) -> List[str]:
    """The temporary files :func:`write_atomically` of ``path`` left when
    its writer was killed before the rename (``.<name>.<random>.tmp``
    beside it), for a writer that alone writes ``path`` to remove."""
    folder, name = os.path.split(path)
    head = f".{name}."
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return []
    return [os.path.join(folder, e) for e in entries
            if e.startswith(head) and e.endswith(".tmp")
            and _RANDOM.fullmatch(e[len(head):-len(".tmp")])]


def remove_leftovers(path: str) -> None:
    """Remove what killed writers of ``path`` left (:func:`leftovers_of`):
    each a regular file no live writer holds locked, in a shared folder
    (sticky, as ``/tmp``) only this user's; a link, another user's file
    there (root's build removed a user's own from ``/tmp``, which the sticky
    bit keeps any other user from) or anything else with such a name is
    left alone, as is one that cannot be removed."""
    try:
        shared = bool(os.stat(os.path.dirname(path) or ".").st_mode & stat.S_ISVTX)
    except OSError:
        return
    for left in leftovers_of(path):
        try:        # (what is not a regular file is not opened: a device's open acts)
            if not stat.S_ISREG(os.lstat(left).st_mode):
                continue
            fd = os.open(left, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and (st.st_uid == os.geteuid() or not shared):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)      # (a live writer's: raises)
                if os.lstat(left).st_ino == st.st_ino:
                    os.unlink(left)
        except OSError:
            pass
        finally:
            os.close(fd)


def write_if_changed(path: str, data: Union[bytes, str]) -> bool:
    """Write ``data`` to ``path`` (atomically, making its folder) unless the
    file already holds exactly it; returns whether it wrote. Keeping an
    unchanged file's mtime keeps it up to date for SCons's FAST mode and
    for ninja.

    Raises:
        OSError: the file cannot be written.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_nlink == 1 and f.read() == data:
                return False
    except OSError:
        pass
    write_atomically(path, data, make_folder=True)
    return True


def file_digest(path: str) -> Optional[str]:
    """SHA-256 (hex) of the bytes of the file at ``path``, read in 1 MiB
    blocks; None when it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def open_private(path: str):
    """``path`` opened for reading (binary) when it is a regular file of this
    process's user, with one name, that no one else may write (not group-
    or other-writable): what a folder's group or another user replaced or
    planted is never read (a pickle runs code). Neither follows a link nor
    waits on a FIFO.

    Raises:
        FileNotFoundError: there is none.
        PermissionError: it is not such a file (``strerror`` says so).
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    f = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1 \
            or st.st_mode & 0o022:
        f.close()
        raise PermissionError(errno.EPERM, "not a file of yours alone (another user or "
                              "your group could have written it)", path)
    return f

