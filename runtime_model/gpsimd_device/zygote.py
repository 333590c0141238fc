"""The emulator's native program, ``gpsimd-zygote``: its name, its sources
and the digest that ties a built program to them (stdlib only).

The build compiles it once per build folder (``gpsimd_build.zygote_recipe``
passes the digest as ``-DGZ_SOURCE_DIGEST``); the emulator starts it and
first compares the digest the file holds with that of its own sources
(``program_problem``), so a program built from other sources is never run,
and runs only a file of its user alone (``open_program``).
Here, beside the other contracts of the build and the emulator, because
both sides compute the digest and neither imports the other.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
from typing import Optional

from .atomic import open_private

__all__ = ["PROGRAM_NAME", "SOURCE_NAMES", "HEADER_NAMES", "MARKER", "source_paths",
           "source_digest", "open_program", "default_path",
           "program_problem"]

#: The program's file name in ``<BUILD_DIR>/<profile>/emu/``.
PROGRAM_NAME = "gpsimd-zygote"
#: Its C sources, in the ``gpsimd_emu`` package's folder (each ``.h`` the
#: interface of the ``.c`` files of its layer: its name, then ``_`` and a part).
SOURCE_NAMES = ("zygote.c", "zygote_objects.c", "zygote_output.c", "zygote_parts.h",
                "sandbox.c", "sandbox_cgroup.c", "sandbox_files.c", "sandbox.h", "leader.c",
                "leader_control.c", "leader_launch.c", "leader.h", "leader_parts.h")
#: The runtime's headers they include (below the include folder).
HEADER_NAMES = ("gpsimd_host/zygote.h", "gpsimd_host/abi.h")
#: What precedes the digest's 64 hex digits in the program's file.
MARKER = b"GPSIMD-ZYGOTE-DIGEST:"


def source_paths(emulator_dir: str, include_dir: str) -> list:
    """Every file the program is built from: the sources, then the headers."""
    return ([os.path.join(emulator_dir, n) for n in SOURCE_NAMES]
            + [os.path.join(include_dir, n) for n in HEADER_NAMES])


@functools.lru_cache(maxsize=4)
def source_digest(emulator_dir: str, include_dir: str) -> str:
    """SHA-256 (hex) of the sources' names and bytes (once per process: a
    test run's supervising process checks the program, and its worker, a
    fork, again).

    Raises:
        OSError: a source cannot be read.
    """
    h = hashlib.sha256()
    for path in source_paths(emulator_dir, include_dir):
        with open(path, "rb") as f:
            data = f.read()
        h.update(f"{os.path.basename(path)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _digest_in(data: bytes) -> Optional[str]:
    """The digest a built program's bytes hold, or None (no marker)."""
    at = data.find(MARKER)
    if at < 0:
        return None
    digest = data[at + len(MARKER):at + len(MARKER) + 64]
    return digest.decode("ascii", "replace") if len(digest) == 64 else None


def open_program(path: str, emulator_dir: str, include_dir: str) -> int:
    """A descriptor of the program at ``path`` (close-on-exec) when it can
    run this emulator's vectors: a file of this user alone
    (``atomic.open_private``: another user, or the group of a
    group-writable build folder, could have written any other, and it
    runs unconfined as whoever runs the vectors), executable, built from
    this emulator's sources. Run it through ``/proc/self/fd/N``: the file
    checked is the one that runs, whatever is renamed over ``path`` since.

    Raises:
        OSError: why it cannot (``strerror`` says so; the filename is ``path``).
    """
    try:
        f = open_private(path)
    except PermissionError as e:
        raise OSError(e.errno, f"{e.strerror}: the build makes it yours, not group- or "
                      "other-writable (chmod go-w)", path) from None
    except FileNotFoundError:
        raise OSError(errno.ENOENT, "does not exist", path) from None
    try:
        if not os.fstat(f.fileno()).st_mode & 0o100:
            raise OSError(errno.EACCES, "is not executable", path)
        if _digest_in(f.read()) != source_digest(emulator_dir, include_dir):
            raise OSError(errno.ENOEXEC, "was built from other sources than this emulator's",
                          path)
        return os.dup(f.fileno())          # (close-on-exec, as os.dup makes it)
    finally:
        f.close()


def default_path(plan_path: str) -> str:
    """Where the build puts the program beside a plan it wrote:
    ``<BUILD_DIR>/<profile>/<lib>/testplan.json`` ->
    ``<BUILD_DIR>/<profile>/emu/gpsimd-zygote``."""
    return os.path.join(os.path.dirname(os.path.dirname(plan_path)) or ".", "emu",
                        PROGRAM_NAME)


def program_problem(path: str, emulator_dir: str, include_dir: str) -> Optional[str]:
    """Why the program at ``path`` cannot run this emulator's vectors
    (:func:`open_program`'s reason), or None."""
    try:
        os.close(open_program(path, emulator_dir, include_dir))
    except OSError as e:
        return f"{path} {e.strerror}"
    return None
