"""The ``pack`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps pack --strip STRIP --library L --member LSP CORE LINKED PACKED STRIPPED ...``
    for each ``--member`` (one per core of a library: ``CORE`` 0..7, or
    ``none`` for single-core), runs ``STRIP --strip-unneeded -o STRIPPED
    LINKED`` (``STRIP``: a program, split like a shell word list; what it
    prints is shown only when it fails; ``objgraph.TOOL_TIMEOUT``), then
    wraps the stripped object into the host pack container
    (``gpsimd_device.pack``), written atomically. One action per library,
    not per core: a Python start-up costs ten strips (BENCHMARKS.md), and
    the eight core objects of a library are always relinked together.
    When one member fails, what this run wrote for the others is removed.
    Each ``--stale FILE`` (the build's test summary and report) is removed
    first, as a test run removes them: a build of a library's packs that
    does not test them (``ninja build/host/py/py.packed.so``) leaves no
    summary that passes what it no longer tests. (A pack the SCons path
    takes from its cache runs no step: ``Summary._untested`` sees it.)
"""

import argparse
import os
from typing import List

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> None:
    import shlex
    from gpsimd_device.pack import pack_bytes, pack_metadata
    from gpsimd_device.versions import VERSIONS
    from gpsimd_emu.client.process import run_group
    from ..objgraph import TOOL_TIMEOUT
    written: List[str] = []
    for path in args.stale:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    try:
        for lsp, core, linked, packed, stripped in args.member:
            if core != "none" and not (core.isdigit() and int(core) < 8):
                raise ValueError(f"core {core!r} of {linked}: a core is 0..7 or none")
            strip = shlex.split(args.strip) + ["--strip-unneeded", "-o", stripped, linked]
            written.append(stripped)
            ended = run_group(strip, TOOL_TIMEOUT)
            if ended.status != 0:
                why = (f"exit status {ended.status}" if ended.status is not None else ended.err)
                said = "".join(f": {line}" for line in ended.out.splitlines() if line.strip())
                raise OSError(0, f"{shlex.join(strip)} failed ({why}){said}", stripped)
            with open(stripped, "rb") as f:
                payload = f.read()
            metadata = pack_metadata(args.library, lsp, None if core == "none" else int(core),
                                     VERSIONS)
            write_atomically(packed, pack_bytes(payload, metadata))
            written.append(packed)
    except BaseException:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise


def add_parser(sub) -> None:
    pk = sub.add_parser("pack", help="wrap stripped core objects into host packs")
    pk.add_argument("--library", required=True)
    pk.add_argument("--strip", required=True, help="the strip program (and its options)")
    pk.add_argument("--member", nargs=5, action="append", required=True,
                    metavar=("LSP", "CORE", "LINKED", "PACKED", "STRIPPED"),
                    help="one core: its linker spec (e.g. lsp_fll_load_cpu3), its number "
                         "(0..7, or none for single-core), the linked object and the two "
                         "outputs")
    pk.add_argument("--stale", metavar="FILE", action="append", default=[],
                    help="a file to remove first (the test summary and report)")
    pk.set_defaults(run=run)
