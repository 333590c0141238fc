"""Writing a file whole or not at all: the one way every step of the build
and of the emulator writes an output (test results, plans, packs, reports,
records), so that a build killed at any moment leaves each file either as
it was or complete, never a part, and no temporary file behind."""

from __future__ import annotations

import os
from typing import Union

__all__ = ["write_atomically", "write_if_changed"]


def write_atomically(path: str, data: Union[bytes, str], make_folder: bool = False) -> None:
    """Write ``data`` (bytes, or text written as UTF-8) to ``path`` through a
    temporary file in the same folder (``<path>.tmp<pid>``) renamed over it;
    the temporary file is removed if writing fails, whatever the exception.
    With ``make_folder``, the folder is created first when missing.

    Raises:
        OSError: the file cannot be written (the message names the path).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if make_folder:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
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
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except OSError:
        pass
    write_atomically(path, data, make_folder=True)
    return True
