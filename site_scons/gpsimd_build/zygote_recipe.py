"""How the build compiles the emulator's native program, ``gpsimd-zygote``
(its name, sources and digest: ``gpsimd_device.zygote``), once per build
folder, with the host C compiler, then takes its group's and others' right
to write it (the emulator runs only a program of its user alone:
``gpsimd_device.zygote.open_program``); the emulator's tests make it alike."""

from __future__ import annotations

from typing import List


__all__ = ["COMPILE_FLAGS", "SOURCE_PREFIX", "LINK_FLAGS", "c_sources", "compile_command",
           "protect_command"]

#: After the compiler; the caller adds ``-I`` the runtime's headers.
COMPILE_FLAGS = ("-std=c11", "-O2", "-Wall")
#: Before each source: a C++ driver compiles it as C (g++ applies one
#: ``-x c`` to the first file only).
SOURCE_PREFIX = ("-x", "c")
#: After the sources (it loads the core objects).
LINK_FLAGS = ("-ldl",)


def c_sources(paths: List[str]) -> List[str]:
    """The ``.c`` files among ``gpsimd_device.zygote.source_paths``."""
    return [p for p in paths if p.endswith(".c")]


def compile_command(compiler: str, sources: List[str], include_dir: str, target: str,
                    digest: str) -> List[str]:
    """The whole command (argv) that writes the program to ``target`` from
    the ``.c`` ``sources``; ``digest``: ``zygote.source_digest`` of the
    files it is built from, which the program carries."""
    return [compiler, *COMPILE_FLAGS, f"-DGZ_SOURCE_DIGEST={digest}", "-I", include_dir,
            "-o", target, *(a for p in sources for a in (*SOURCE_PREFIX, p)), *LINK_FLAGS]


def protect_command(target: str) -> List[str]:
    """The command (argv) run after :func:`compile_command`: ``target`` no
    longer writable by its group or others (the linker made it with the
    umask's mode: ``0775`` under ``umask 002``, which a member of a
    group-writable build folder's group could write over)."""
    return ["chmod", "go-w", target]
