"""Writing a file whole or not at all, and a file's digest: the one way every step of the build
and of the emulator writes an output (test results, plans, packs, reports,
records), so that a build killed at any moment leaves each file either as
it was or complete, never a part; and never through a link someone else
planted: the temporary file has an unpredictable name and is created
exclusively (``tempfile.mkstemp``: ``O_CREAT|O_EXCL``, which refuses a
symbolic link in its place), and the rename replaces whatever entry has
the final name (a planted link included) without following it.
:func:`file_digest` is the one digest of a file's bytes that the build's
records, the explorer's record and the report compare."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Optional, Union

__all__ = ["write_atomically", "write_if_changed", "umask", "file_digest"]


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


def write_atomically(path: str, data: Union[bytes, str], make_folder: bool = False) -> None:
    """Write ``data`` (bytes, or text written as UTF-8) to ``path`` through a
    temporary file in the same folder (``.<name>.<random>.tmp``, made
    exclusively, with the mode a new file gets: ``0o666`` less the umask)
    renamed over it; the temporary file is removed if writing fails,
    whatever the exception. A symbolic or hard link at ``path`` is
    replaced, never written through. With ``make_folder``, the folder is
    created first when missing.

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
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~umask())
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
