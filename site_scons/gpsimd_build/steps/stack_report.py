"""The ``stack-report`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps stack-report --library L [--objdump P] --op NAME[:KERNEL]=BYTES ... -o OUT INPUT...``
    reads the functions' frames and calls from the object INPUTs
    (``gpsimd_build.objgraph``, one ``objdump`` run) and from graph INPUTs
    (``*.json``, written by ``--graph-out``), and writes the worst static
    stack chain of each op (from its kernel function's wrapper, ``KERNEL``
    when it is not the op name) (``gpsimd_build.stackreport``); lines over
    the op's stack size start with ``WARNING`` and are also printed.
``python -m gpsimd_build.steps stack-report --graph-out OUT [--objdump P] OBJECT...``
    writes the objects' graph (``objgraph.dumps``): the runtime's, read once
    for every library's report.

An input that cannot be read fails the step, naming it.
"""

import argparse
import os
import sys

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> None:
    from .. import objgraph, stackreport
    objects = [p for p in args.inputs if not p.endswith(".json")]
    try:
        graphs = [objgraph.read_objects(objects, args.objdump)]
        for path in args.inputs:
            if path.endswith(".json"):
                with open(path, encoding="utf-8") as f:
                    graphs.append(objgraph.loads(f.read(), path))
    except (objgraph.ObjectGraphError, OSError) as e:
        sys.exit(f"error: stack report{' of ' + args.library if args.library else ''}: {e}")
    graph = objgraph.merge(graphs)
    if args.graph_out:
        write_atomically(args.graph_out, objgraph.dumps(graph).encode("utf-8"))
        return
    if not args.library or not args.output:
        sys.exit("error: stack-report needs --library and -o (or --graph-out)")
    ops = []
    for item in args.op:
        name, _, size = item.rpartition("=")
        op, _, kernel = name.partition(":")
        ops.append((op, int(size), kernel or op))
    folder, base = os.path.split(args.objdump)
    cxxfilt = os.path.join(folder, base[: -len("objdump")] + "c++filt") \
        if base.endswith("objdump") else "c++filt"
    labels = objgraph.demangle(sorted(stackreport.named(graph, ops)), cxxfilt)
    lines = [r.line(args.library) for r in stackreport.op_report(graph, ops, labels)]
    for line in lines:
        if line.startswith("WARNING"):
            print(line)
    write_atomically(args.output, ("\n".join(lines) + "\n").encode("utf-8"))


def add_parser(sub) -> None:
    sr = sub.add_parser("stack-report", help="worst static stack chain per op")
    sr.add_argument("--library")
    sr.add_argument("--objdump", default="objdump", help="GNU objdump of the objects' target")
    sr.add_argument("--op", action="append", default=[],
                    help="NAME=STACK_BYTES or NAME:KERNEL=STACK_BYTES, one per op")
    sr.add_argument("-o", "--output")
    sr.add_argument("--graph-out", help="write the inputs' graph (JSON) instead of a report")
    sr.add_argument("inputs", nargs="*", help="objects, and graphs (*.json)")
    sr.set_defaults(run=run)
