"""Command line of the device model (ARCHITECTURE.md "Emulator results").

``python -m gpsimd_emu run PLAN.json --results OUT.json [--timeout S]
[--root DIR] [--stack-scale N] [--no-checks]``

Prints one line per vector (``PASS ...`` / ``FAIL lib::op[vector] (where):
message``) and ``lib: N passed, M failed``; writes the results JSON; exits 0
only when every vector passed, 1 when one failed, 2 when the plan itself
cannot be read or the results cannot be written. What core 0 printed goes to
stderr, prefixed with the vector's name.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Optional

from .runner import (DEFAULT_STACK_SCALE, DEFAULT_TIMEOUT, VectorResult,
                     format_line, load_plan, run_plan, write_results)
from gpsimd_device.plan import PlanError


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be > 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m gpsimd_emu``."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_emu",
                                description="Run GPSIMD custom-op test plans on the device model.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every vector of a test plan")
    run.add_argument("plan", help="testplan.json written by the build")
    run.add_argument("--results", required=True, help="where to write the results JSON")
    run.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT,
                     help=f"seconds a vector may run, all cores together (default {DEFAULT_TIMEOUT:g})")
    run.add_argument("--root", default=".",
                     help="directory the plan's relative paths start from (default: the current one)")
    run.add_argument("--locations",
                     help="JSON {op: {vector: 'FILE:LINE:COL'}} naming where each vector is "
                          "written; kept out of the plan so that moving a vector's lines "
                          "does not re-run its tests")
    run.add_argument("--stack-scale", type=int, default=DEFAULT_STACK_SCALE,
                     help=f"host stack bytes per device stack byte (default {DEFAULT_STACK_SCALE})")
    run.add_argument("--no-checks", dest="checks", action="store_false",
                     help="run as the device does: cores share one zero-filled output, no "
                          "poison, no write-set / uninitialised-output / multicore-rule / "
                          "coherence / argument-dtype checks (faster; crashes, timeouts and "
                          "the runtime's own faults are still reported)")
    return p


def read_locations(path: str) -> Dict[str, Dict[str, str]]:
    """The locations file at ``path``: ``{op: {vector: "FILE:LINE:COL"}}``.

    Raises OSError when the file cannot be read, ValueError when it is not
    JSON of that shape.
    """
    with open(path, encoding="utf-8") as f:
        where = json.load(f)
    if not isinstance(where, dict) or not all(isinstance(v, dict) for v in where.values()):
        raise ValueError("not a JSON object of objects")
    return where


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI; returns the exit status (0 all passed, 1 a vector
    failed, 2 unusable plan or unwritable results)."""
    args = build_parser().parse_args(argv)
    try:
        plan = load_plan(args.plan)
    except PlanError as e:
        print(f"gpsimd_emu: {e}", file=sys.stderr)
        return 2
    if args.locations:
        try:
            plan = plan.with_locations(read_locations(args.locations))
        except (OSError, ValueError) as e:
            print(f"gpsimd_emu: cannot read locations {args.locations}: {e}", file=sys.stderr)
            return 2
    library = plan.library

    def show(r: VectorResult) -> None:
        if r.printf:
            prefix = f"[{library}::{r.op}[{r.vector}] core 0] "
            for line in r.printf.rstrip("\n").split("\n"):
                print(prefix + line, file=sys.stderr)
        print(format_line(library, r), flush=True)

    results = run_plan(plan, root=args.root, timeout=args.timeout,
                       stack_scale=args.stack_scale, on_result=show, checks=args.checks)
    print(results.summary_line(), flush=True)
    try:
        write_results(results, args.results)
    except OSError as e:
        print(f"gpsimd_emu: cannot write {args.results}: {e}", file=sys.stderr)
        return 2
    return 0 if results.ok else 1


if __name__ == "__main__":
    sys.exit(main())
