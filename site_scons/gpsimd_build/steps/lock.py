"""The ``lock`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps lock BUILD_DIR NINJA_DIR RUNNER``
    holds the lock of the build folder ``BUILD_DIR`` for the ninja run
    this step runs under (``RUNNER``: the pid of the program that runs
    it, the parent of its shell) until that run ends, and marks in ninja's
    folder ``NINJA_DIR`` that it does (``gpsimd_build.buildlock.hold_for_ninja``);
    the first step of a ninja run that does any work runs it. Another
    build holding the folder (``scons``, another ``ninja``) stops it at
    once with one line naming that build, before anything is written.
"""

import argparse
import sys

from .. import buildfolder, buildlock

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    try:
        buildlock.hold_for_ninja(args.build_dir, args.ninja_dir, args.runner)
    except buildlock.LockBusy as err:
        print(f"gpsimd: {err}: this ninja run stops before it writes anything; run it "
              f"again once that build has ended", file=sys.stderr)
        return 1
    except buildlock.RunEnded as err:
        print(f"gpsimd: {err}: this step stops", file=sys.stderr)
        return 1
    except (buildlock.UnsafeLock, buildfolder.UnsafeBuildFolder) as err:
        print(f"gpsimd: {err}", file=sys.stderr)
        return 1
    return 0


def add_parser(sub) -> None:
    lk = sub.add_parser("lock", help="hold the build folder's lock for this ninja run")
    lk.add_argument("build_dir")
    lk.add_argument("ninja_dir", help="ninja's own folder (its builddir), for the run's mark")
    lk.add_argument("runner", type=int,
                    help="the pid of the program running the step (its shell's $PPID)")
    lk.set_defaults(run=run)
