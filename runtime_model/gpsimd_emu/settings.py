"""The emulator's run settings: defaults, the ``RunOptions`` of a library
session and their command-line options (stdlib only, so that the supervising CLI
process and the zygote read them without importing the model).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Optional

from .client.protocol import DEFAULT_TIMEOUT, JOBS_ENV, QUIET_ENV, VERBOSE_ENV
from .client.values import (DEFAULT_MEMORY, MAX_TIMEOUT, argtype, parse_count, parse_size,
                            parse_timeout)

__all__ = [
    "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "DEFAULT_STACK_SCALE", "MAKING_SLACK", "RUN_SLACK",
    "DEFAULT_MEMORY", "SPREAD_AFTER",
    "JOBS_ENV", "QUIET_ENV", "VERBOSE_ENV", "BLAS_THREADS_ENV", "one_blas_thread", "RunOptions",
    "parse_size", "format_size", "default_parallel", "add_run_options", "run_options",
]

#: Host stack bytes per device stack byte (abi.h ``stack_scale``): host
#: code (x86-64/aarch64, libstdc++) needs several times the Xtensa stack.
DEFAULT_STACK_SCALE = 16
#: Seconds a worker may make a vector ready (its inputs, its reference and
#: the vector before's for the second call: twice the vector's time limit)
#: beyond those limits before its supervisor ends it (``cli._Journal``).
MAKING_SLACK = 10.0
#: Seconds the whole run of a plan may take beyond its vectors' time limits
#: (the references run in the worker, outside any vector's limit).
RUN_SLACK = 30.0
#: Seconds a run of cores goes on in one process before more processes
#: take its remaining cores (so that short kernels never pay for a fork).
SPREAD_AFTER = 0.02
#: The thread-count variables of the BLAS libraries numpy may be built
#: with: OpenBLAS (numpy's wheels), OpenMP builds, MKL.
BLAS_THREADS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread(environ=os.environ) -> bool:
    """Set every ``BLAS_THREADS_ENV`` variable of ``environ`` to ``"1"``
    unless one of them is set already (then the user's choice stands);
    returns whether it set them. Called before numpy is imported by a test
    run (the CLI, the emulator server), so that its numpy starts no BLAS
    threads, which spin for about 0.1 s of CPU (BENCHMARKS.md, "One BLAS
    thread") in a process whose references are small and that runs beside
    a test run per job of the build. Results do not depend on the
    machine's CPU count either."""
    if any(name in environ for name in BLAS_THREADS_ENV):
        return False
    environ.update(dict.fromkeys(BLAS_THREADS_ENV, "1"))
    return True


def format_size(nbytes: int) -> str:
    """``"4 GiB"``, ``"512 MiB"``, ``"1.5 GiB"``, ``"1.2 MiB"`` or ``"N bytes"``:
    the largest binary unit not above ``nbytes``, whole or with one decimal."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return (f"{nbytes // scale} {unit}" if nbytes % scale == 0
                    else f"{nbytes / scale:.1f} {unit}")
    return f"{nbytes} bytes"


def default_parallel() -> int:
    """How many processes a vector's cores may use at once by default: the
    CPUs this process may run on divided by the jobs the build runs at once
    (``$GPSIMD_EMU_JOBS``, 1 when unset), at least 1."""
    cpus = len(os.sched_getaffinity(0))     # (Linux: always there, never fails for itself)
    try:
        jobs = max(1, int(os.environ.get(JOBS_ENV, "1")))
    except ValueError:
        jobs = 1
    return max(1, cpus // jobs)


@dataclass(frozen=True)
class RunOptions:
    """How a library session runs its vectors: the options of
    :func:`add_run_options` (their help says what each does): ``timeout``
    in seconds (> 0), ``memory`` in bytes, ``checks``, ``parallel``
    (processes; None: ``default_parallel()``; 0 or 1: one after another)
    and ``zygote`` (the ``gpsimd-zygote`` program the build made,
    ``gpsimd_device.zygote``; None: the vectors fail, saying so); and
    ``spread_after`` (``SPREAD_AFTER``; 0: at once)."""

    timeout: float = DEFAULT_TIMEOUT
    checks: bool = True
    memory: int = DEFAULT_MEMORY
    parallel: Optional[int] = None
    spread_after: float = SPREAD_AFTER
    zygote: Optional[str] = None

    def processes(self) -> int:
        """The number of processes the cores of a vector may use at once (>= 1)."""
        p = default_parallel() if self.parallel is None else self.parallel
        return max(1, int(p))


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options every entry that runs a plan's vectors takes (``python
    -m gpsimd_emu run``, ``-m gpsimd_emu.vector_service``, ``-m
    gpsimd_explore``); :func:`run_options` makes their ``RunOptions``."""
    p.add_argument("--root", default=".",
                   help="directory the plan's relative paths start from (default: the current one)")
    p.add_argument("--zygote", metavar="PROGRAM",
                   help="the gpsimd-zygote program the build made, which runs every vector "
                        "(default: emu/gpsimd-zygote beside the plan's library folder)")
    p.add_argument("--timeout", type=argtype(parse_timeout), default=DEFAULT_TIMEOUT,
                   help=f"seconds each run of a vector's cores may take (default "
                        f"{DEFAULT_TIMEOUT:g})")
    p.add_argument("--memory", type=argtype(parse_size), default=DEFAULT_MEMORY,
                   help=f"memory a vector may use as a whole: its device image and what its "
                        f"cores allocate, e.g. 512M, 8G (default {format_size(DEFAULT_MEMORY)})")
    p.add_argument("--parallel", type=argtype(parse_count), default=None,
                   help="processes a vector's cores may use at once (0 or 1: one after "
                        "another; default: the CPUs divided by $GPSIMD_EMU_JOBS)")
    p.add_argument("--no-checks", dest="checks", action="store_false",
                   help="run as the device does: cores share one zero-filled output, no "
                        "poison, no write-set / uninitialised-output / multicore-rule / "
                        "coherence / argument-dtype / race checks (faster; crashes, "
                        "timeouts, the memory limit and the runtime's own faults are still "
                        "reported)")


def run_options(args: argparse.Namespace, zygote: Optional[str]) -> "RunOptions":
    """The ``RunOptions`` of :func:`add_run_options`' arguments."""
    return RunOptions(timeout=args.timeout, checks=args.checks, memory=args.memory,
                      parallel=args.parallel, zygote=zygote)

