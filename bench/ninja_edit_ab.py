#!/usr/bin/env python3
"""The ninja edit loop with and without the ninja run's emulator server,
side by side: one kernel edit, then ``ninja -j2 test-<lib>``, alternately
with ``GPSIMD_EMU_SERVER=0`` (every test step a command of its own, the
prestart step writing its stamp only) and without (the prestart step
starts the server loading beside the compile; the test step is served).

    python3 bench/ninja_edit_ab.py COLLECTION LIB [--edits N]

COLLECTION: a collection of ``bench/gen_collection.py`` built with
``scons --experimental=ninja``. Each edit appends a comment line to
``kernels/LIB/LIB.cpp`` (a new object: the debug line table moves) and is
kept (the kernel's code is unchanged). Prints, for both, the medians of
the build's wall time, the test step's own time and when it started, and
the compile's time (all from ``.ninja_log``, ms), and every test step time.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def _entries(log: str, since_ns: int) -> dict:
    """{output: (start ms, end ms)} of the ``.ninja_log`` entries whose
    output was written after ``since_ns`` (ninja compacts the log now and
    then: counting lines would not do)."""
    out = {}
    with open(log) as f:
        for line in f.readlines()[1:]:
            start, end, mtime, path, _ = line.rstrip("\n").split("\t")
            if int(mtime) >= since_ns:
                out[path] = (int(start), int(end))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("collection")
    p.add_argument("lib")
    p.add_argument("--edits", type=int, default=10)
    a = p.parse_args(argv)
    os.chdir(a.collection)
    kernel = f"kernels/{a.lib}/{a.lib}.cpp"
    rows = {"0": [], "1": []}
    stamp = time.time_ns()
    for i in range(a.edits):
        for server in (("0", "1") if i % 2 == 0 else ("1", "0")):
            stamp += 1
            since = time.time_ns() - 50 * 10 ** 6    # (file times lag the clock by a tick)
            with open(kernel, "a") as f:
                f.write(f"// edit {stamp}\n")
            t0 = time.perf_counter()
            subprocess.run(["ninja", "-f", "build/build.ninja", "-j2", f"test-{a.lib}"], stdout=subprocess.DEVNULL,
                           env=dict(os.environ, GPSIMD_EMU_SERVER=server), check=True)
            wall = (time.perf_counter() - t0) * 1e3
            got = _entries("build/.ninja/.ninja_log", since)
            test = next((v for k, v in got.items() if k.endswith("test-results.json")), None)
            compile_ = next((v for k, v in got.items() if k.endswith(f"{a.lib}.o")), None)
            if test is None or compile_ is None:
                raise SystemExit(f"not in .ninja_log after the edit: {sorted(got)}")
            rows[server].append((wall, test[1] - test[0], test[0], compile_[1] - compile_[0]))
    med = lambda r, i: statistics.median(x[i] for x in r)  # noqa: E731
    for server, label in (("0", "GPSIMD_EMU_SERVER=0"), ("1", "server, prestarted")):
        r = rows[server]
        print(f"{label}: wall {med(r, 0):.0f} ms, test step {med(r, 1):.0f} ms (starts at "
              f"{med(r, 2):.0f} ms), compile {med(r, 3):.0f} ms; test steps "
              f"{sorted(x[1] for x in r)}")
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
