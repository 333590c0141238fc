#!/usr/bin/env python3
"""Run SCons in this process and record its resource use at exit.

    BENCH_RUSAGE_OUT=out.json python3 bench/scons_wrap.py [scons args...]

Same as ``scons [args]`` (SCons.Script.main, the console entry point, run by
this Python directly: no pyenv shim), then writes to $BENCH_RUSAGE_OUT:
``self_maxrss_kb`` (peak RSS of the SCons process itself),
``self_cpu_s`` (its user+sys time: reading SConscripts, the graph, signatures,
in-process Python actions), ``children_cpu_s`` (user+sys of every waited-for
descendant: compilers, linkers, strip, the emulator; i.e. the external
actions) and ``children_maxrss_kb`` (the largest of those).
"""
import atexit
import json
import os
import resource
import sys


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
                   "children_maxrss_kb": c.ru_maxrss}, f)


atexit.register(_dump)
sys.argv[0] = "scons"
from SCons.Script.Main import main  # noqa: E402

sys.exit(main())
