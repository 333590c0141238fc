"""How the emulator's native leader is compiled: the build compiles it once
per build (the SCons tool's ``GPSIMD_LEADERCOM``) and a test run loads it
(``python -m gpsimd_emu run --leader PATH``; ``gpsimd_emu.native``). Here,
beside the device facts both sides read, so that the build, which never
imports the emulator, and the emulator's own tests compile it alike."""

from __future__ import annotations

import os
from typing import List

__all__ = ["SOURCE_NAMES", "LIBRARY_NAME", "COMPILE_FLAGS", "SOURCE_PREFIX", "LINK_FLAGS", "source_paths", "compile_command"]

#: The C sources, in the ``gpsimd_emu`` package's folder (with their
#: header ``leader.h``): the leader, and the native zygote, the program the
#: library also is (``gpsimd_emu.native``).
SOURCE_NAMES = ("leader.c", "native_zygote.c")
#: The library's file name in ``<build>/<profile>/emu/``.
LIBRARY_NAME = "libgpsimd_leader.so"
#: After the host C/C++ compiler; the caller adds ``-I`` the runtime's
#: headers (``gpsimd_host/abi.h``). ``-e gl_entry``: the library's entry
#: point when the dynamic loader runs it as a program (the native zygote).
COMPILE_FLAGS = ("-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wl,-e,gl_entry")
#: Before each source: a C++ driver compiles it as C (g++ applies one
#: ``-x c`` to the first file only).
SOURCE_PREFIX = ("-x", "c")
#: After the sources (it loads the core objects).
LINK_FLAGS = ("-ldl",)


def source_paths(emulator_dir: str) -> List[str]:
    """The sources' paths in the ``gpsimd_emu`` folder ``emulator_dir``."""
    return [os.path.join(emulator_dir, name) for name in SOURCE_NAMES]


def compile_command(compiler: str, sources: List[str], include_dir: str,
                    target: str) -> List[str]:
    """The whole command (argv) that writes the library to ``target`` from
    ``sources`` (:func:`source_paths`, or the build's ``${SOURCES[i]}``:
    the build's command line is this one)."""
    return [compiler, *COMPILE_FLAGS, "-I", include_dir, "-o", target,
            *(a for p in sources for a in (*SOURCE_PREFIX, p)), *LINK_FLAGS]
