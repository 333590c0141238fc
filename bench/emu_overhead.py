#!/usr/bin/env python3
"""Per-vector cost of the emulator, split into the kernel's own work and
the model's overhead, and the start-up of a library's test run.

    python3 bench/emu_overhead.py COLLECTION [--libs K] [--elements E]
                                  [--repeat R] [--no-checks] [--parallel N]
                                  [--startup] [--json OUT]

Per vector (in this process, through ``gpsimd_emu.session.LibrarySession``
exactly as ``python -m gpsimd_emu run`` does; one session per library, its
zygote started and its objects loaded before the timing starts):

* *vector wall*: ``run_vector`` (declared sizes, inputs, reference, device
  image, the zygote's forks of the vector's processes, every run of the
  cores, validation of the control block, the checks, the comparison);
* *kernel*: the launcher calls of every core in every run (generated
  wrapper, customop_* marshalling, the user's kernel), from the control
  block's timestamps (``VectorResult.kernel_seconds``);
* *overhead* = vector wall - kernel. Medians over vectors and repeats.

and per library as the CLI runs it (``run_all``: the next vector is made
ready while the zygote runs the current one, so the worker and the cores
use two CPUs at once): *library wall* / vectors (``run_all_vector_ms``)
and (library wall - every kernel) / vectors (``run_all_overhead_ms``),
medians over the libraries and repeats.

The vectors run in the executor of the collection's ``runtime_model``,
compiled here as the build compiles it: ``gpsimd-zygote``
(``gpsimd_device.zygote``), or, for a checkout from before it (da31ac5
and earlier), its native leader library (``gpsimd_device.leader``), so
that two checkouts can be measured side by side.

``--elements E`` rewrites every vector to E elements (same objects, same
ops): with E = 8 the kernel's work is nil. ``--no-checks`` runs as
``--no-checks`` does; ``--parallel N`` as ``--parallel N`` (default: the
emulator's default).

``--startup`` times the CLI (``python -m gpsimd_emu run``, a fresh
process that runs its vectors itself, as ``EMU_SERVER=0`` runs it, given
the executor as the build's commands are) on each library's
plan cut to its first vector and to all its vectors; the start-up is the
intercept of the line through the two (wall = start-up + vectors x
per-vector), median over the libraries and repeats; it is measured with
``PYTHONDONTWRITEBYTECODE=1`` (every import compiles) and without it
(bytecode cached), each reported. ``server_ms``: the same through the
build's emulator server (``gpsimd_tool/emu_server.py``, as the SCons path
runs a test: the server started once before the timing, bytecode cached).
``ninja_server_ms``: the same command as a ninja build's test step runs it
(its parent is a process named ``ninja``: this one, renamed for the
time), handed to the server that the first steps started
(``gpsimd_emu.client.served``; warmed up before the timing, bytecode cached).
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _setup(collection):
    sys.path.insert(0, os.path.join(collection, "runtime_model"))
    from gpsimd_device.plan import TestPlan  # noqa: E402
    from gpsimd_emu.session import LibrarySession, RunOptions  # noqa: E402
    return TestPlan, LibrarySession, RunOptions


def resize(plan, elements):
    for op in plan["ops"]:
        for v in op["vectors"]:
            for inp in v["inputs"].values():
                if inp.get("kind") == "tensor":
                    inp["shape"] = [elements]
    return plan


def _plans(collection, libs, elements):
    paths = sorted(glob.glob(os.path.join(collection, "build/host/*/testplan.json")))
    if libs:
        paths = paths[:libs]
    out = []
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        out.append(resize(doc, elements) if elements else doc)
    return paths, out


def executor(collection, into):
    """Compile the collection's executor into folder ``into``, as the
    build does: ``("zygote", path)``, or ``("leader", path)`` for a
    checkout from before the program (its native leader library)."""
    root = os.path.join(collection, "runtime_model")
    sys.path.insert(0, root)
    include, emu = os.path.join(root, "include"), os.path.join(root, "gpsimd_emu")
    cxx = os.environ.get("CXX", "g++")
    if os.path.exists(os.path.join(root, "gpsimd_device", "zygote.py")):
        from gpsimd_device import zygote
        target = os.path.join(into, zygote.PROGRAM_NAME)
        sources = [p for p in zygote.source_paths(emu, include) if p.endswith(".c")]
        cmd = [cxx, "-std=c11", "-O2", "-Wall",
               f"-DGZ_SOURCE_DIGEST={zygote.source_digest(emu, include)}", "-I", include,
               "-o", target, *(a for p in sources for a in ("-x", "c", p)), "-ldl"]
        kind = "zygote"
    else:
        from gpsimd_device import leader
        target = os.path.join(into, leader.LIBRARY_NAME)
        cmd = leader.compile_command(cxx, emu, include, target)     # (da31ac5's signature)
        kind = "leader"
    subprocess.run(cmd, check=True)
    return kind, target


def measure(collection, program, libs=None, elements=None, repeat=1, checks=True,
            parallel=None, raw=None):
    """The medians (ms) described in the module text; ``program``: the
    executor (``executor``); ``raw``: (rows, per_library) lists to add
    this measure's to (medians over all)."""
    TestPlan, LibrarySession, RunOptions = _setup(collection)
    _, docs = _plans(collection, libs, elements)
    options = RunOptions(checks=checks, parallel=parallel, **{program[0]: program[1]})
    rows, per_library = raw if raw is not None else ([], [])
    cwd = os.getcwd()
    os.chdir(collection)
    t_all = time.perf_counter()
    try:
        for doc in docs:
            plan = TestPlan.from_json(doc)
            with LibrarySession(plan, root=".", options=options) as s:
                first = plan.ops[0]
                s.run_vector(first, first.vectors[0])        # zygote up, objects loaded
                for _ in range(repeat):
                    for op in plan.ops:
                        for v in op.vectors:
                            t0 = time.perf_counter()
                            r = s.run_vector(op, v)
                            wall = time.perf_counter() - t0
                            rows.append({"wall": wall, "kernel": r.kernel_seconds,
                                         "status": r.status, "elements": r.elements})
                    t0 = time.perf_counter()
                    res = s.run_all()
                    wall = time.perf_counter() - t0
                    n = len(res.vectors)
                    per_library.append((wall / n, (wall - sum(v.kernel_seconds for v in res.vectors)) / n))
    finally:
        os.chdir(cwd)
    return summary(rows, per_library, len(docs), elements, checks, options.processes(),
                   time.perf_counter() - t_all)


