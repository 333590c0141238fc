"""How the build compiles the emulator's native program, ``gpsimd-zygote``
(its name, sources and digest: ``gpsimd_device.zygote``), once per build
folder, with the host C compiler; the emulator's tests compile it alike."""

from __future__ import annotations

from typing import List


__all__ = ["COMPILE_FLAGS", "SOURCE_PREFIX", "LINK_FLAGS", "c_sources", "compile_command"]

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
