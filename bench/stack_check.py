#!/usr/bin/env python3
"""Check the stack report's frames and chains against GCC's own figures.

    python3 bench/stack_check.py BUILT_TREE [--work DIR]

BUILT_TREE is a collection built with ``scons`` and ``scons compiledb``
(for example ``bench/gen_collection.py 1000 DIR``, then both commands in
DIR). Every translation unit is compiled again with ``-fstack-usage
-fcallgraph-info=su`` (tests/stack_reference.py); the script prints how many
functions were compared, those whose frame read from the object is below
GCC's figure (must be none) or differs, objects whose recompile is not the
same bytes, and ops whose worst chain differs from the one GCC's graph
gives. Exit status 1 when any is found.
"""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "site_scons")]

import stack_reference  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--work", help="folder for the recompiled objects (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        r = stack_reference.compare(os.path.abspath(args.tree), args.work or tmp)
    print(f"{r.functions} functions with a GCC figure, {r.libraries} libraries, {r.ops} ops")
    print(f"below GCC's figure or unknown: {len(r.low)}; other differences: {len(r.other)}")
    print(f"objects not the same bytes: {len(r.same_bytes)}; worst chains differing: {len(r.chains)}")
    for item in r.low + r.other + r.chains:
        print("  ", item)
    return 1 if r.low or r.same_bytes or r.chains else 0


if __name__ == "__main__":
    sys.exit(main())
