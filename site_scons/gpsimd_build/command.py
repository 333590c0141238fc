"""``gpsimd-build``: the build for people who installed the package and
have no SConstruct: SCons (``python -m SCons``, of this interpreter) with
the package's own SConstruct (``gpsimd_build/SConstruct``: the gpsimd tool
of this installed copy) on the manifest in the current folder
(``ops.yaml``, or ``MANIFEST=``), which is the project root, as it is for
``scons`` in a checkout: paths in the manifest and in the plans are
relative to it, and only files under it may be named (``ALLOW_PATHS=``
adds others). Every SCons argument passes through (``-j``, ``-k``,
targets, options, ``--experimental=ninja``); with ``QUIET=1`` SCons's own
``Reading SConscript files`` lines go too (``-Q``).

The process becomes SCons (``exec``): its exit status and its answer to
Ctrl-C and ``kill -TERM`` are SCons's. SCons reads the SConstruct from its
standard input (``-f -``), so that its folder, which relative paths in it
start from, is the current one (given as ``-f FILE``, SCons would make the
package's folder that folder, and write the build there).
"""

import os
import sys
from typing import List, Optional

__all__ = ["main", "SCONSTRUCT", "scons_argv"]

#: The SConstruct this command runs.
SCONSTRUCT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "SConstruct")
#: What SCons's ``BoolVariable`` reads as true (``QUIET=...``).
_TRUE = ("y", "yes", "true", "t", "1", "on", "all")


def scons_argv(argv: List[str]) -> List[str]:
    """The command line of SCons for ``gpsimd-build`` with ``argv``."""
    quiet = any(a.partition("=")[0] == "QUIET" and a.partition("=")[2].lower() in _TRUE
                for a in argv)
    return [sys.executable, "-m", "SCons", "-f", "-"] + \
        (["-Q"] if quiet and "-Q" not in argv else []) + list(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Run SCons in this process (never returns but on an error: 2)."""
    args = scons_argv(sys.argv[1:] if argv is None else argv)
    try:
        fd = os.open(SCONSTRUCT, os.O_RDONLY)
        os.dup2(fd, 0)                      # (what SCons reads: -f -)
        os.close(fd)
        os.execv(args[0], args)
    except OSError as e:
        print(f"gpsimd-build: cannot start {args[0]}: {e.strerror}", file=sys.stderr)
        return 2
    return 2    # (unreachable: execv does not return)


if __name__ == "__main__":
    sys.exit(main())
