"""The ``stack-report`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps stack-report --library L --op NAME[:KERNEL]=BYTES ... -o OUT CI...``
    merges GCC call graphs (``-fcallgraph-info=su``) and writes the worst
    static stack chain of each op (from its kernel function's wrapper,
    ``KERNEL`` when it is not the op name) (``gpsimd_build.stackreport``); lines over
    the op's stack size start with ``WARNING`` and are also printed.
"""

import argparse

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> None:
    from .. import stackreport
    graphs = []
    for path in args.callgraphs:
        with open(path, encoding="utf-8") as f:
            graphs.append(stackreport.parse_ci(f.read(), path))
    ops = []
    for item in args.op:
        name, _, size = item.rpartition("=")
        op, _, kernel = name.partition(":")
        ops.append((op, int(size), kernel or op))
    lines = [r.line(args.library) for r in stackreport.op_report(stackreport.merge(graphs), ops)]
    for line in lines:
        if line.startswith("WARNING"):
            print(line)
    write_atomically(args.output, ("\n".join(lines) + "\n").encode("utf-8"))


def add_parser(sub) -> None:
    sr = sub.add_parser("stack-report", help="worst static stack chain per op")
    sr.add_argument("--library", required=True)
    sr.add_argument("--op", action="append", default=[],
                    help="NAME=STACK_BYTES or NAME:KERNEL=STACK_BYTES, one per op")
    sr.add_argument("-o", "--output", required=True)
    sr.add_argument("callgraphs", nargs="*")
    sr.set_defaults(run=run)