def summary(rows, per_library, plans, elements, checks, parallel, seconds):
    """The figures of ``measure`` from its raw rows."""
    med = lambda k: statistics.median(r[k] for r in rows) * 1e3  # noqa: E731
    return {
        "plans": plans, "vectors": len(rows),
        "failed": sum(1 for r in rows if r["status"] != "pass"),
        "elements": elements or "as in manifest", "checks": checks,
        "parallel": parallel, "total_s": seconds,
        "vector_wall_ms": med("wall"), "kernel_ms": med("kernel"),
        "overhead_ms": statistics.median(r["wall"] - r["kernel"] for r in rows) * 1e3,
        "run_all_vector_ms": statistics.median(w for w, _ in per_library) * 1e3,
        "run_all_overhead_ms": statistics.median(o for _, o in per_library) * 1e3,
    }


def _command(plan, tmp, checks, program):
    """``python -m gpsimd_emu run`` of ``plan`` as the build's test commands run it."""
    return [sys.executable, "-m", "gpsimd_emu", "run", plan, "--results",
            os.path.join(tmp, "r.json")] + ([] if checks else ["--no-checks"]) + [
                f"--{program[0]}", program[1]]


def _intercepts(docs, tmp, repeat, run):
    """Start-up and per-vector slope (ms, medians over libraries and
    repeats): ``run(plan_path)`` times one run (seconds) of each library's
    plan cut to its first vector and of the whole plan."""
    intercepts, slopes = [], []
    for _ in range(repeat):
        for doc in docs:
            n_all = sum(len(o["vectors"]) for o in doc["ops"])
            one = dict(doc, ops=[dict(doc["ops"][0], vectors=doc["ops"][0]["vectors"][:1])])
            walls = []
            for d in (one, doc):
                plan = os.path.join(tmp, "plan.json")
                with open(plan, "w") as f:
                    json.dump(d, f)
                walls.append(run(plan))
            slope = (walls[1] - walls[0]) / max(1, n_all - 1)
            slopes.append(slope)
            intercepts.append(walls[0] - slope)
    return statistics.median(intercepts) * 1e3, statistics.median(slopes) * 1e3


def _env(collection, bytecode):
    env = dict(os.environ, PYTHONPATH=os.path.join(collection, "runtime_model"))
    env.pop("GPSIMD_EMU_SERVER", None)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def startup(collection, program, libs=None, repeat=3, checks=True):
    """Start-up of the CLI (module text): {"no_pyc_ms", "pyc_ms",
    "per_vector_ms", "server_ms", "ninja_server_ms", ...}, each a median;
    ``program``: the executor (``executor``), given to every run as the
    build's test commands give it."""
    paths, docs = _plans(collection, libs, None)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, bytecode in (("no_pyc", False), ("pyc", True)):
            env = dict(_env(collection, bytecode), GPSIMD_EMU_SERVER="0")

            def run(plan):
                t0 = time.perf_counter()
                subprocess.run(_command(plan, tmp, checks, program), cwd=collection, env=env,
                               check=True, stdout=subprocess.DEVNULL)
                return time.perf_counter() - t0
            if bytecode:
                run(paths[0])          # its bytecode written
            out[f"{label}_ms"], out[f"{label}_per_vector_ms"] = _intercepts(docs, tmp, repeat, run)
        out.update(_server_startup(collection, docs, tmp, repeat, checks, program))
        out.update(_ninja_startup(collection, docs, tmp, repeat, checks, program))
    return out


