#!/usr/bin/env python3
"""The compiler CPU a build spends on this machine, locally and with distcc.

    python3 bench/launcher_cpu.py TREE [--jobs 2] [--servers 2]

TREE is a copy of the project (or a generated collection,
``bench/gen_collection.py``). A ``g++`` of the script's own (also under
the target's name, ``x86_64-linux-gnu-g++``, which Debian's distcc runs), first on the
build's PATH, runs the real one under ``getrusage`` and logs the user+system
CPU seconds of each run with its kind: ``compile`` (``-c``), ``preprocess``
(``-E``, what distcc's client runs before it sends the text), ``link``
(``-shared``) or ``other`` (``-S``, the emulator's program). The script
then builds TREE twice from clean, into ``BUILD_DIR=b-local`` without a
launcher and into ``BUILD_DIR=b-distcc`` with ``CXX_LAUNCHER=distcc``
against ``--servers`` distccd daemons on 127.0.0.1 (started here with a
PATH without the logging g++, so that their compiles are not counted as
local; ``DISTCC_FALLBACK=0``), and prints the CPU seconds per kind for each
build, and the compiles the servers logged. Needs distcc.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

WRAPPER = r'''#!/usr/bin/env python3
import os, resource, subprocess, sys
args = sys.argv[1:]
kind = ("preprocess" if "-E" in args else "compile" if "-c" in args
        else "link" if "-shared" in args else "other")
code = subprocess.call([REAL] + args)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(LOG, "a") as f:
    f.write(f"{kind} {r.ru_utime + r.ru_stime:.4f}\n")
sys.exit(code)
'''


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build(tree, env, *args):
    shutil.rmtree(os.path.join(tree, args[0].split("=", 1)[1]), ignore_errors=True)
    for name in os.listdir(tree):
        if name.startswith(".sconsign"):
            os.unlink(os.path.join(tree, name))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "SCons", "-Q", *args, "all"], cwd=tree, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"scons {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr}")
    return time.perf_counter() - start


def _sums(log):
    out = {}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                kind, cpu = line.split()
                n, total = out.get(kind, (0, 0.0))
                out[kind] = (n + 1, total + float(cpu))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--servers", type=int, default=2)
    args = ap.parse_args(argv)
    if not shutil.which("distccd"):
        raise SystemExit("needs distcc (apt install distcc)")
    tree = os.path.abspath(args.tree)
    work = tempfile.mkdtemp(prefix="launcher-cpu-")
    os.chmod(work, 0o755)     # (the servers run as nobody when this runs as root)
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir)
    real = shutil.which("g++")
    log = os.path.join(work, "cpu.log")
    triplet = subprocess.run([real, "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    # (Debian's distcc runs the target's name, x86_64-linux-gnu-g++, for g++)
    for name in ("g++", "c++", f"{triplet}-g++"):
        path = os.path.join(bindir, name)
        with open(path, "w") as f:
            # (the build passes the actions only the variables it knows:
            # the log's path is written into the wrapper)
            f.write(WRAPPER.replace("REAL", repr(real)).replace("LOG", repr(log)))
        os.chmod(path, 0o755)
    base = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}",
                PYTHONPATH=os.pathsep.join(p for p in (os.path.join(tree, "runtime_model"),
                                                       os.environ.get("PYTHONPATH")) if p))
    results = {}
    took = _build(tree, base, "BUILD_DIR=b-local", f"-j{args.jobs}")
    results["local"] = (took, _sums(log))
    os.unlink(log)
    servers, ports, logs = [], [], []
    try:
        for i in range(args.servers):
            port = _port()
            slog = os.path.join(work, f"distccd{i}.log")
            open(slog, "w").close()
            os.chmod(slog, 0o666)
            servers.append(subprocess.Popen(
                [shutil.which("distccd"), "--no-detach", "--daemon", "--allow", "127.0.0.1",
                 "--listen", "127.0.0.1", "--port", str(port), "--jobs", "1", "--log-file", slog,
                 "--log-level", "info"] + (["--user", "nobody"] if os.geteuid() == 0 else []),
                env=dict(os.environ), start_new_session=True))
            ports.append(port)
            logs.append(slog)
        deadline = time.time() + 10
        for port in ports:
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                if time.time() > deadline:
                    raise SystemExit("distccd did not start")
                time.sleep(0.05)
        env = dict(base, DISTCC_FALLBACK="0",
                   DISTCC_DIR=os.path.join(work, "distcc"),   # (made below)
                   DISTCC_HOSTS=" ".join(f"127.0.0.1:{p}/1" for p in ports))
        os.mkdir(env["DISTCC_DIR"])
        took = _build(tree, env, "BUILD_DIR=b-distcc", "CXX_LAUNCHER=distcc", f"-j{args.jobs}")
        results["distcc"] = (took, _sums(log))
        served = [open(l).read().count("COMPILE_OK") for l in logs]
    finally:
        for s in servers:
            os.killpg(s.pid, signal.SIGTERM)
            s.wait(timeout=10)
    print(f"tree {tree}, -j{args.jobs}, load average before: {os.getloadavg()[0]:.2f}")
    print("| build | wall | local compile CPU | local preprocess CPU | link CPU | other CPU |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (took, sums) in results.items():
        cells = [f"{sums.get(k, (0, 0.0))[1]:.1f} s ({sums.get(k, (0, 0.0))[0]})"
                 for k in ("compile", "preprocess", "link", "other")]
        print(f"| {name} | {took:.1f} s | " + " | ".join(cells) + " |")
    print(f"compiles the distccd servers logged: {served} (sum {sum(served)})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
