#!/usr/bin/env python3
"""Per-vector cost of the emulator, split into the kernel's own work and
the model's overhead.

    python3 bench/emu_overhead.py COLLECTION [--libs K] [--elements E]
                                  [--repeat R] [--profile OUT.txt] [--json OUT]
                                  [--no-checks]

Runs, in this process, ``gpsimd_emu.runner.run_plan`` on the built test
plans of COLLECTION (``build/host/<lib>/testplan.json``, after a full
build), exactly as ``python -m gpsimd_emu run`` does, with timers around:

* each vector (``run_vector``: make inputs, reference, lay out device
  memory, fork, run the cores, judge, compare): *vector wall*;
* inside the forked child, each core's ``load_object`` (dlopen of the
  packed payload through its memfd) + ``register_ops``: *load*; and each
  call of the op's launcher (generated wrapper + customop_* marshalling +
  the user's kernel, native code): *kernel*.

Overhead per vector = vector wall - kernel (the launcher calls, all cores).
``--elements E`` rewrites every vector of the plans to E elements (same
objects, same ops): with E = 8 the kernel's work is nil and the vector wall
is pure overhead. Times are medians over vectors (and --repeat passes).

``--no-checks`` runs as ``python -m gpsimd_emu run --no-checks`` does.

``--profile`` writes a cProfile summary of the parent side of the run
(the child's own time shows there as the parent waiting in select).
"""

import argparse
import cProfile
import glob
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time


def _setup(collection):
    sys.path.insert(0, os.path.join(collection, "runtime_model"))
    from gpsimd_emu import loader, runner, sandbox  # noqa: E402
    return loader, runner, sandbox


_LOG = None   # (file, fd) the instrumented runner logs to; patched once per process


def instrument(loader, sandbox, log_fd):
    """Patch the sandbox so the forked child logs its load and kernel times."""
    orig_load = sandbox.load_object
    orig_register = loader.CoreObject.register_ops

    def timed_load(obj, fd=None):
        t0 = time.perf_counter()
        r = orig_load(obj, fd)
        os.write(log_fd, b"load %.9f\n" % (time.perf_counter() - t0))
        return r

    def timed_register(self):
        t0 = time.perf_counter()
        ops = orig_register(self)
        os.write(log_fd, b"load %.9f\n" % (time.perf_counter() - t0))

        def wrap(f):
            def launcher():
                t = time.perf_counter()
                r = f()
                os.write(log_fd, b"kernel %.9f\n" % (time.perf_counter() - t))
                return r
            return launcher
        self.ops = {k: wrap(f) for k, f in ops.items()}
        return self.ops

    sandbox.load_object = timed_load
    loader.CoreObject.register_ops = timed_register


def resize(plan, elements):
    for op in plan["ops"]:
        for v in op["vectors"]:
            for inp in v["inputs"].values():
                if inp.get("kind") == "tensor":
                    inp["shape"] = [elements]
    return plan


def measure(collection, libs=None, elements=None, repeat=1, profile=None, checks=True):
    """Run the plans ``repeat`` times and return the medians (ms) described
    in the module text; ``checks`` False runs them as ``--no-checks``."""
    global _LOG
    loader, runner, sandbox = _setup(collection)
    if _LOG is None:
        logf = tempfile.TemporaryFile()
        _LOG = (logf, logf.fileno())
        instrument(loader, sandbox, _LOG[1])
    log_fd = _LOG[1]
    plans = sorted(glob.glob(os.path.join(collection, "build/host/*/testplan.json")))
    if libs:
        plans = plans[:libs]
    rows = []
    prof = cProfile.Profile() if profile else None
    orig_run_vector = runner.run_vector

    def timed_run_vector(*a, **kw):
        os.lseek(log_fd, 0, 0)
        os.ftruncate(log_fd, 0)
        t0 = time.perf_counter()
        r = orig_run_vector(*a, **kw)
        wall = time.perf_counter() - t0
        os.lseek(log_fd, 0, 0)
        text = os.read(log_fd, 1 << 20).decode()
        load = kernel = 0.0
        for line in text.splitlines():
            what, dt = line.split()
            if what == "load":
                load += float(dt)
            else:
                kernel += float(dt)
        rows.append({"wall": wall, "load": load, "kernel": kernel,
                     "status": r.status, "elements": r.elements})
        return r

    runner.run_vector = timed_run_vector
    cwd = os.getcwd()
    os.chdir(collection)
    t_all = time.perf_counter()
    try:
        for _ in range(repeat):
            for p in plans:
                if elements:
                    from gpsimd_device.plan import TestPlan
                    with open(p) as f:
                        plan = TestPlan.from_json(resize(json.load(f), elements))
                else:
                    plan = runner.load_plan(p)
                if prof:
                    prof.enable()
                runner.run_plan(plan, root=".", checks=checks)
                if prof:
                    prof.disable()
    finally:
        os.chdir(cwd)
        runner.run_vector = orig_run_vector
    total = time.perf_counter() - t_all
    failed = sum(1 for r in rows if r["status"] != "pass")
    med = lambda k: statistics.median(r[k] for r in rows)
    out = {
        "plans": len(plans), "vectors": len(rows), "failed": failed,
        "elements": elements or "as in manifest", "checks": checks,
        "total_s": total,
        "vector_wall_ms": med("wall") * 1e3,
        "load_ms": med("load") * 1e3,
        "kernel_ms": med("kernel") * 1e3,
        "overhead_ms": statistics.median(r["wall"] - r["kernel"] for r in rows) * 1e3,
        "overhead_excl_load_ms": statistics.median(
            r["wall"] - r["kernel"] - r["load"] for r in rows) * 1e3,
    }
    if prof:
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("cumulative").print_stats(35)
        st.sort_stats("tottime").print_stats(25)
        with open(profile, "w") as f:
            f.write(s.getvalue())
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("collection")
    p.add_argument("--libs", type=int, default=None, help="only the first K plans")
    p.add_argument("--elements", type=int, default=None)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--profile", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--no-checks", dest="checks", action="store_false")
    a = p.parse_args(argv)
    out = measure(os.path.abspath(a.collection), a.libs, a.elements, a.repeat, a.profile,
                  checks=a.checks)
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if out["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
