#!/usr/bin/env python3
"""Paired per-vector A/B of the emulator: two or more collections (each
with its own ``runtime_model``, as ``bench/emu_overhead.py`` takes them)
measured side by side under the same load.

    python3 bench/emu_paired.py BASE OTHER... [--rounds N] [--library-runs]
                                [--no-checks] [--libs K] [--elements E] [--json OUT]

One child process per collection holds every library's session open (its
zygote started, its objects loaded, one vector run first). Each round, the
children take turns, the order reversed every other round: each runs one
vector (``run_vector``, the next of its libraries' vectors in turn) or,
with ``--library-runs``, one library's ``run_all`` (pipelined, as the CLI
runs a library). So a drift of the machine's load hits every collection
alike, which the medians of runs timed one after the other
(``emu_overhead.py``) do not see. Per vector: *wall*, *overhead* (wall less
the kernels' launches, ``VectorResult.kernel_seconds``) and the *worker's
CPU* (``getrusage`` of the child: its own user and system time, not the
zygote's and the vector's processes'; less sensitive to the load than
wall). Printed: each figure's median, its ratio to BASE's median, and the
median of the round-by-round ratios (``paired``).
"""

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emu_overhead  # noqa: E402

FIGURES = ("wall", "overhead", "worker_cpu")


def child(collection: str, checks: bool, library_runs: bool, libs, elements) -> None:
    """Answer each line of stdin with one JSON line ``[wall, overhead,
    worker_cpu]`` (seconds per vector) of the next vector or library run."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        program = emu_overhead.executor(collection, tmp)
        TestPlan, LibrarySession, RunOptions = emu_overhead._setup(collection)
        _, docs = emu_overhead._plans(collection, libs, elements)
        options = RunOptions(checks=checks, **{program[0]: program[1]})
        os.chdir(collection)
        work = []
        for doc in docs:
            plan = TestPlan.from_json(doc)
            s = stack.enter_context(LibrarySession(plan, root=".", options=options))
            s.run_vector(plan.ops[0], plan.ops[0].vectors[0])       # zygote up, objects loaded
            work += [s] if library_runs else [(s, op, v) for op in plan.ops for v in op.vectors]
        print("ready", flush=True)
        for i, _ in enumerate(sys.stdin):
            item = work[i % len(work)]
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            results = item.run_all().vectors if library_runs else [item[0].run_vector(*item[1:])]
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            failed = [f"{r.op}[{r.vector}]: {r.message}" for r in results if r.status != "pass"]
            if failed:
                raise SystemExit(f"{collection}: a vector failed: {failed[0]}")
            n, kernel = len(results), sum(r.kernel_seconds for r in results)
            cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            print(json.dumps([wall / n, (wall - kernel) / n, cpu / n]), flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("collections", nargs="+", help="the base first")
    p.add_argument("--rounds", type=int, default=400)
    p.add_argument("--library-runs", action="store_true")
    p.add_argument("--no-checks", dest="checks", action="store_false")
    p.add_argument("--libs", type=int, default=10)
    p.add_argument("--elements", type=int, default=8)
    p.add_argument("--json", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    colls = [os.path.abspath(c) for c in a.collections]
    if a.child:
        child(colls[0], a.checks, a.library_runs, a.libs, a.elements)
        return 0
    flags = ["--libs", str(a.libs), "--elements", str(a.elements)] + \
        (["--library-runs"] if a.library_runs else []) + ([] if a.checks else ["--no-checks"])
    procs = [subprocess.Popen([sys.executable, __file__, c, "--child", *flags], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for c in colls]
    rows = {c: [] for c in colls}
    loads = [os.getloadavg()[0]]
    try:
        for proc, c in zip(procs, colls):
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit(f"{c}: the child did not start")
        for i in range(a.rounds):
            for j in (range(len(colls)) if i % 2 == 0 else reversed(range(len(colls)))):
                procs[j].stdin.write("go\n")
                procs[j].stdin.flush()
                line = procs[j].stdout.readline()
                if not line:
                    raise SystemExit(f"{colls[j]}: the child ended")
                rows[colls[j]].append(json.loads(line))
            if i % 50 == 49:
                loads.append(os.getloadavg()[0])
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait()
    base = rows[colls[0]]
    out = {"rounds": a.rounds, "checks": a.checks, "library_runs": a.library_runs,
           "load_average": [min(loads), max(loads)], "collections": {}}
    for c in colls:
        med = {f: statistics.median(r[k] for r in rows[c]) * 1e3 for k, f in enumerate(FIGURES)}
        out["collections"][c] = {f"{f}_ms": med[f] for f in FIGURES} | {
            f"{f}_paired": statistics.median(r[k] / b[k] for r, b in zip(rows[c], base) if b[k] > 0)
            for k, f in enumerate(FIGURES)}
    print(f"{a.rounds} rounds of {'a library run' if a.library_runs else 'a vector'} each, "
          f"checks {'on' if a.checks else 'off'}, load {min(loads):.1f}-{max(loads):.1f}")
    b = out["collections"][colls[0]]
    for f in FIGURES:
        print(f"{f:11s}" + "".join(
            f"  {os.path.basename(c)} {v[f + '_ms']:.3f} ms ({v[f + '_ms'] / b[f + '_ms']:.2f}x, "
            f"paired {v[f + '_paired']:.2f}x)" for c, v in out["collections"].items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
