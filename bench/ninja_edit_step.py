#!/usr/bin/env python3
"""The edit loop on the ninja path: a ninja run with a single test step.
How long does that step take, with the ninja run's emulator server
(``gpsimd_emu.client.served``) and without?

    python3 bench/ninja_edit_step.py PLAN [--root DIR] [--zygote PROGRAM] [--repeat N]
                                     [--compile-ms MS]

Runs ``python -m gpsimd_emu run PLAN`` (this interpreter, from ``--root``,
default the current folder, with ``ROOT/runtime_model`` on
``PYTHONPATH`` when there is one) as a step of a new process named
``ninja`` each time (a new ninja run: a new server scope), in three ways,
alternating their order, ``--repeat`` times each:

``off``
    ``GPSIMD_EMU_SERVER=0``: the step runs its vectors itself.
``idle``
    no prestart step (a header edited): the step finds no server, starts
    one idle and runs its vectors itself.
``prestart``
    as ``ninja <lib>`` runs after a kernel edit: the prestart step
    (``python -m gpsimd_emu prestart STAMP``) first, then ``--compile-ms``
    (default 400: what a kernel's compile, links and pack take here) of
    one busy CPU (a stand-in for the compile, so the server loads on the
    other one), then the test step, served.

Prints the step's wall time (ms), median and every run, for each, and
how many steps were served.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# (argv: the prestart command or "", the busy milliseconds, the step's command)
_FAKE_NINJA = r"""
import ctypes, json, subprocess, sys, time
ctypes.CDLL(None).prctl(15, b"ninja", 0, 0, 0)
prestart, busy, cmd = json.loads(sys.argv[1])
if prestart:
    subprocess.run(prestart, check=True)
    end = time.perf_counter() + busy / 1e3
    while time.perf_counter() < end:
        pass
t = time.perf_counter()
rc = subprocess.run(cmd).returncode
print(time.perf_counter() - t)
sys.exit(rc)
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("plan")
    p.add_argument("--root", default=".")
    p.add_argument("--zygote", default=None,
                   help="the emulator's program (default: the one beside the plan)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--compile-ms", type=float, default=400.0)
    a = p.parse_args(argv)
    import json
    tmp = tempfile.mkdtemp()
    cmd = [sys.executable, "-m", "gpsimd_emu", "run", a.plan, "--results",
           os.path.join(tmp, "results.json"), "--quiet"] + (
               ["--zygote", a.zygote] if a.zygote else [])
    prestart = [sys.executable, "-m", "gpsimd_emu", "prestart", os.path.join(tmp, "stamp")]
    modes = ("off", "idle", "prestart")
    walls = {m: [] for m in modes}
    log = os.path.join(tmp, "handoff.log")
    for i in range(a.repeat):
        for mode in modes[i % 3:] + modes[:i % 3]:
            env = dict(os.environ, GPSIMD_EMU_SERVER="0" if mode == "off" else "1",
                       GPSIMD_EMU_SERVER_LOG=log)
            model = os.path.join(os.path.abspath(a.root), "runtime_model")
            if os.path.isdir(model):           # (a checkout: its model, not an installed one)
                env["PYTHONPATH"] = model
            job = [prestart if mode == "prestart" else "", a.compile_ms, cmd]
            out = subprocess.run([sys.executable, "-c", _FAKE_NINJA, json.dumps(job)],
                                 cwd=a.root, env=env, capture_output=True, text=True,
                                 check=True).stdout
            walls[mode].append(float(out.split()[-1]) * 1e3)
            time.sleep(0.2)                 # (the last run's server ends with its ninja)
    for mode in modes:
        print(f"{mode}: median {statistics.median(walls[mode]):.1f} ms "
              f"{sorted(round(w) for w in walls[mode])}")
    with open(log) as f:
        lines = f.read().splitlines()
    shutil.rmtree(tmp)
    print(f"steps: {sum(x.startswith('served') for x in lines)} served, "
          f"{lines.count('here: no server yet; started one')} started a server idle, "
          f"{lines.count('prestart: started a server')} prestarts started one, "
          f"{sum(x.startswith('here: turned off') for x in lines)} with it turned off")
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
