#!/usr/bin/env python3
"""The inner loop, measured: null builds and one kernel edit, on the plain
SCons path and on the ninja path, against what the commands themselves cost.

    python3 bench/loop.py COLLECTION [--ninja-copy DIR] [--edits 3] [--null-runs 5]
                          [--lib lib0042] [--json OUT]

COLLECTION is a built collection from ``bench/gen_collection.py`` (plain
SCons path). The ninja path is measured in a second copy of the same
sources (``--ninja-copy``, default ``COLLECTION-ninja``) built there with
``scons --experimental=ninja`` (first use: a full build, reported as
``prepare``), because the two paths keep different records of the same
outputs.

What is measured (every figure is wall time; the load of the machine is in
the output, as foreign CPU seconds per second):

``ninja_null`` / ``plain_ninja_null``
    ``ninja`` on the generated ``build.ninja``, against ``ninja -f
    plain.ninja``: the same file without the edge that regenerates
    ``build.ninja`` (the one thing our path adds to a plain ninja build of
    the same commands). Both print the summary with ``cat``. Alternating,
    ``--null-runs`` each, minimum and median.
``edit``
    one kernel of ``--lib`` gets a new value of a global (``volatile int
    gpsimd_bench_edit = K;``, so its object, the 8 per-core links and packs
    and the test run all change, and every vector still passes). Then, one
    after another on the same edit: ``scons -Q -j1 <lib>`` (plain path) and
    ``ninja -j1 <lib>`` (ninja path), each against **the commands it
    needs**: the sum of the wall times of the commands ninja ran for that
    edit, from ``.ninja_log`` (ninja times each command itself), which at
    -j1 is the least any tool could take. Then the default parallelism:
    ``scons -Q <lib>`` (``-j`` from the CPU count) and ``ninja <lib>``.
``scons_null_lib``
    ``scons -Q <lib>`` with nothing to do.

Prints one JSON document.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
EDIT_RE = re.compile(r"^volatile int gpsimd_bench_edit = \d+;\n", re.M)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def busy_s() -> float:
    """Busy CPU seconds of the whole machine (all processes), /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


#: The ninja path's files, in the build folder (relative to the project).
NINJA_FILE = os.path.join("build", "build.ninja")
NINJA_LOG = os.path.join("build", ".ninja", ".ninja_log")


def ninja_bin() -> str:
    import ninja
    return os.path.join(ninja.BIN_DIR, "ninja")


def run(cmd, cwd, check=True):
    """(wall seconds, foreign load, stdout) of one command."""
    import resource
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = busy_s()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    foreign = max(0.0, busy_s() - b0 - ours) / wall if wall else 0.0
    if check and p.returncode != 0:
        log(p.stdout[-3000:])
        raise SystemExit(f"{' '.join(cmd)} failed in {cwd} ({p.returncode})")
    return wall, foreign, p.stdout


def scons_cmd(*args):
    return [PY, os.path.join(BENCH, "scons_wrap.py"), "-Q", *args]


def plain_ninja(cwd: str) -> str:
    """Write ``plain.ninja``: ``build.ninja`` without the edge (and its
    continuation lines) whose outputs include ``build.ninja``."""
    with open(os.path.join(cwd, NINJA_FILE)) as f:
        lines = f.read().split("\n")
    out, skip = [], False
    for line in lines:
        if line.startswith("build "):
            outputs = line[len("build "):].split(":", 1)[0].split()
            skip = "build.ninja" in outputs
        elif skip and not line.startswith(" ") and line.strip():
            skip = False
        if not skip:
            out.append(line)
    path = os.path.join(cwd, "plain.ninja")
    with open(path, "w") as f:
        f.write("\n".join(out))
    return path


def ninja_log_commands(cwd: str, offset: int):
    """The commands ninja ran since byte ``offset`` of its log: a list of
    (output, milliseconds), one per command (an edge with several outputs
    is counted once)."""
    path = os.path.join(cwd, NINJA_LOG)
    with open(path) as f:
        f.seek(offset)
        text = f.read()
    seen, cmds = set(), []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        start, end, _mtime, output, h = line.split("\t")
        key = (start, end, h)
        if key in seen:
            continue
        seen.add(key)
        cmds.append((output, int(end) - int(start)))
    return cmds


def log_size(cwd: str) -> int:
    try:
        return os.path.getsize(os.path.join(cwd, NINJA_LOG))
    except OSError:
        return 0


def edit_kernel(cwd: str, lib: str, k: int) -> None:
    path = os.path.join(cwd, "kernels", lib, f"{lib}.cpp")
    with open(path) as f:
        text = EDIT_RE.sub("", f.read())
    with open(path, "w") as f:
        f.write(text + f"volatile int gpsimd_bench_edit = {k};\n")


def prepare_ninja(src: str, dst: str) -> dict:
    """A copy of ``src``'s sources built by the ninja path (once)."""
    res = {}
    if not os.path.exists(os.path.join(dst, NINJA_FILE)):
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.makedirs(dst)
        for name in os.listdir(src):
            if name in ("build", ".ninja") or name.startswith((".sconsign", "_floor")) \
                    or name.endswith((".ninja", ".json", ".prof")):
                continue
            s, d = os.path.join(src, name), os.path.join(dst, name)
            if os.path.isdir(s):
                shutil.copytree(s, d, symlinks=True)
            else:
                shutil.copy2(s, d)
        wall, foreign, out = run(scons_cmd("--experimental=ninja"), dst)
        res = {"prepare_wall_s": wall, "foreign_load": foreign,
               "summary": [l for l in out.splitlines() if l.startswith("all libraries")][-1:]}
        log(f"  ninja path built in {wall:.0f} s: {res['summary']}")
    return res


