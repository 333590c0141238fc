#!/usr/bin/env python3
"""Run SCons in this process and record its resource use at exit.

    BENCH_RUSAGE_OUT=out.json python3 bench/scons_wrap.py [scons args...]

Same as ``scons [args]`` (SCons.Script.main, the console entry point, run by
this Python directly: no pyenv shim), then writes to $BENCH_RUSAGE_OUT:
``self_maxrss_kb`` (peak RSS of the SCons process itself),
``self_cpu_s`` (its user+sys time: reading SConscripts, the graph, signatures,
in-process Python actions), ``children_cpu_s`` (user+sys of every waited-for
descendant: compilers, linkers, strip, the emulator; i.e. the external
actions), ``children_maxrss_kb`` (the largest of those) and
``cpu_by_kind``: the CPU seconds (user+sys, from ``wait4`` of each command
SCons spawned, so including everything that command waited for) and the
count of commands of each kind (:func:`kind`), for new and old trees alike.
"""
import atexit
import json
import os
import re
import resource
import subprocess
import sys
import threading

BY_KIND = {}
_LOCK = threading.Lock()

_KINDS = (
    # a test run is a command, or a fork of the build's emulator server (whose
    # CPU, its runs' included, is recorded when the build waits for it at exit)
    ("test run", re.compile(r"gpsimd_emu\b.* run |gpsimd_emu\.server\b")),
    ("stack report", re.compile(r"stack-report|stackreport")),
    ("pack (strip + container)", re.compile(r"gpsimd_build\.steps pack|\bpack\b.*--lsp")),
    ("strip", re.compile(r"(^|/)strip\s|--strip-unneeded")),
    ("call graph compile (-S)", re.compile(r"\s-S\s.*-fcallgraph-info|-fcallgraph-info.*\s-S\s")),
    ("compile", re.compile(r"\s-c\s")),
    ("link", re.compile(r"\s-shared\b")),
    ("archive", re.compile(r"(^|/)ar\s|\brcs")),
    ("digests / summary", re.compile(r"steps (digests|summary)")),
)


def kind(command: str) -> str:
    """The kind of a spawned command line (first match of ``_KINDS``)."""
    for name, pattern in _KINDS:
        if pattern.search(command):
            return name
    return "other"


def _record(args, ru) -> None:
    if isinstance(args, (list, tuple)) and len(args) == 3 and args[1] == "-c":
        args = args[2]                      # sh -c COMMAND
    command = " ".join(args) if isinstance(args, (list, tuple)) else str(args)
    k = kind(command)
    with _LOCK:
        cpu, n = BY_KIND.get(k, (0.0, 0))
        BY_KIND[k] = (cpu + ru.ru_utime + ru.ru_stime, n + 1)


_try_wait = subprocess.Popen._try_wait


def _try_wait_rusage(self, wait_flags):
    """Popen's wait through ``wait4``, keeping the child's rusage."""
    try:
        pid, sts, ru = os.wait4(self.pid, wait_flags)
    except ChildProcessError:
        return _try_wait(self, wait_flags)
    if pid == self.pid:
        _record(self.args, ru)
    return (pid, sts)


subprocess.Popen._try_wait = _try_wait_rusage


def _dump():
    out = os.environ.get("BENCH_RUSAGE_OUT")
    if not out:
        return
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as f:
        json.dump({"self_maxrss_kb": s.ru_maxrss,
                   "self_cpu_s": s.ru_utime + s.ru_stime,
                   "children_cpu_s": c.ru_utime + c.ru_stime,
                   "children_maxrss_kb": c.ru_maxrss,
                   "cpu_by_kind": {k: {"cpu_s": round(v[0], 3), "commands": v[1]}
                                   for k, v in sorted(BY_KIND.items())}}, f)


atexit.register(_dump)
sys.argv[0] = "scons"
from SCons.Script.Main import main  # noqa: E402

sys.exit(main())
