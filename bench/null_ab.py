"""Null builds (and one kernel edit) of two checkouts side by side: what
a change costs the builds that have nothing, or one edit, to do.

    python3 bench/null_ab.py OLD NEW [--runs 9] [--edit LIB [--edits 5]]

OLD and NEW are checkouts (or copies) of the project with the shipped
collection, or collections of ``bench/gen_collection.py`` (each with its
own copy of the build code). Each is built once on both paths (``scons``, then
``scons --experimental=ninja`` into ``BUILD_DIR=bn``); then, alternating
OLD and NEW in each round (and which goes first, round by round) so that
both see the same load, the script times
``python3 -m SCons -Q`` (a SCons null build) and ninja on that folder's
ninja file (``bn/build.ninja`` where it exists, else the old place,
``build.ninja``), and prints the median and minimum of each, and NEW/OLD.
With ``--edit LIB``, each of ``--edits`` rounds then gives ``LIB``'s kernel
(``kernels/LIB/LIB.cpp``) a new value of a global, as ``bench/loop.py``
does (a new object, links, pack and test run), and times ``scons -Q LIB``
and then ``ninja LIB`` on that edit, in each checkout. Last, the foreign
load of the timed runs: the machine's busy CPU time less our commands'
(``/proc/stat``, as ``bench/loop.py`` measures it), per second.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

# (bench/ is this script's folder: loop.py's foreign-load measure and edit)
from loop import busy_s, edit_kernel


#: The commands' environment: bytecode cached, as a user's builds have it
#: (without, every run compiles every module, and more code costs more).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
#: CPU seconds of the machine's and of our commands, and wall seconds, timed so far.
_LOAD = {"busy": 0.0, "ours": 0.0, "wall": 0.0}


def _run(cmd, cwd):
    c0, b0 = resource.getrusage(resource.RUSAGE_CHILDREN), busy_s()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_ENV)
    took = time.perf_counter() - start
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    _LOAD["busy"] += busy_s() - b0
    _LOAD["ours"] += (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    _LOAD["wall"] += took
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
    ap.add_argument("--edit", metavar="LIB", default=None,
                    help="also time one edit of LIB's kernel to its results, on both paths")
    ap.add_argument("--edits", type=int, default=5)
    args = ap.parse_args(argv)
    scons = [sys.executable, "-m", "SCons", "-Q"]
    sides = [("old", args.old), ("new", args.new)]
    for _, cwd in sides:
        _run(scons, cwd)
        _run(scons + ["--experimental=ninja", "BUILD_DIR=bn"], cwd)
    for key in _LOAD:           # (the load of the timed runs only)
        _LOAD[key] = 0.0
    kinds = [("scons", "null build"), ("ninja", "null build")]
    times = {(w, kind): [] for w, _ in sides for kind in kinds}
    for r in range(args.runs):
        for which, cwd in (sides if r % 2 == 0 else sides[::-1]):
            times[(which, kinds[0])].append(_run(scons, cwd))
            times[(which, kinds[1])].append(_run(_ninja_cmd(cwd), cwd))
    if args.edit:
        edits = [("scons", f"edit of {args.edit}"), ("ninja", f"edit of {args.edit}")]
        kinds += edits
        times.update({(w, kind): [] for w, _ in sides for kind in edits})
        for r in range(args.edits):
            for which, cwd in (sides if r % 2 == 0 else sides[::-1]):
                edit_kernel(cwd, args.edit, r + 1)
                times[(which, edits[0])].append(_run(scons + [args.edit], cwd))
                times[(which, edits[1])].append(_run(_ninja_cmd(cwd) + [args.edit], cwd))
    for kind in kinds:
        old, new = times[("old", kind)], times[("new", kind)]
        print(f"{kind[0]} {kind[1]}: old median {statistics.median(old):.3f} s "
              f"(min {min(old):.3f}), new median {statistics.median(new):.3f} s "
              f"(min {min(new):.3f}), new/old {statistics.median(new) / statistics.median(old):.2f}")
    foreign = max(0.0, _LOAD["busy"] - _LOAD["ours"]) / _LOAD["wall"] if _LOAD["wall"] else 0.0
    print(f"foreign load during the timed runs: {foreign:.2f} CPUs of "
          f"{len(os.sched_getaffinity(0))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
