#!/usr/bin/env python3
"""The edit loop on the ninja path: a ninja run with a single test step.
Does starting the ninja run's emulator server (``gpsimd_emu.handoff``: the
first step starts it idle and runs its own vectors) slow that step?

    python3 bench/ninja_edit_step.py PLAN [--root DIR] [--leader LIB] [--repeat N]

Runs ``python -m gpsimd_emu run PLAN`` (this interpreter, from ``--root``,
default the current folder, with ``ROOT/runtime_model`` on
``PYTHONPATH`` when there is one) as the only child of a new process named
``ninja`` each time (a new ninja run: a new server scope), alternately
with ``GPSIMD_EMU_SERVER=0`` and without, ``--repeat`` times each; prints
the step's wall time (ms), median and every run, for both.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

_FAKE_NINJA = ("import ctypes, subprocess, sys, time; "
               "ctypes.CDLL(None).prctl(15, b'ninja', 0, 0, 0); t = time.perf_counter(); "
               "rc = subprocess.run(sys.argv[1:]).returncode; print(time.perf_counter() - t); "
               "sys.exit(rc)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("plan")
    p.add_argument("--root", default=".")
    p.add_argument("--leader", default=None)
    p.add_argument("--repeat", type=int, default=10)
    a = p.parse_args(argv)
    tmp = tempfile.mkdtemp()
    cmd = [sys.executable, "-m", "gpsimd_emu", "run", a.plan, "--results",
           os.path.join(tmp, "results.json"), "--quiet"] + (
               ["--leader", a.leader] if a.leader else [])
    walls = {"0": [], "1": []}
    log = os.path.join(tmp, "handoff.log")
    for i in range(a.repeat):
        for server in (("1", "0") if i % 2 else ("0", "1")):
            env = dict(os.environ, GPSIMD_EMU_SERVER=server,
                       GPSIMD_EMU_HANDOFF_LOG=log)
            model = os.path.join(os.path.abspath(a.root), "runtime_model")
            if os.path.isdir(model):           # (a checkout: its model, not an installed one)
                env["PYTHONPATH"] = model
            out = subprocess.run([sys.executable, "-c", _FAKE_NINJA, *cmd], cwd=a.root, env=env,
                                 capture_output=True, text=True, check=True).stdout
            walls[server].append(float(out.split()[-1]) * 1e3)
            time.sleep(0.2)                 # (the last run's server ends with its ninja)
    for server, label in (("0", "no server (GPSIMD_EMU_SERVER=0)"), ("1", "server started")):
        print(f"{label}: median {statistics.median(walls[server]):.1f} ms "
              f"{sorted(round(w) for w in walls[server])}")
    with open(log) as f:
        lines = f.read().splitlines()
    shutil.rmtree(tmp)
    print(f"steps: {lines.count('here: no server yet; started one')} started a server, "
          f"{sum(x.startswith('here: turned off') for x in lines)} with it turned off")
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
