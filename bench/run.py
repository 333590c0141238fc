#!/usr/bin/env python3
"""Run the benchmarks of the issue "Scale, speed and reproducibility".

    python3 bench/run.py [--n 100,1000,5000] [--full 100,1000]
                         [--phases load,graph,full,null,test] [--quick]
                         [--work /tmp/gpsimd-bench] [--json OUT]
                         [--profile-null N] [--profile-load N]

For each N (``--n``) a synthetic collection is generated
(``bench/gen_collection.py``) in ``WORK/cN`` and measured:

load   manifest load + validation (``gpsimd_build.manifest.load_manifest``)
       in a fresh Python, median of 3 runs; import time shown apart.
full   (only for N in ``--full``) full build from clean at -j1, then at -j2:
       wall time, CPU of all external actions (RUSAGE_CHILDREN of the SCons
       process), CPU of SCons itself, peak RSS of the SCons process.
graph  node/edge counts of the real graph (``bench/floor/SConstruct.count``)
       and of the floor built from it (``bench/floor/SConstruct.floor``).
null   null build of the real SConstruct vs the floor, interleaved, 5 runs
       each, median; ratio real/floor; peak RSS of SCons in the null build.
       Needs a built tree: when N is not in ``--full`` and WORK/cN is not
       built, it is built first with -j2 (reported as "prepare").
test   the emulated test phase alone: ``scons -j1 test`` after deleting the
       test results (all else up to date) and, in process, the per-vector
       split of ``bench/emu_overhead.py`` (vectors as in the manifest, and
       resized to 8 elements: overhead with no kernel work).

Every SCons run goes through ``bench/scons_wrap.py`` (SCons's own main in
this Python, no pyenv shim) with ``-Q``. ``--quick``: N=100 only (all
phases) plus the manifest load of N=1000.
"""

import argparse
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


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def busy_s():
    """Busy CPU seconds of the whole machine (all processes), /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


#: (wall, foreign CPU seconds) of every SCons run, for the contention note
CONTENTION = []


def scons(cwd, args, env_extra=None, check=True, quiet=True):
    """Run SCons via scons_wrap.py; returns (wall_s, rusage dict, stdout).
    Also records how much CPU other processes of the machine used meanwhile
    (``foreign_cpu_s`` in the rusage dict: machine busy time minus this
    SCons process tree)."""
    import resource
    fd, rus = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, BENCH_RUSAGE_OUT=rus, BENCH_FLOOR_DIR=os.path.join(BENCH, "floor"))
    # as users run it: Python keeps compiled bytecode (a shell that sets
    # PYTHONDONTWRITEBYTECODE would charge every run the compile of every module)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(env_extra or {})
    b0 = busy_s()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([PY, os.path.join(BENCH, "scons_wrap.py"), "-Q"] + args, cwd=cwd,
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    with open(rus) as f:
        ru = json.load(f)
    ru["foreign_cpu_s"] = max(0.0, busy_s() - b0 - ours)
    ru["foreign_load"] = ru["foreign_cpu_s"] / wall
    CONTENTION.append((wall, ru["foreign_cpu_s"]))
    os.unlink(rus)
    if check and p.returncode != 0:
        log(p.stdout[-3000:])
        raise SystemExit(f"scons {' '.join(args)} failed in {cwd} ({p.returncode})")
    return wall, ru, p.stdout


def clean(cwd):
    for d in ("build", "_floor"):
        shutil.rmtree(os.path.join(cwd, d), ignore_errors=True)
    for f in os.listdir(cwd):
        if f.startswith(".sconsign"):
            os.unlink(os.path.join(cwd, f))


def is_built(cwd):
    return os.path.exists(os.path.join(cwd, "build/host/test-summary.txt"))


LOAD_SNIPPET = r"""
import sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, "site_scons")
from gpsimd_build.manifest import load_manifest
t1 = time.perf_counter()
c1 = time.process_time()
c = load_manifest("ops.yaml")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "load_cpu_s": time.process_time() - c1,
                  "libraries": len(c.libraries)}))
