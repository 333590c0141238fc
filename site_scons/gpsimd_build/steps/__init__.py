"""Build steps that are our own code, as command lines: one module per
step (``pack``, ``stack_report``, ``registration``, ``digests``,
``summary``), each with its ``add_parser`` and ``run``.

Every action of the graph is a command line (ARCHITECTURE.md), so that the same graph runs under SCons and under ninja. The
steps that are not a compiler, linker or archiver run this module:

``python -m gpsimd_build.steps pack --strip STRIP --library L --member LSP CORE LINKED PACKED STRIPPED ...``
    for each ``--member`` (one per core of a library: ``CORE`` 0..7, or
    ``none`` for single-core), runs ``STRIP --strip-unneeded -o STRIPPED
    LINKED`` (``STRIP``: a program, split like a shell word list), then
    wraps the stripped object into the host pack container
    (``gpsimd_device.pack``), written atomically. One action per library,
    not per core: a Python start-up costs ten strips (BENCHMARKS.md), and
    the eight core objects of a library are always relinked together.
    When one member fails, what this run wrote for the others is removed;
``python -m gpsimd_build.steps stack-report --library L --op NAME[:KERNEL]=BYTES ... -o OUT CI...``
    merges GCC call graphs (``-fcallgraph-info=su``) and writes the worst
    static stack chain of each op (from its kernel function's wrapper,
    ``KERNEL`` when it is not the op name) (``gpsimd_build.stackreport``); lines over
    the op's stack size start with ``WARNING`` and are also printed;
``python -m gpsimd_build.steps check-registration -o OUT FACTS REGISTRATION``
    checks a shape library's registration (JSON of ``python -m
    gpsimd_emu.shapes registration``) against the manifest's facts
    (``gpsimd_build.regcheck``): each mismatch one located line on stderr,
    exit status 1; OUT is written only when they agree;
``python -m gpsimd_build.steps digests -o OUT --base DIR LIST``
    prints and writes one SHA-256 per artifact named in the file ``LIST``
    (one path per line, relative to ``DIR``, BUILD_DIR, and so printed:
    the same text for any BUILD_DIR), sorted by path (``scons digests``);
``python -m gpsimd_build.steps summary -o OUT --all N [--since STAMP] RESULTS...``
    a ninja build's summary: one line per library whose passing results
    file is given, in a state of ``gpsimd_build.results_summary`` (a
    failed run's ``.failed.json`` or a run's failure record ``.error.txt``
    when there are no passing results; results made before ``STAMP``, made
    as the ninja run began, were not run in this build), then ``all
    libraries: N passed, M failed`` when they are all ``N`` libraries of
    the collection, else ``total: ...``; written to OUT, which ninja
    prints with ``cat``. With ``--report PAGE`` (and ``--multicore LIB``
    per multicore library) also the HTML report of those results
    (``gpsimd_build.report``; each library's section kept in
    ``.report-cache`` beside it), written on every run of the step. When a
    vector failed or a library has no current results, the step prints
    the summary itself and exits 1 (ninja then prints no other summary,
    and its own status is 1). With ``--inputs SPEC --ninja-dir DIR``, it
    also records what ninja built each library from
    (``gpsimd_build.ninjarecord``: the pytest plugin's record, as scons
    writes it on its own path).

Stdlib only, so that it starts fast (``python -S``). Exit status 0 on
success, 1 with one ``gpsimd: <path>: <why>`` line on stderr otherwise.
"""

import argparse
import sys
from typing import List, Optional

from . import digests, pack, registration, stack_report, summary

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m gpsimd_build.steps``."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_build.steps",
                                description="Build steps of a GPSIMD op collection.")
    sub = p.add_subparsers(dest="step", required=True)
    for step in (pack, stack_report, registration, digests, summary):
        step.add_parser(sub)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run one step; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status = args.run(args)
    except registration.CheckFailed:
        return 1
    except OSError as e:
        where = e.filename or "?"
        print(f"gpsimd: {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    except (ValueError, KeyError) as e:  # incl. ResultsError
        print(f"gpsimd: {args.step}: {e}", file=sys.stderr)
        return 1
    return status or 0
