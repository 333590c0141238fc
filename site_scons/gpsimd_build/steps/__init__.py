"""Build steps that are our own code, as command lines.

Every action of the graph is a command line (ARCHITECTURE.md), so that
the same graph runs under SCons and under ninja. The steps that are not a
compiler, linker or archiver run ``python -m gpsimd_build.steps STEP
...``, one module per step, each with its ``add_parser``, its ``run`` and
its command line in its docstring: ``pack`` (strip and pack a library's
core objects), ``stack_report`` (``stack-report``: the worst static stack
chain per op), ``registration`` (``check-registration``: a shape
library's registration against the manifest), ``digests`` (one SHA-256
per artifact), ``summary`` (a ninja build's summary, report and inputs
record) and ``lock`` (the build folder's lock, held for a ninja run).

Stdlib only, so that it starts fast (``python -S``). Exit status 0 on
success, 1 with one ``gpsimd: <path>: <why>`` line on stderr otherwise.
"""

import argparse
import sys
from typing import List, Optional

from . import digests, lock, pack, registration, stack_report, summary

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m gpsimd_build.steps``."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_build.steps",
                                description="Build steps of a GPSIMD op collection.")
    sub = p.add_subparsers(dest="step", required=True)
    for step in (pack, stack_report, registration, digests, summary, lock):
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
