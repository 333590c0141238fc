"""A build's options (``scons NAME=value``, ``scons -h`` lists them),
defined once here and read by the tool into every environment that loads
it: an SConstruct of another project that says ``tools=["gpsimd"]`` gets
the same options, with the same meaning, as the project's own.

:func:`apply` (the tool's ``generate``) reads the command line's
arguments into the environment (``env["MANIFEST"]``, ``env["QUIET"]``...),
and sets what they mean for SCons: the environment the actions see, the
quiet and verbose output, the emulator's flags, the default ``-j``, the
build cache. :func:`unknown` names the arguments no option reads.
"""

import os
import subprocess
import sys
from typing import Iterable, List, Optional

import SCons.Errors
import SCons.Script
from SCons.Script import BoolVariable, EnumVariable, PathVariable, Variables

from gpsimd_build import buildfolder
# (the emulator's variables, named once: imported while the tool loads)
from gpsimd_emu.client.protocol import JOBS_ENV, QUIET_ENV, VERBOSE_ENV
from gpsimd_emu.client.values import parse_count, parse_size, parse_timeout

__all__ = ["PASSED_ENV", "PASSED_ENV_PREFIXES", "JOBS_ENV", "QUIET_ENV", "apply", "unknown"]

#: What the actions see of the shell's environment: PATH and the settings
#: of the tools they may run (compiler launchers, OpenBLAS and the BLAS
#: thread counts a test run's references use: one thread unless one of
#: those is set), not the whole environment. (``INCLUDE_SERVER_*``:
#: distcc's pump mode, which ``distcc-pump`` sets for the compiles.)
PASSED_ENV = ("PATH", "HOME", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
              "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PASSED_ENV_PREFIXES = ("CCACHE_", "SCCACHE_", "DISTCC_", "ICECC_", "INCLUDE_SERVER_")


def _checked(parse):
    """A variable's validator: empty, or a value ``parse`` (``gpsimd_emu.client.values``,
    which the emulator's options use too) takes; else SCons stops, naming the variable."""
    def validate(key, value, env) -> None:
        try:
            if value != "":
                parse(value)
        except ValueError as e:
            raise SCons.Errors.UserError(f"{key}={value}: {e}") from None
    return validate


def _variables(env) -> Variables:
    """Every option, with its help text and default (an option the
    environment already holds, such as ``CXX``, defaults to its value)."""
    vars = Variables(None, SCons.Script.ARGUMENTS)
    vars.Add("MANIFEST", "the op-collection manifest to build", "ops.yaml")
    vars.Add(PathVariable("BUILD_DIR", "directory that receives every output",
                          "build", PathVariable.PathAccept))
    vars.Add(EnumVariable("TOOLCHAIN", "target profile: host (build and emulate) or xtensa (the "
                          "vendor toolchain)", "host", allowed_values=("host", "xtensa")))
    vars.Add(PathVariable("CACHE_DIR", "share build results through SCons's CacheDir at this "
                          "path (off when empty)", "", PathVariable.PathAccept))
    vars.Add(EnumVariable("CXX_LAUNCHER", "run compiles through this launcher; it is not part "
                          "of any signature: switching it rebuilds nothing", "",
                          allowed_values=("", "ccache", "sccache", "distcc", "icecc")))
    vars.Add(BoolVariable("FAST", "trust file timestamps and cached header scans (faster null "
                          "builds; misses an edit that keeps a file's size and timestamp, a "
                          "header newly added on the include path, or one only the compiler's "
                          "depfile names until its object compiles again)", False))
    vars.Add(BoolVariable("VERBOSE", "print full command lines instead of one short line per "
                          "action", False))
    vars.Add(BoolVariable("QUIET", "print only failures, warnings and the summary (no action "
                          "lines, no PASS lines); changes no result, so switching it re-runs "
                          "nothing", False))
    vars.Add(BoolVariable("EMU_CHECKS", "run the emulator's checks (write sets, poison, "
                          "multicore rules, coherence, argument dtypes); 0 runs as the device "
                          "does, faster", True))
    vars.Add(BoolVariable("RETEST", "run every test asked for again, even when its results "
                          "are current or in the build cache (as Bazel's "
                          "--nocache_test_results); the SCons path's (on the ninja path, "
                          "remove the results files)", False))
    vars.Add(BoolVariable("EMU_SERVER", "fork each library's test run from one emulator process "
                          "started by the build (no interpreter and numpy start per library); "
                          "changes no result", True))
    vars.Add("ALLOW_PATHS", "folders outside the project the manifests may name (sources, "
             "includes, .npy and reference files), separated by '" + os.pathsep + "'; see "
             "docs/manifest.md 'Trust model'", "")
    vars.Add("EMU_TIMEOUT", "seconds each run of a test vector's cores may take (empty: the "
             "emulator's default, 60)", "", _checked(parse_timeout))
    vars.Add("EMU_MEMORY", "memory a test vector may use as a whole, its device image and what "
             "its cores allocate, e.g. 512M or 8G (empty: the emulator's default, 4G)", "",
             _checked(parse_size))
    vars.Add("EMU_PARALLEL", "processes a test vector's cores may use at once; 0 runs them one "
             "after another (empty: the CPUs divided by the jobs of -j)", "",
             _checked(parse_count))
    vars.Add("EXPLORE_EXAMPLES", "inputs `scons explore` draws per op (gpsimd_explore)", "100")
    vars.Add("EXPLORE_SEED", "the seed of `scons explore` (the same seed, the same examples "
             "while the example database under BUILD_DIR holds no failure)", "0")
    vars.Add("EXPLORE_TIME", "seconds `scons explore` may search one op (empty: no limit)", "")
    vars.Add("CXX", "the host profile's C++ compiler", env.get("CXX") or "g++")
    vars.Add(EnumVariable("LINKER", "the host profile's linker: gold, bfd, or auto (gold when "
                          "ld.gold is on PATH: it links about 2.7x faster than bfd)", "auto",
                          allowed_values=("auto", "gold", "bfd")))
    vars.Add(EnumVariable("BUILD_LOCK", "a second build of the same BUILD_DIR waits for the "
                          "first (wait) or stops at once (fail)", "wait",
                          allowed_values=("wait", "fail")))
    return vars


def apply(env) -> None:
    """Read the options into ``env`` and set what they mean (module text).
    A bad value stops SCons with its own message (``scons: *** ...``)."""
    vars = _variables(env)
    vars.Update(env)
    env["GPSIMD_OPTIONS"] = sorted(vars.keys())
    SCons.Script.Help(vars.GenerateHelpText(env))
    for key, value in os.environ.items():
        if key in PASSED_ENV or key.startswith(PASSED_ENV_PREFIXES):
            env["ENV"][key] = value
    # QUIET: no action lines (the tool's progress), none of SCons's own
    # messages (-Q -s), and no PASS lines (the emulator's quiet mode, in the
    # environment: out of the test command's signature)
    if env["QUIET"]:
        SCons.Script.SetOption("no_progress", True)
        SCons.Script.SetOption("silent", True)
        env["ENV"][QUIET_ENV] = "1"
    if env["VERBOSE"]:
        env["ENV"][VERBOSE_ENV] = "1"
        for key in list(env.Dictionary()):
            if key.startswith("GPSIMD_") and key.endswith("COMSTR"):
                env[key] = None
    # passed to `python -m gpsimd_emu run`: part of the test command, so
    # switching one re-runs the tests
    env["GPSIMD_EMU_FLAGS"] = ([] if env["EMU_CHECKS"] else ["--no-checks"]) + (
        ["--timeout", env["EMU_TIMEOUT"]] if env["EMU_TIMEOUT"] else []) + (
        ["--memory", env["EMU_MEMORY"]] if env["EMU_MEMORY"] else []) + (
        ["--parallel", env["EMU_PARALLEL"]] if env["EMU_PARALLEL"] else [])
    # as ninja does: the machine's cores unless -j/--jobs is given
    if not any(a == "-j" or a.startswith(("-j", "--jobs")) for a in
               sys.argv[1:] + os.environ.get("SCONSFLAGS", "").split()):
        SCons.Script.SetOption("num_jobs", len(os.sched_getaffinity(0))
                               if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    env["ENV"][JOBS_ENV] = str(SCons.Script.GetOption("num_jobs"))
    if env["CACHE_DIR"]:
        try:
            env.CacheDir(env["CACHE_DIR"])     # (keyed by $CACHEDIR_CLASS: gpsimd_tool.cache)
        except OSError as e:    # (SCons makes the folder and its config file at once)
            where = f"{e.filename}: " if e.filename and e.filename != env["CACHE_DIR"] else ""
            sys.stderr.write(f"scons: cannot use CACHE_DIR={env['CACHE_DIR']}: {where}"
                             f"{e.strerror} (errno {e.errno})\n")
            SCons.Script.Exit(2)
        try:
            buildfolder.check_cache(env["CACHE_DIR"])
        except buildfolder.UnsafeBuildFolder as e:
            sys.stderr.write(f"scons: {e}\n")
            SCons.Script.Exit(2)
    problem = _launcher_problem(env["CXX_LAUNCHER"], env["ENV"])
    if problem:
        sys.stderr.write(f"scons: {problem}\n")
        SCons.Script.Exit(2)
    if env["FAST"]:         # the opt-in shortcut: header scans kept between runs
        SCons.Script.SetOption("implicit_cache", 1)


def _launcher_problem(launcher: str, environ) -> Optional[str]:
    """Why ``launcher`` could hand back a stale object, or None. ccache's
    ``sloppiness`` ``file_stat_matches`` (``CCACHE_SLOPPINESS`` or
    ``ccache.conf``, read as the compiles will: ``ccache -k`` in their
    environment ``environ``) trusts a header whose size and times are those
    it cached: one replaced by another of the same size and time (``cp -p``,
    ``tar x``) is compiled again by the build, and ccache returns the old
    header's object (docs/scale-out.md)."""
    if launcher != "ccache":
        return None
    try:
        proc = subprocess.run(["ccache", "-k", "sloppiness"], env=dict(environ),
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None         # (the first compile says why ccache does not run)
    unsafe = [w for w in (w.strip() for w in proc.stdout.split(","))
              if w.startswith("file_stat_matches")]
    if not unsafe:
        return None
    return (f"CXX_LAUNCHER=ccache with ccache's sloppiness {', '.join(unsafe)} (set by "
            "CCACHE_SLOPPINESS or ccache.conf): ccache would hand back the object of a header "
            "replaced by another of the same size and time, which this build compiles again. "
            "Take it out of the sloppiness, or build without CXX_LAUNCHER")


def unknown(env, known: Iterable[str] = ()) -> List[str]:
    """The command line's arguments that neither an option nor ``known``
    (an SConstruct's own variables) reads, sorted; SCons's ninja tool's own
    (``NINJA_*``, ``__NINJA_*``, passed when it regenerates build.ninja)
    are known."""
    names = set(env.get("GPSIMD_OPTIONS", ())) | set(known)
    return sorted(k for k in SCons.Script.ARGUMENTS
                  if k not in names and not k.lstrip("_").startswith("NINJA_"))
