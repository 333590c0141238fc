"""How the emulator's native leader is compiled: the build compiles it once
per build (the SCons tool's ``GPSIMD_LEADERCOM``) and a test run loads it
(``python -m gpsimd_emu run --leader PATH``; ``gpsimd_emu.native``). Here,
beside the device facts both sides read, so that the build, which never
imports the emulator, and the emulator's own tests compile it alike."""

from __future__ import annotations

import os
from typing import List

__all__ = ["SOURCE_NAME", "LIBRARY_NAME", "COMPILE_FLAGS", "source_path", "compile_command"]

#: The C source, in the ``gpsimd_emu`` package's folder.
SOURCE_NAME = "leader.c"
#: The library's file name in ``<build>/<profile>/emu/``.
LIBRARY_NAME = "libgpsimd_leader.so"
#: After the host C/C++ compiler (``-x c``: a C++ driver compiles it as
#: C); the caller adds ``-I`` the runtime's headers (``gpsimd_host/abi.h``).
COMPILE_FLAGS = ("-x", "c", "-std=c11", "-O2", "-fPIC", "-shared", "-Wall")


def source_path(emulator_dir: str) -> str:
    """The source's path in the ``gpsimd_emu`` folder ``emulator_dir``."""
    return os.path.join(emulator_dir, SOURCE_NAME)


def compile_command(compiler: str, emulator_dir: str, include_dir: str,
                    target: str) -> List[str]:
    """The whole command (argv) that writes the library to ``target``."""
    return [compiler, *COMPILE_FLAGS, "-I", include_dir, "-o", target,
            source_path(emulator_dir)]
