"""Null builds of two checkouts side by side: what a change costs the
builds that have nothing to do.

    python3 bench/null_ab.py OLD NEW [--runs 9]

OLD and NEW are checkouts (or copies) of the project with the shipped
collection. Each is built once on both paths (``scons``, then
``scons --experimental=ninja`` into ``BUILD_DIR=bn``); then, alternating
OLD and NEW in each round so that both see the same load, the script times
``python3 -m SCons -Q`` (a SCons null build) and ninja on that folder's
ninja file (``bn/build.ninja`` where it exists, else the old place,
``build.ninja``), and prints the median and minimum of each, and NEW/OLD.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def _run(cmd, cwd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed:\n{proc.stdout}\n{proc.stderr}")
    return took


def _ninja_cmd(cwd):
    import ninja
    exe = os.path.join(ninja.BIN_DIR, "ninja")
    inside = os.path.join("bn", "build.ninja")
    return [exe, "-f", inside] if os.path.exists(os.path.join(cwd, inside)) else [exe]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args(argv)
    scons = [sys.executable, "-m", "SCons", "-Q"]
    for cwd in (args.old, args.new):
        _run(scons, cwd)
        _run(scons + ["--experimental=ninja", "BUILD_DIR=bn"], cwd)
    times = {(w, kind): [] for w in ("old", "new") for kind in ("scons", "ninja")}
    for _ in range(args.runs):
        for which, cwd in (("old", args.old), ("new", args.new)):
            times[(which, "scons")].append(_run(scons, cwd))
            times[(which, "ninja")].append(_run(_ninja_cmd(cwd), cwd))
    for kind in ("scons", "ninja"):
        old, new = times[("old", kind)], times[("new", kind)]
        print(f"{kind} null build: old median {statistics.median(old):.3f} s "
              f"(min {min(old):.3f}), new median {statistics.median(new):.3f} s "
              f"(min {min(new):.3f}), new/old {statistics.median(new) / statistics.median(old):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
