#!/usr/bin/env python3
"""How long a running build takes to stop on Ctrl-C, ``kill -TERM`` or
``kill -9`` while a test vector's kernel spins (issue "A build is never
wrong": aim under 1 s), and whether anything it started is left running.

    python3 bench/stop_latency.py [--work /tmp/gpsimd-stop] [--repeat 5]

Copies this project to WORK and builds ``kernels/broken``'s
``broken_hostile`` library (its ``fork_sleeper`` kernel forks a child that
sleeps and then spins, both named by ``prctl``). Each round starts
``scons test-broken_hostile EMU_TIMEOUT=60`` in a session of its own,
waits until the spinner runs, sends the signal (SIGINT to the whole
process group, as a terminal's Ctrl-C does; SIGTERM to the ``scons``
process only, as ``kill PID`` or a CI runner does; SIGKILL to the
``scons`` process only, which nothing can forward: the emulator server
sees scons end through a pidfd), and measures, in
seconds from the signal: until ``scons`` exits, and until no process of
the test run (``gpsimd-*`` names) is left. Prints the medians and maxima
and the machine's load average.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("gpsimd-sleeper", "gpsimd-spinner", "gpsimd-zygote", "gpsimd-vector", "gpsimd-core",
         "gpsimd-server", "gpsimd-run")
ARGS = ["-Q", "MANIFEST=kernels/broken/ops.yaml", "EMU_TIMEOUT=60", "EMU_MEMORY=256M"]


def ours():
    """{pid: name} of live processes named as a test run names them."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if name in NAMES and state != "Z":
            found[int(pid)] = name
    return found


def scons(work, *args, **kw):
    return subprocess.Popen([sys.executable, "-m", "SCons", *ARGS, *args], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def one_round(work, sig):
    """(seconds to the exit of scons, seconds until nothing is left)."""
    before = set(ours())
    proc = scons(work, "test-broken_hostile", start_new_session=True)
    deadline = time.monotonic() + 120
    while "gpsimd-spinner" not in ours().values():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the spinning kernel never started:\n" + proc.communicate()[0])
        time.sleep(0.01)
    time.sleep(0.2)
    start = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.communicate(timeout=120)
    exited = time.monotonic() - start
    while {p for p in ours() if p not in before}:
        if time.monotonic() - start > 120:
            raise SystemExit("processes of the test run survived 120 s")
        time.sleep(0.005)
    return exited, time.monotonic() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/gpsimd-stop")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if not os.path.exists(os.path.join(a.work, "SConstruct")):
        shutil.copytree(PROJECT, a.work, ignore=shutil.ignore_patterns(
            ".git", "build", ".sconsign*", "__pycache__", "*.pyc"))
    out = scons(a.work, "build/host/broken_hostile/broken_hostile.packed.so",
                "build/host/broken_hostile/testplan.json").communicate()[0]
    results = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        rounds = [one_round(a.work, sig) for _ in range(a.repeat)]
        exits, gone = [r[0] for r in rounds], [r[1] for r in rounds]
        results[sig.name] = {"scons_exit_s": exits, "nothing_left_s": gone}
        print(f"{sig.name}: scons exits after {statistics.median(exits) * 1e3:.0f} ms median "
              f"(max {max(exits) * 1e3:.0f}); nothing left after "
              f"{statistics.median(gone) * 1e3:.0f} ms median (max {max(gone) * 1e3:.0f}); "
              f"{a.repeat} rounds")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(results, loadavg=load), f, indent=1)


if __name__ == "__main__":
    main()
