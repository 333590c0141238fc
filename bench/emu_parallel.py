#!/usr/bin/env python3
"""The cores of a vector one after another against spread over processes
(issue "Eight cores as the device runs them", item 3): a multicore op
whose eight cores each compute for ``--seconds`` (a busy loop, so the
machine's CPUs are what limits), one vector, with and without checks.

    python3 bench/emu_parallel.py [--work /tmp/gpsimd-parallel] [--seconds 0.5]
                                  [--repeat 3] [--parallel N]

Builds a one-library project in WORK (a copy of this project's build
files and runtime), then times ``LibrarySession.run_vector`` with
``RunOptions(parallel=1)`` and ``RunOptions(parallel=N)`` (default: the
emulator's default, CPUs / $GPSIMD_EMU_JOBS), checks on and off. Prints
the medians, the CPUs and the load average.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERNEL = r"""
#include <time.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
// Each core computes for SECONDS (a busy loop), then writes its slice of 2x.
torch::Tensor busy(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    volatile double sink = 0;
    const double end = now() + SECONDS;
    while (now() < end) for (int i = 0; i < 1000; i++) sink = sink + 1.0;
    const size_t n = x.numel(), id = get_cpu_id(), cnt = get_cpu_count();
    const size_t begin = id * (n / cnt), count = id == cnt - 1 ? n - begin : n / cnt;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * 64);
    for (size_t i = 0; buf && i < count; i += 64) {
        const size_t k = count - i < 64 ? count - i : 64;
        x.tcm_accessor().tensor_to_tcm<float>(buf, begin + i, k);
        for (size_t j = 0; j < k; j++) buf[j] *= 2.0f;
        out.tcm_accessor().tcm_to_tensor<float>(buf, begin + i, k);
    }
    torch::neuron::tcm_free(buf);
    return out;
}
"""


def build(work, seconds):
    os.makedirs(os.path.join(work, "k"), exist_ok=True)
    for part in ("SConstruct", "site_scons", "schema", "runtime_model"):
        dst = os.path.join(work, part)
        if not os.path.lexists(dst):
            os.symlink(os.path.join(PROJECT, part), dst)
    with open(os.path.join(work, "k", "busy.cpp"), "w") as f:
        f.write(KERNEL.replace("SECONDS", repr(float(seconds))))
    with open(os.path.join(work, "k", "ref.py"), "w") as f:
        f.write("import numpy as np\ndef double(x):\n    return (x * np.float32(2)).astype(np.float32)\n")
    manifest = {"version": 1, "libraries": [{
        "name": "busy", "multicore": True, "sources": ["k/busy.cpp"],
        "ops": [{"schema": "b::busy(Tensor x) -> Tensor", "reference": "k/ref.py:double",
                 "vectors": [{"name": "n4096", "inputs": {"x": {
                     "dtype": "float32", "shape": [4096], "random": {"seed": 1}}}}]}]}]}
    with open(os.path.join(work, "ops.yaml"), "w") as f:
        json.dump(manifest, f)
    targets = ["build/host/busy/testplan.json"] + [
        f"build/host/busy/busy_cpu{i}.packed.so" for i in range(8)]
    subprocess.run([sys.executable, "-m", "SCons", "-Q", "-j2", *targets], cwd=work, check=True,
                   stdout=subprocess.DEVNULL)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/gpsimd-parallel")
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=None)
    a = ap.parse_args(argv)
    work = os.path.abspath(a.work)
    build(work, a.seconds)
    sys.path.insert(0, os.path.join(work, "runtime_model"))
    from gpsimd_device.plan import TestPlan
    from gpsimd_emu.session import LibrarySession, RunOptions
    plan = TestPlan.load(os.path.join(work, "build/host/busy/testplan.json"))
    out = {"seconds_per_core": a.seconds, "cpus": len(os.sched_getaffinity(0))}
    for checks in (False, True):
        for label, parallel in (("serial", 1), ("parallel", a.parallel)):
            options = RunOptions(checks=checks, parallel=parallel, timeout=120)
            walls = []
            with LibrarySession(plan, root=work, options=options) as s:
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    r = s.run_vector("busy", "n4096")
                    walls.append(time.perf_counter() - t0)
                    assert r.status == "pass", r.message
            key = f"{label}{'' if checks else '_no_checks'}"
            out[f"{key}_s"] = statistics.median(walls)
            out[f"{key}_processes"] = options.processes()
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
