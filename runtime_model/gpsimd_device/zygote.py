"""The emulator's native program, ``gpsimd-zygote``: its name, its sources
and the digest that ties a built program to them (stdlib only).

The build compiles it once per build folder (``gpsimd_build.zygote_recipe``
passes the digest as ``-DGZ_SOURCE_DIGEST``); the emulator starts it and
first compares the digest the file holds with that of its own sources
(``program_problem``), so a program built from other sources is never run.
Here, beside the other contracts of the build and the emulator, because
both sides compute the digest and neither imports the other.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Optional

__all__ = ["PROGRAM_NAME", "SOURCE_NAMES", "HEADER_NAMES", "MARKER", "source_paths",
           "source_digest", "program_digest", "default_path", "program_problem"]

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


def program_digest(path: str) -> Optional[str]:
    """The digest a built program holds, or None (no marker, unreadable)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    at = data.find(MARKER)
    if at < 0:
        return None
    digest = data[at + len(MARKER):at + len(MARKER) + 64]
    return digest.decode("ascii", "replace") if len(digest) == 64 else None


def default_path(plan_path: str) -> str:
    """Where the build puts the program beside a plan it wrote:
    ``<BUILD_DIR>/<profile>/<lib>/testplan.json`` ->
    ``<BUILD_DIR>/<profile>/emu/gpsimd-zygote``."""
    return os.path.join(os.path.dirname(os.path.dirname(plan_path)) or ".", "emu",
                        PROGRAM_NAME)


def program_problem(path: str, emulator_dir: str, include_dir: str) -> Optional[str]:
    """Why the program at ``path`` cannot run this emulator's vectors
    (missing, not executable, built from other sources), or None."""
    if not os.path.isfile(path):
        return f"{path} does not exist"
    if not os.access(path, os.X_OK):
        return f"{path} is not executable"
    if program_digest(path) != source_digest(emulator_dir, include_dir):
        return f"{path} was built from other sources than this emulator's"
    return None
