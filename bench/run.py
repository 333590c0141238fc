#!/usr/bin/env python3
"""Run the benchmarks of BENCHMARKS.md: one synthetic collection per N,
the real build against the bare-SCons floor, the ninja path against plain
ninja, the edit loop against its commands, and a full build against the
old code.

    python3 bench/run.py [--n 1000,5000] [--phases load,graph,null,full,loop,test]
                         [--old 1e4b78b] [--old-first] [--full-n 1000] [--work /tmp/gpsimd-bench]
                         [--null-runs 5] [--edits 3] [--json OUT] [--quick]

For each N (``--n``) a collection is generated (``bench/gen_collection.py``,
N ops in libraries of 10) in ``WORK/cN`` and measured, phase by phase:

load   manifest load + validation, no cache (``load_manifest``) in a fresh
       Python, median of 3.
graph  node/edge counts of the real graph (``bench/floor/SConstruct.count``)
       and of the floor built from it (``bench/floor/SConstruct.floor``).
full   (N in ``--full-n``) full build from clean at -j2, this tree and the
       old code (``--old``, a git revision: its SConstruct, site_scons,
       schema and runtime_model on the same collection, in ``WORK/cN-old``),
       one after the other in this run (``--old-first``: the old code's
       first; the machine's speed drifts, so quote both orders): wall, CPU
       of the actions by kind
       (``bench/scons_wrap.py``), SCons's own CPU and peak RSS, results.
null   null build of the real SConstruct against the floor, alternating,
       ``--null-runs`` each (min, median, and the median of each run over
       the floor run after it), and the reading phase
       (``scons -h``) of both. Needs a built tree: built first (-j2,
       reported as ``prepare``) when the full phase did not build it.
loop   ``bench/loop.py``: the ninja path's null build against plain ninja,
       and one kernel edit to results on both paths against the commands
       it needs (a copy built by the ninja path in ``WORK/cN-ninja``).
test   the emulated test phase alone: ``scons -j1 test`` after deleting
       every results file (everything else up to date): wall per vector.

Every SCons run is ``bench/scons_wrap.py -Q`` (SCons's main in this
Python, bytecode kept as users have it). Each measurement records the
machine's load: CPU seconds other processes used per second of it
(``/proc/stat`` minus our own process tree). ``--quick``: N=100, all
phases but the old code (about 3 minutes).
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(BENCH)
PY = sys.executable
sys.path.insert(0, BENCH)
import gen_collection  # noqa: E402
import loop  # noqa: E402

LOADS = []   # (wall, foreign CPU seconds) of every SCons run


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def scons(cwd, args, env_extra=None, check=True):
    """Run ``scons -Q args`` through scons_wrap.py: (wall s, rusage dict with
    ``foreign_load``, stdout)."""
    import resource
    fd, rus = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, BENCH_RUSAGE_OUT=rus, BENCH_FLOOR_DIR=os.path.join(BENCH, "floor"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(env_extra or {})
    b0 = loop.busy_s()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([PY, os.path.join(BENCH, "scons_wrap.py"), "-Q"] + args, cwd=cwd,
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    with open(rus) as f:
        ru = json.load(f)
    os.unlink(rus)
    ru["foreign_cpu_s"] = max(0.0, loop.busy_s() - b0 - ours)
    ru["foreign_load"] = ru["foreign_cpu_s"] / wall
    LOADS.append((wall, ru["foreign_cpu_s"]))
    if check and p.returncode != 0:
        log(p.stdout[-3000:])
        raise SystemExit(f"scons {' '.join(args)} failed in {cwd} ({p.returncode})")
    return wall, ru, p.stdout


def clean(cwd):
    for d in ("build", "_floor", ".ninja"):
        shutil.rmtree(os.path.join(cwd, d), ignore_errors=True)
    for f in os.listdir(cwd):
        if f.startswith(".sconsign"):
            os.unlink(os.path.join(cwd, f))


def is_built(cwd):
    return os.path.exists(os.path.join(cwd, "build/host/test-summary.txt"))


def last_summary(out):
    lines = [l for l in out.splitlines() if l.startswith(("all libraries:", "total:"))]
    return lines[-1] if lines else "?"


LOAD_SNIPPET = r"""
import sys, time, json
sys.path[:0] = ["site_scons", "runtime_model"]
from gpsimd_build.manifest import load_manifest
t1 = time.perf_counter(); c1 = time.process_time()
c = load_manifest("ops.yaml")
print(json.dumps({"load_s": time.perf_counter() - t1, "cpu_s": time.process_time() - c1}))
"""


def measure_load(cwd, runs=3):
    rows = [json.loads(subprocess.run([PY, "-c", LOAD_SNIPPET], cwd=cwd, check=True,
                                      stdout=subprocess.PIPE, text=True).stdout)
            for _ in range(runs)]
    return {"load_s": statistics.median(r["load_s"] for r in rows),
            "cpu_s": statistics.median(r["cpu_s"] for r in rows)}


def measure_full(cwd, jobs=2):
    clean(cwd)
    wall, ru, out = scons(cwd, [f"-j{jobs}"])
    return {"wall_s": wall, "actions_cpu_s": ru["children_cpu_s"], "scons_cpu_s": ru["self_cpu_s"],
            "scons_maxrss_mb": ru["self_maxrss_kb"] / 1024, "foreign_load": ru["foreign_load"],
            "cpu_by_kind": ru["cpu_by_kind"], "summary": last_summary(out)}


def old_tree(work, rev):
    """``git archive`` of ``rev`` in WORK/old-REV (once)."""
    dest = os.path.join(work, f"old-{rev}")
    if not os.path.exists(os.path.join(dest, "SConstruct")):
        os.makedirs(dest, exist_ok=True)
        archive = subprocess.run(["git", "-C", PROJECT, "archive", rev], check=True,
                                 stdout=subprocess.PIPE).stdout
        subprocess.run(["tar", "xf", "-", "-C", dest], input=archive, check=True)
    return dest


def measure_graph(cwd):
    for f in ("SConstruct.count", "SConstruct.floor"):
        shutil.copy(os.path.join(BENCH, "floor", f), os.path.join(cwd, f))
    g, fg = os.path.join(cwd, "graph.json"), os.path.join(cwd, "floor-graph.json")
    scons(cwd, ["-f", "SConstruct.count"], {"BENCH_GRAPH_OUT": g})
    scons(cwd, ["--no-site-dir", "-f", "SConstruct.floor"], {"BENCH_GRAPH_IN": g,
                                                             "BENCH_GRAPH_OUT": fg})
    with open(g) as f:
        real = json.load(f)["summary"]
    with open(fg) as f:
        floor = json.load(f)["summary"]
    return {"real": real, "floor": floor, "match": real == floor}


def measure_null(cwd, runs):
    """Real null build against the floor, alternating; and ``scons -h``."""
    floor_args = ["--no-site-dir", "-f", "SConstruct.floor"]
    fenv = {"BENCH_GRAPH_IN": os.path.join(cwd, "graph.json")}
    scons(cwd, floor_args, fenv)            # the floor's outputs, once
    scons(cwd, [])                          # settle
    real, floor, loads, rss = [], [], [], []
    for _ in range(runs):
        w, ru, out = scons(cwd, [])
        if "is up to date" not in out:
            raise SystemExit(f"null build of {cwd} did something:\n{out[-2000:]}")
        real.append(w)
        loads.append(ru["foreign_load"])
        rss.append(ru["self_maxrss_kb"] / 1024)
        w, ru, out = scons(cwd, floor_args, fenv)
        if "is up to date" not in out:
            raise SystemExit(f"floor null build of {cwd} did something:\n{out[-2000:]}")
        floor.append(w)
        loads.append(ru["foreign_load"])
    read = [scons(cwd, ["-h"])[0] for _ in range(3)]
    fread = [scons(cwd, floor_args + ["-h"], fenv)[0] for _ in range(3)]
    return {"real_s": min(real), "floor_s": min(floor), "ratio": min(real) / min(floor),
            "real_median_s": statistics.median(real), "floor_median_s": statistics.median(floor),
            "ratio_median": statistics.median(real) / statistics.median(floor),
            # each run against the floor run just after it: the drift of the
            # machine's speed between pairs cancels
            "ratio_pairs_median": statistics.median(r / f for r, f in zip(real, floor)),
            "real_runs": [round(x, 3) for x in real], "floor_runs": [round(x, 3) for x in floor],
            "read_s": min(read), "floor_read_s": min(fread), "scons_maxrss_mb": max(rss),
            "foreign_load_median": statistics.median(loads)}


def measure_test(cwd):
    results = glob.glob(os.path.join(cwd, "build/host/*/test-results.json"))
    for r in results:
        os.unlink(r)
    wall, ru, out = scons(cwd, ["-j1", "test"])
    vectors = sum(1 for l in out.splitlines() if l.startswith(("PASS ", "FAIL ")))
    return {"wall_s": wall, "vectors": vectors, "libraries": len(results),
            "per_vector_ms": wall / max(vectors, 1) * 1e3, "actions_cpu_s": ru["children_cpu_s"],
            "foreign_load": ru["foreign_load"], "summary": last_summary(out)}


def run_n(n, a, full_n):
    cwd = os.path.join(a.work, f"c{n}")
    r = {}
    if not os.path.exists(os.path.join(cwd, "ops.yaml")):
        t0 = time.perf_counter()
        gen_collection.generate(n, cwd)
        r["generate_s"] = time.perf_counter() - t0
        clean(cwd)
    phases = set(a.phases.split(","))
    log(f"== N={n} in {cwd}")
    if "load" in phases:
        r["load"] = measure_load(cwd)
        log(f"  load {r['load']}")
    if "full" in phases and n in full_n:
        old = None
        if a.old:
            old = os.path.join(a.work, f"c{n}-old")
            if not os.path.exists(os.path.join(old, "ops.yaml")):
                gen_collection.generate(n, old, project=old_tree(a.work, a.old))
        # (--old-first: the old code first, so that a drift of the
        # machine's speed during the run shows as the ratio moving)
        order = [("full_old_j2", old), ("full_new_j2", cwd)] if old and a.old_first else \
            [("full_new_j2", cwd)] + ([("full_old_j2", old)] if old else [])
        for key, tree in order:
            r[key] = measure_full(tree, 2)
            if key == "full_old_j2":
                r[key]["rev"] = a.old
            log(f"  full -j2 ({'old ' + a.old if key == 'full_old_j2' else 'this tree'}) {r[key]}")
        if old:
            r["full_ratio_new_old"] = r["full_new_j2"]["wall_s"] / r["full_old_j2"]["wall_s"]
    if phases & {"graph", "null", "loop", "test"} and not is_built(cwd):
        w, ru, out = scons(cwd, ["-j2"])
        r["prepare_j2"] = {"wall_s": w, "actions_cpu_s": ru["children_cpu_s"],
                           "cpu_by_kind": ru["cpu_by_kind"], "foreign_load": ru["foreign_load"],
                           "summary": last_summary(out)}
        log(f"  prepare (full -j2) {r['prepare_j2']}")
    if "graph" in phases or "null" in phases:
        r["graph"] = measure_graph(cwd)
        log(f"  graph {r['graph']}")
    if "null" in phases:
        r["null"] = measure_null(cwd, a.null_runs)
        log(f"  null {r['null']}")
    if "loop" in phases:
        r["loop"] = loop.measure(cwd, cwd + "-ninja", None or _middle_lib(cwd), a.edits,
                                 a.null_runs)
        log(f"  loop: ninja null {r['loop']['ninja_null_ratio']:.2f}x plain ninja; "
            f"edit: scons <lib> {r['loop']['edit_scons_default_j_s_median']:.2f} s")
    if "test" in phases:
        r["test"] = measure_test(cwd)
        scons(cwd, [])   # the summary again, so that the tree is up to date
        log(f"  test {r['test']}")
    return r


def _middle_lib(cwd):
    libs = sorted(os.listdir(os.path.join(cwd, "kernels")))
    return libs[len(libs) // 2]


def report(results):
    """A short text summary of the figures BENCHMARKS.md quotes."""
    lines = []
    for n, r in results.items():
        if n.startswith("_"):
            continue
        lines.append(f"N={n}")
        if "load" in r:
            lines.append(f"  manifest load+validate (no cache): {r['load']['load_s']:.3f} s")
        g = (r.get("graph") or {}).get("real")
        if g:
            lines.append(f"  graph: {g['nodes']} nodes, {g['edges']} edges (floor equal: "
                         f"{r['graph']['match']})")
        nl = r.get("null")
        if nl:
            lines.append(f"  null build: {nl['real_s']:.2f} s vs floor {nl['floor_s']:.2f} s = "
                         f"{nl['ratio']:.2f}x (medians {nl['ratio_median']:.2f}x, pairs {nl['ratio_pairs_median']:.2f}x); reading "
                         f"{nl['read_s']:.2f} s vs {nl['floor_read_s']:.2f} s; load "
                         f"{nl['foreign_load_median']:.2f}")
        lp = r.get("loop")
        if lp:
            lines.append(f"  ninja null: {lp['ninja_null']['min_s'] * 1e3:.1f} ms vs plain "
                         f"{lp['plain_ninja_null']['min_s'] * 1e3:.1f} ms = "
                         f"{lp['ninja_null_ratio']:.2f}x")
            lines.append(f"  edit one kernel: commands {lp['edit_commands_s_median']:.2f} s; "
                         f"ninja -j1 {lp['edit_ninja_j1_s_median']:.2f} s "
                         f"({lp['edit_ninja_ratio_median']:.2f}x); scons -j1 "
                         f"{lp['edit_scons_j1_s_median']:.2f} s ({lp['edit_scons_ratio_median']:.2f}x);"
                         f" default -j: scons {lp['edit_scons_default_j_s_median']:.2f} s, ninja "
                         f"{lp['edit_ninja_default_j_s_median']:.2f} s; load "
                         f"{lp['foreign_load_median']:.2f}")
        for key in ("full_new_j2", "full_old_j2", "prepare_j2"):
            f = r.get(key)
            if f:
                lines.append(f"  {key}: {f['wall_s']:.1f} s, actions CPU {f['actions_cpu_s']:.1f} s, "
                             f"load {f['foreign_load']:.2f}, {f['summary']}")
                for k, v in f["cpu_by_kind"].items():
                    lines.append(f"      {k}: {v['cpu_s']:.1f} s CPU in {v['commands']} commands")
        if "full_ratio_new_old" in r:
            lines.append(f"  full -j2 new/old: {r['full_ratio_new_old']:.2f}x")
        t = r.get("test")
        if t:
            lines.append(f"  test phase: {t['wall_s']:.1f} s for {t['vectors']} vectors "
                         f"({t['per_vector_ms']:.1f} ms per vector), {t['summary']}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="1000,5000")
    ap.add_argument("--full-n", default="1000", help="N values that get the full-build phase")
    ap.add_argument("--phases", default="load,full,graph,null,loop,test")
    ap.add_argument("--old", default="1e4b78b", help="git revision of the old code ('' : none)")
    ap.add_argument("--old-first", action="store_true",
                    help="full phase: build the old code's tree first")
    ap.add_argument("--work", default="/tmp/gpsimd-bench")
    ap.add_argument("--null-runs", type=int, default=5)
    ap.add_argument("--edits", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.n, a.full_n, a.old, a.edits, a.null_runs = "100", "100", "", 1, 3
    ns = [int(x) for x in a.n.split(",") if x]
    full_n = {int(x) for x in a.full_n.split(",") if x}
    os.makedirs(a.work, exist_ok=True)
    t0 = time.perf_counter()
    results = {str(n): run_n(n, a, full_n) for n in ns}
    wall = sum(w for w, _ in LOADS)
    foreign = sum(f for _, f in LOADS)
    results["_machine"] = {"cpus": os.cpu_count(), "scons_wall_s": wall,
                           "foreign_cpu_s": foreign, "foreign_load": foreign / wall if wall else 0,
                           "total_s": time.perf_counter() - t0,
                           "command": " ".join(["python3"] + sys.argv)}
    print(report(results))
    print(f"\nother processes used {foreign:.0f} CPU-s during {wall:.0f} s of SCons runs "
          f"(mean load {results['_machine']['foreign_load']:.2f} of {os.cpu_count()} CPUs); "
          f"total {results['_machine']['total_s']:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
