#!/usr/bin/env python3
"""A 1M-element float32 op on 8 emulated cores vs the same loop compiled
natively (g++ -O2) in one thread.

    python3 bench/native_vs_emu.py [--work /tmp/gpsimd-native] [--elements 1048576]
                                   [--repeat 5]

1. Generates a one-op collection (``gen_collection.py 1 WORK
   --vector-shape E``): op ``op0000_0`` of library ``lib0000``, multicore,
   ``y = x > 0.125 ? x * a + b : x * c`` streamed through TCM by each of the
   8 cores, and builds it with ``scons`` (objects + its own test run).
2. Runs its one vector ``--repeat`` times in process through a
   ``gpsimd_emu.session.LibrarySession`` with the timers of
   ``emu_overhead.py``: vector wall (everything the emulator does for the
   vector) and kernel (the launcher calls of every core in every run:
   wrapper, marshalling, TCM copies, the loop; with the checks a multicore
   vector makes four runs).
3. Compiles the same element function as a plain loop over E floats with
   ``g++ -O2`` (the project's host flags minus -fPIC) and times it in one
   thread, best of 50 after a warm-up.

4. The cost of the checks: the same vector run with the checks (the
   default) and with ``--no-checks``, alternately, ``--repeat`` times each,
   one after another (``--parallel 1``) and with the default parallelism;
   ``checks_ratio`` = median vector wall with checks / without.

Prints the ratios emulated/native for the vector wall and for the kernel.
"""

import argparse
import json
import os
import re
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import gen_collection  # noqa: E402
import emu_overhead  # noqa: E402

NATIVE = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                      return t.tv_sec + 1e-9 * t.tv_nsec; }
__attribute__((noinline)) void op(const float* x, float* y, size_t n) {
    for (size_t i = 0; i < n; i++) { float v = x[i]; y[i] = EXPR; }
}
int main(int argc, char** argv) {
    size_t n = (size_t)atol(argv[1]);
    float* x = (float*)malloc(n * sizeof(float));
    float* y = (float*)malloc(n * sizeof(float));
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) { s = s * 1103515245u + 12345u;
                                     x[i] = ((s >> 8) / 16777216.0f - 0.5f) * 8.0f; }
    op(x, y, n);
    double best = 1e9, sum = 0;
    for (int r = 0; r < 50; r++) {
        double t0 = now(); op(x, y, n); double dt = now() - t0;
        if (dt < best) best = dt; sum += y[r % n];
    }
    printf("{\"best_s\": %.9f, \"check\": %g}\n", best, sum);
    return 0;
}
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/gpsimd-native")
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    work = os.path.abspath(a.work)
    gen_collection.generate(1, work, elements=a.elements, shape_override=a.elements)
    subprocess.run([sys.executable, os.path.join(BENCH, "scons_wrap.py"), "-Q", "-j2"],
                   cwd=work, check=True, stdout=subprocess.DEVNULL)
    emu = emu_overhead.measure(work, repeat=a.repeat, parallel=1)
    walls = {(c, p): [] for c in (True, False) for p in (1, None)}
    for _ in range(a.repeat):            # alternate, so all see the same machine
        for checks, parallel in walls:
            walls[(checks, parallel)].append(
                emu_overhead.measure(work, checks=checks, parallel=parallel)["vector_wall_ms"])
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731

    # the same element expression, from the generated kernel source
    src = open(os.path.join(work, "kernels/lib0000/lib0000.cpp")).read()
    expr = re.search(r"op0000_0\(.*?return map_slice\(t_in, \[\]\(float v\) \{ return (.*?); \}\);",
                     src, re.S).group(1)
    cpp = os.path.join(work, "native.cpp")
    with open(cpp, "w") as f:
        f.write(NATIVE.replace("EXPR", expr))
    exe = os.path.join(work, "native")
    subprocess.run(["g++", "-std=c++14", "-O2", "-o", exe, cpp], check=True)
    nat = json.loads(subprocess.run([exe, str(a.elements)], check=True,
                                    stdout=subprocess.PIPE, text=True).stdout)
    out = {"elements": a.elements, "expr": expr,
           "native_loop_ms": nat["best_s"] * 1e3,
           "emu_vector_wall_ms": emu["vector_wall_ms"],
           "emu_kernel_ms": emu["kernel_ms"],
           "emu_vector_wall_checks_ms": med(walls[(True, 1)]),
           "emu_vector_wall_no_checks_ms": med(walls[(False, 1)]),
           "checks_ratio": med(walls[(True, 1)]) / med(walls[(False, 1)]),
           "emu_vector_wall_checks_parallel_ms": med(walls[(True, None)]),
           "emu_vector_wall_no_checks_parallel_ms": med(walls[(False, None)]),
           "load_average": os.getloadavg(),
           "ratio_vector_wall": emu["vector_wall_ms"] / (nat["best_s"] * 1e3),
           "ratio_kernel": emu["kernel_ms"] / (nat["best_s"] * 1e3),
           "failed": emu["failed"]}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