"""

PROFILE_LOAD_SNIPPET = r"""
import sys, cProfile, pstats
sys.path.insert(0, "site_scons")
from gpsimd_build.manifest import load_manifest
pr = cProfile.Profile(); pr.enable(); load_manifest("ops.yaml"); pr.disable()
st = pstats.Stats(pr, stream=sys.stdout)
st.sort_stats("cumulative").print_stats(30)
st.sort_stats("tottime").print_stats(20)
"""


def measure_load(cwd, runs=3):
    rows = []
    for _ in range(runs):
        out = subprocess.run([PY, "-c", LOAD_SNIPPET], cwd=cwd, check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        rows.append(json.loads(out))
    return {"load_s": statistics.median(r["load_s"] for r in rows),
            "load_min_s": min(r["load_s"] for r in rows),
            "load_cpu_s": statistics.median(r["load_cpu_s"] for r in rows),
            "import_s": statistics.median(r["import_s"] for r in rows),
            "runs": [round(r["load_s"], 4) for r in rows]}


def measure_full(cwd, jobs):
    clean(cwd)
    wall, ru, out = scons(cwd, [f"-j{jobs}"])
    summary = [l for l in out.splitlines() if l.startswith("all libraries:")]
    return {"wall_s": wall, "actions_cpu_s": ru["children_cpu_s"],
            "scons_cpu_s": ru["self_cpu_s"], "scons_maxrss_mb": ru["self_maxrss_kb"] / 1024,
            "foreign_load": ru["foreign_load"],
            "summary": summary[-1] if summary else "?"}


def measure_read(cwd, runs=3):
    """SConscript reading only (`scons -h`: reads everything, builds
    nothing): real SConstruct vs the floor, min of `runs`."""
    fenv = {"BENCH_GRAPH_IN": os.path.join(cwd, "graph.json")}
    real, floor = [], []
    for _ in range(runs):
        real.append(scons(cwd, ["-h"])[0])
        floor.append(scons(cwd, ["--no-site-dir", "-f", "SConstruct.floor", "-h"], fenv)[0])
    return {"real_s": min(real), "floor_s": min(floor), "ratio": min(real) / min(floor)}


def measure_graph(cwd):
    for f in ("SConstruct.count", "SConstruct.floor"):
        shutil.copy(os.path.join(BENCH, "floor", f), os.path.join(cwd, f))
    g = os.path.join(cwd, "graph.json")
    fg = os.path.join(cwd, "floor-graph.json")
    _, _, out = scons(cwd, ["-f", "SConstruct.count"], {"BENCH_GRAPH_OUT": g})
    _, _, out2 = scons(cwd, ["--no-site-dir", "-f", "SConstruct.floor"],
                       {"BENCH_GRAPH_IN": g, "BENCH_GRAPH_OUT": fg})
    with open(g) as f:
        real = json.load(f)["summary"]
    with open(fg) as f:
        floor = json.load(f)["summary"]
    return {"real": real, "floor": floor, "match": real == floor}


def measure_null(cwd, runs=5, profile=None, extra=()):
    """Null builds of the real SConstruct and of the floor, alternating;
    ``extra`` (e.g. ``FAST=1``) is passed to both."""
    extra = list(extra)
    floor_args = ["--no-site-dir", "-f", "SConstruct.floor"] + extra
    fenv = {"BENCH_GRAPH_IN": os.path.join(cwd, "graph.json")}
    scons(cwd, floor_args, fenv)            # build the floor's outputs once
    scons(cwd, extra)                       # warm: real tree up to date
    real, floor, rss, frss, fl = [], [], [], [], []
    for _ in range(runs):
        w, ru, out = scons(cwd, extra)
        fl.append(ru["foreign_load"])
        if "is up to date" not in out:
            log(out[-2000:])
            raise SystemExit(f"null build of {cwd} did something")
        real.append(w)
        rss.append(ru["self_maxrss_kb"] / 1024)
        w, ru, out = scons(cwd, floor_args, fenv)
        if "is up to date" not in out:
            raise SystemExit(f"floor null build of {cwd} did something:\n{out[-2000:]}")
        floor.append(w)
        frss.append(ru["self_maxrss_kb"] / 1024)
    # min, not median: the machine is shared, and the least-disturbed run is
    # the best estimate of each; medians are kept for reference.
    res = {"real_s": min(real), "floor_s": min(floor),
           "real_median_s": statistics.median(real), "floor_median_s": statistics.median(floor),
           "real_runs": [round(x, 3) for x in real], "floor_runs": [round(x, 3) for x in floor],
           "scons_maxrss_mb": max(rss), "floor_maxrss_mb": max(frss),
           "foreign_load_median": statistics.median(fl)}
    res["ratio"] = res["real_s"] / res["floor_s"]
    res["ratio_median"] = res["real_median_s"] / res["floor_median_s"]
    if profile:
        prof = os.path.join(cwd, "null.prof")
        scons(cwd, [f"--profile={prof}"])
        fprof = os.path.join(cwd, "floor-null.prof")
        scons(cwd, floor_args + [f"--profile={fprof}"], fenv)
        import pstats
        with open(profile, "w") as f:
            for title, p in (("REAL null build", prof), ("FLOOR null build", fprof)):
                f.write(f"===== {title} =====\n")
                st = pstats.Stats(p, stream=f)
                st.sort_stats("cumulative").print_stats(45)
                st.sort_stats("tottime").print_stats(25)
        res["profile"] = profile
    return res


def measure_test(cwd, libs_inproc=None):
    import glob
    results = glob.glob(os.path.join(cwd, "build/host/*/test-results.json"))
    for r in results:
        os.unlink(r)
    wall, ru, out = scons(cwd, ["-j1", "test"])
    vectors = sum(1 for l in out.splitlines() if l.startswith(("PASS ", "FAIL ")))
    scons(cwd, [])   # the summary again, so the tree is up to date
    res = {"scons_test_wall_s": wall, "vectors": vectors,
           "per_vector_ms": wall / max(vectors, 1) * 1e3,
           "actions_cpu_s": ru["children_cpu_s"]}
    import emu_overhead
    for key, elements in (("inproc", None), ("inproc_8elem", 8)):
        p = subprocess.run([PY, os.path.join(BENCH, "emu_overhead.py"), cwd]
                           + (["--libs", str(libs_inproc)] if libs_inproc else [])
                           + (["--elements", str(elements)] if elements else []),
                           stdout=subprocess.PIPE, text=True, check=True)
        res[key] = json.loads(p.stdout)
    return res


def fmt(x, unit="", nd=2):
    if x is None:
        return "-"
    return f"{x:.{nd}f}{unit}"


def table(results):
    lines = ["| N | manifest load+validate | graph nodes/edges | null build (floor, ratio) "
             "| read phase `scons -h` (floor, ratio) | full -j1 (actions CPU) | full -j2 (ratio to -j1) | test phase per vector "
             "(scons test / in-process overhead / 8-elem overhead) | SCons peak RSS full -j2 / null |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n, r in sorted(results.items(), key=lambda kv: int(kv[0])):
        ld = r.get("load") or {}
        g = (r.get("graph") or {}).get("real") or {}
        nl = r.get("null") or {}
        f1 = r.get("full_j1") or {}
        f2 = r.get("full_j2") or {}
        t = r.get("test") or {}
        null = (f"{fmt(nl.get('real_s'), ' s')} ({fmt(nl.get('floor_s'), ' s')}, "
                f"{fmt(nl.get('ratio'), 'x')})" if nl else "-")
        j1 = (f"{fmt(f1.get('wall_s'), ' s', 1)} ({fmt(f1.get('actions_cpu_s'), ' s', 1)})"
              if f1 else "-")
        j2 = (f"{fmt(f2.get('wall_s'), ' s', 1)} ({fmt(f2['wall_s'] / f1['wall_s'], 'x')})"
              if f2 and f1 else "-")
        tv = (f"{fmt(t.get('per_vector_ms'), ' ms', 1)} / "
              f"{fmt(t['inproc']['overhead_ms'], ' ms', 1)} / "
              f"{fmt(t['inproc_8elem']['overhead_ms'], ' ms', 1)}" if t else "-")
        rd = r.get("read") or {}
        read = (f"{fmt(rd.get('real_s'), ' s')} ({fmt(rd.get('floor_s'), ' s')}, "
                f"{fmt(rd.get('ratio'), 'x')})" if rd else "-")
        mem = f"{fmt(f2.get('scons_maxrss_mb'), ' MB', 0)} / {fmt(nl.get('scons_maxrss_mb'), ' MB', 0)}"
        gtxt = f"{g.get('nodes', '-')}/{g.get('edges', '-')}" if g else "-"
        lines.append(f"| {n} | {fmt(ld.get('load_s'), ' s', 3)} | {gtxt} | {null} | {read} | {j1} | "
                     f"{j2} | {tv} | {mem} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="100,1000,5000")
    ap.add_argument("--full", default="100,1000", help="N values that get full -j1/-j2 builds")
    ap.add_argument("--phases", default="load,full,graph,null,test")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default="/tmp/gpsimd-bench")
    ap.add_argument("--json", default=None)
    ap.add_argument("--prepare", default="",
                    help="comma list of N (not in --full) to build once with -j2 so that "
                         "their null build can be measured (N=5000: long)")
    ap.add_argument("--null-runs", type=int, default=5)
    ap.add_argument("--fast", action="store_true",
                    help="null builds with FAST=1 (timestamps first, cached header scans), "
                         "real and floor alike")
    ap.add_argument("--test-libs", type=int, default=None,
                    help="in-process emulator split on the first K libraries only")
    ap.add_argument("--profile-null", default="",
                    help="comma list of N whose null builds are profiled (cProfile)")
    ap.add_argument("--profile-load", default="",
                    help="comma list of N whose manifest loads are profiled (cProfile)")
    a = ap.parse_args(argv)
    ns = [int(x) for x in a.n.split(",") if x]
    full = {int(x) for x in a.full.split(",") if x}
    phases = set(a.phases.split(","))
    prof_null = {int(x) for x in a.profile_null.split(",") if x}
    prof_load = {int(x) for x in a.profile_load.split(",") if x}
    a.prepare = {int(x) for x in a.prepare.split(",") if x}
    if a.quick:
        ns, full = [100, 1000], {100}
    os.makedirs(a.work, exist_ok=True)
    results = {}
    t_start = time.perf_counter()
    for n in ns:
        cwd = os.path.join(a.work, f"c{n}")
        r = results[str(n)] = {}
        quick_big = a.quick and n not in full
        # Regenerate only when the generated inputs are missing: a built tree
        # (expensive for N=5000) is kept across runs; generation is
        # deterministic so the bytes are the same.
        if not os.path.exists(os.path.join(cwd, "ops.yaml")):
            t0 = time.perf_counter()
            gen_collection.generate(n, cwd)
            r["generate_s"] = time.perf_counter() - t0
            clean(cwd)
        log(f"== N={n} in {cwd}")
        if "load" in phases:
            r["load"] = measure_load(cwd)
            log(f"  load+validate {r['load']['load_s']:.3f} s (import {r['load']['import_s']:.3f} s)")
            if n in prof_load:
                out = subprocess.run([PY, "-c", PROFILE_LOAD_SNIPPET], cwd=cwd, check=True,
                                     stdout=subprocess.PIPE, text=True).stdout
                path = os.path.join(a.work, f"profile-load-{n}.txt")
                with open(path, "w") as f:
                    f.write(out)
                r["load"]["profile"] = path
        if quick_big:
            continue
        if "full" in phases and n in full:
            r["full_j1"] = measure_full(cwd, 1)
            log(f"  full -j1 {r['full_j1']}")
            r["full_j2"] = measure_full(cwd, 2)
            log(f"  full -j2 {r['full_j2']}")
        if ({"null", "graph", "test"} & phases) and not is_built(cwd) and n not in a.prepare:
            # no built tree and no full build asked: graph (counted on the
            # unbuilt tree: generated wrapper.cpp files are not scanned) and
            # the reading phase only
            r["graph"] = measure_graph(cwd)
            r["graph"]["unbuilt"] = True
            log(f"  graph (unbuilt) {r['graph']}")
            r["read"] = measure_read(cwd)
            log(f"  read (scons -h) {r['read']}")
            continue
        if ({"null", "graph", "test"} & phases) and not is_built(cwd):
            t0 = time.perf_counter()
            w, ru, out = scons(cwd, ["-j2"])
            r["prepare_j2"] = {"wall_s": w, "actions_cpu_s": ru["children_cpu_s"],
                               "scons_cpu_s": ru["self_cpu_s"],
                               "scons_maxrss_mb": ru["self_maxrss_kb"] / 1024}
            log(f"  prepare (full -j2) {r['prepare_j2']}")
        if "graph" in phases or "null" in phases:
            r["graph"] = measure_graph(cwd)
            log(f"  graph {r['graph']}")
        if "null" in phases:
            r["read"] = measure_read(cwd)
            log(f"  read (scons -h) {r['read']}")
            prof = os.path.join(a.work, f"profile-null-{n}.txt") if n in prof_null else None
            r["null"] = measure_null(cwd, a.null_runs, prof, ["FAST=1"] if a.fast else [])
            log(f"  null {r['null']}")
        if "test" in phases and n in full:
            r["test"] = measure_test(cwd, a.test_libs)
            log(f"  test {json.dumps(r['test'])}")
    total = time.perf_counter() - t_start
    wall = sum(w for w, _ in CONTENTION)
    foreign = sum(f for _, f in CONTENTION)
    results["_contention"] = {"scons_wall_s": wall, "foreign_cpu_s": foreign,
                              "foreign_load": foreign / wall if wall else 0}
    print(table({k: v for k, v in results.items() if not k.startswith("_")}))
    print(f"\nother processes used {foreign:.0f} CPU-s during {wall:.0f} s of SCons runs "
          f"(mean foreign load {foreign / wall if wall else 0:.2f} of 2 CPUs)")
    print(f"\n(total bench time {total:.0f} s; command: {' '.join([os.path.basename(PY)] + sys.argv)})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