def _server_startup(collection, docs, tmp, repeat, checks, program):
    """``startup`` through the emulator server: {"server_ms",
    "server_per_vector_ms"}."""
    import importlib.util
    import inspect
    sys.path.insert(0, os.path.join(collection, "runtime_model"))   # (its client)
    spec = importlib.util.spec_from_file_location(
        "emu_server", os.path.join(collection, "site_scons", "site_tools", "gpsimd_tool",
                                   "emu_server.py"))
    emu_server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emu_server)
    # (one "started" callback; before the one server design, "ended" too)
    callbacks = [lambda r: None] * (len(inspect.signature(emu_server.run).parameters) - 2)
    env = _env(collection, True)
    cwd = os.getcwd()
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.chdir(collection)
    os.dup2(devnull, 1)                  # the runs write to our stdout
    try:
        def run(plan):
            t0 = time.perf_counter()
            status = emu_server.run(_command(plan, tmp, checks, program), env,
                                    *callbacks)
            if status != 0:
                raise RuntimeError(f"the server's run failed: {status}")
            return time.perf_counter() - t0
        doc = docs[0]
        with open(os.path.join(tmp, "plan.json"), "w") as f:
            json.dump(doc, f)
        run(os.path.join(tmp, "plan.json"))   # the server up, its bytecode written
        ms, per_vector = _intercepts(docs, tmp, repeat, run)
    finally:
        os.dup2(out_fd, 1)
        os.close(out_fd)
        os.close(devnull)
        os.chdir(cwd)
        emu_server.close()
    return {"server_ms": ms, "server_per_vector_ms": per_vector}


def _ninja_startup(collection, docs, tmp, repeat, checks, program):
    """``startup`` as a ninja build's test steps run (``gpsimd_emu.client``):
    each a command whose parent is a process named ``ninja`` (this one,
    renamed for the time), handed to the server the first ones started
    (warmed up before the timing; bytecode cached): {"ninja_server_ms",
    "ninja_server_per_vector_ms"}."""
    import ctypes
    libc = ctypes.CDLL(None)
    with open("/proc/self/comm", "rb") as f:
        name = f.read().strip()
    log = os.path.join(tmp, "handoff.log")
    env = dict(_env(collection, True), GPSIMD_EMU_SERVER_LOG=log,
               GPSIMD_EMU_HANDOFF_LOG=log)        # (the name before the one server design)
    libc.prctl(15, b"ninja", 0, 0, 0)
    try:
        def run(plan):
            t0 = time.perf_counter()
            subprocess.run(_command(plan, tmp, checks, program), cwd=collection, env=env,
                           check=True, stdout=subprocess.DEVNULL)
            return time.perf_counter() - t0
        deadline = time.monotonic() + 60
        while True:                                   # until a run is served
            if os.path.exists(log):
                with open(log) as f:
                    if "served" in f.read():
                        break
            if time.monotonic() > deadline:
                raise RuntimeError("no run was handed to a ninja server")
            doc = docs[0]
            one = dict(doc, ops=[dict(doc["ops"][0], vectors=doc["ops"][0]["vectors"][:1])])
            with open(os.path.join(tmp, "plan.json"), "w") as f:
                json.dump(one, f)
            run(os.path.join(tmp, "plan.json"))
        os.unlink(log)
        ms, per_vector = _intercepts(docs, tmp, repeat, run)
        with open(log) as f:
            served = f.read().count("served")
        if served != 2 * repeat * len(docs):
            raise RuntimeError(f"only {served} runs were handed to the ninja server")
    finally:
        libc.prctl(15, name, 0, 0, 0)
    return {"ninja_server_ms": ms, "ninja_server_per_vector_ms": per_vector}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("collection")
    p.add_argument("--libs", type=int, default=None, help="only the first K plans")
    p.add_argument("--elements", type=int, default=None)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--parallel", type=int, default=None)
    p.add_argument("--startup", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--no-checks", dest="checks", action="store_false")
    a = p.parse_args(argv)
    collection = os.path.abspath(a.collection)
    with tempfile.TemporaryDirectory() as tmp:
        program = executor(collection, tmp)
        raw = ([], [])
        out = {}
        for _ in range(a.repeat):
            got = measure(collection, program, a.libs, a.elements, 1, a.checks, a.parallel,
                          raw=raw)
            got["total_s"] += out.get("vectors", {}).get("total_s", 0.0)
            out["vectors"] = got
        out["executor"] = program[0]
        if a.startup:
            out["startup"] = startup(collection, program, a.libs, a.repeat, a.checks)
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if out["vectors"]["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