def measure(collection: str, ninja_dir: str, lib: str, edits: int, null_runs: int) -> dict:
    nj = ninja_bin()
    res = {"collection": collection, "lib": lib}
    res["prepare_ninja"] = prepare_ninja(collection, ninja_dir)
    plain = plain_ninja(ninja_dir)
    run([nj, "-f", NINJA_FILE], ninja_dir)      # settle (nothing to build)
    run(scons_cmd(), collection)          # settle the plain path
    # -- null builds ---------------------------------------------------------
    ours, theirs, loads = [], [], []
    for _ in range(null_runs):
        w, f, out = run([nj, "-f", NINJA_FILE], ninja_dir)
        ours.append(w)
        loads.append(f)
        w, f, _ = run([nj, "-f", plain], ninja_dir)
        theirs.append(w)
        loads.append(f)
    res["ninja_null"] = {"min_s": min(ours), "median_s": statistics.median(ours),
                         "runs": [round(x, 4) for x in ours]}
    res["plain_ninja_null"] = {"min_s": min(theirs), "median_s": statistics.median(theirs),
                               "runs": [round(x, 4) for x in theirs]}
    res["ninja_null_ratio"] = min(ours) / min(theirs)
    res["ninja_null_ratio_median"] = statistics.median(ours) / statistics.median(theirs)
    res["ninja_null_last_line"] = out.strip().splitlines()[-1] if out.strip() else ""
    nulls = [run(scons_cmd(lib), collection) for _ in range(3)]
    res["scons_null_lib_s"] = min(w for w, _, _ in nulls)
    # -- edits -----------------------------------------------------------------
    rows = []
    for i in range(edits):
        k = int(time.time()) % 100000 * 10 + i
        row = {"k": k}
        for where in (collection, ninja_dir):
            edit_kernel(where, lib, k)
        off = log_size(ninja_dir)
        w, f, out = run([nj, "-f", NINJA_FILE, "-j1", lib], ninja_dir)
        cmds = ninja_log_commands(ninja_dir, off)
        row["ninja_j1_s"], row["ninja_j1_load"] = w, f
        row["commands_s"] = sum(ms for _, ms in cmds) / 1000
        row["commands"] = len(cmds)
        row["commands_by_kind"] = _by_kind(cmds)
        row["ninja_ratio"] = w / row["commands_s"]
        row["ninja_passed"] = _passed(out)
        w, f, out = run(scons_cmd("-j1", lib), collection)
        row["scons_j1_s"], row["scons_j1_load"] = w, f
        row["scons_ratio"] = w / row["commands_s"]
        row["scons_passed"] = _passed(out)
        row["scons_actions"] = sum(1 for l in out.splitlines()
                                   if re.match(r"(?:\[\d+/\d+\] )?(CXX|LINK|PACK|STACK|TEST|AR) ", l))
        # the same edit again at the default parallelism
        k2 = k + 5
        for where in (collection, ninja_dir):
            edit_kernel(where, lib, k2)
        w, f, out = run([nj, "-f", NINJA_FILE, lib], ninja_dir)
        row["ninja_default_j_s"] = w
        w, f, out = run(scons_cmd(lib), collection)
        row["scons_default_j_s"], row["scons_default_j_load"] = w, f
        row["scons_default_j_passed"] = _passed(out)
        rows.append(row)
        log(f"  edit {i}: commands {row['commands_s']:.2f} s ({row['commands']}); "
            f"ninja -j1 {row['ninja_j1_s']:.2f} s ({row['ninja_ratio']:.2f}x); "
            f"scons -j1 {row['scons_j1_s']:.2f} s ({row['scons_ratio']:.2f}x); "
            f"default -j: scons {row['scons_default_j_s']:.2f} s, ninja {row['ninja_default_j_s']:.2f} s")
    res["edits"] = rows
    for key in ("commands_s", "ninja_j1_s", "scons_j1_s", "ninja_default_j_s", "scons_default_j_s",
                "ninja_ratio", "scons_ratio"):
        res[f"edit_{key}_median"] = statistics.median(r[key] for r in rows)
    res["foreign_load_median"] = statistics.median(loads)
    return res


def _by_kind(cmds):
    kinds = {}
    for output, ms in cmds:
        kind = ("compile" if output.endswith((".o", ".ci")) else
                "link" if output.endswith(".so") and "packed" not in output
                and "stripped" not in output else
                "pack" if "packed" in output or "stripped" in output else
                "test" if output.endswith("test-results.json") else
                "stack report" if output.endswith("stack-report.txt") else "other")
        kinds[kind] = kinds.get(kind, 0) + ms / 1000
    return {k: round(v, 3) for k, v in sorted(kinds.items())}


def _passed(out: str) -> str:
    lines = [l for l in out.splitlines() if re.match(r"^\S+: \d+ passed, \d+ failed", l)]
    return lines[-1] if lines else f"{sum(1 for l in out.splitlines() if l.startswith('PASS '))} PASS lines"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("collection")
    ap.add_argument("--ninja-copy", default=None)
    ap.add_argument("--lib", default=None, help="library to edit (default: the middle one)")
    ap.add_argument("--edits", type=int, default=3)
    ap.add_argument("--null-runs", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    collection = os.path.abspath(a.collection)
    libs = sorted(d for d in os.listdir(os.path.join(collection, "kernels")))
    lib = a.lib or libs[len(libs) // 2]
    res = measure(collection, os.path.abspath(a.ninja_copy or collection.rstrip("/") + "-ninja"),
                  lib, a.edits, a.null_runs)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
