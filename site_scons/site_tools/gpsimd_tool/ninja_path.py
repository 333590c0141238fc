"""The ninja fast path: the same graph, run by ninja (``scons
--experimental=ninja``, SCons's own ninja tool, which writes
``<BUILD_DIR>/build.ninja`` from the graph and runs ninja; then ``ninja -f
<BUILD_DIR>/build.ninja`` for the edit loop).

Every action of the graph is already a command line (no Python function
action, nothing falls back to calling SCons). What ninja needs on top:

* header dependencies from depfiles: the profile's compiles write one
  (the host's ``-MD -MF $TARGET.d``: every file read, system headers
  too), and their rule has ``deps = gcc`` (:func:`setup`);
* ``build.ninja`` regenerates by itself when the manifests, the files they
  name (references, ``.npy``), the JSON Schema, the build library or the
  host runtime's sources change (``NINJA_REGENERATE_DEPS``; the generated
  texts, e.g. test plans, are written at generation time);
* the summary: test steps that record a failure and exit 0
  (:func:`record_failures`), a step that writes ``test-summary.txt`` and
  the report from the results, prints the summary and fails when a vector
  failed, and an edge that prints it with ``cat`` on every run, without
  starting Python, when it passed; what this run made is told by the
  run's own lock mark (:func:`summary`, :func:`_this_run`); every other
  step runs the summary step when it fails (:func:`failure_rules`);
* the prestart step, which starts the emulator server the test steps
  hand their runs to as the ninja run begins (:func:`prestart`);
* ninja's own output on our stdout, as when run by hand (SCons's tool
  would pipe it and erase each ``[n/N]`` line, even into a log file);
* ``build.ninja`` kept through a stop of the run regenerating it
  (``gpsimd_build.ninjakeep``); else ninja's own log (``.ninja_log``)
  makes an interrupted ninja build safe.
"""

import os
import shlex
import signal
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

import SCons.Action
import SCons.Node
import SCons.Node.Alias
import SCons.Node.FS
import SCons.Script

from gpsimd_build import buildlock, ninjakeep, ninjarecord
from gpsimd_build import results_summary as states

# (imported while the tool loads: SCons restores sys.path afterwards, and
# without an installed package gpsimd_emu is found only through it)
from gpsimd_emu.client.process import tied_to_me
from gpsimd_emu.client.protocol import JOBS_ENV, SERVER_ENV

from . import scons as scons_launcher
from . import probes, signals

__all__ = ["wanted", "load_tool", "active", "setup", "map_compiles", "regenerate_on", "summary",
           "failure_rules", "map_tests", "record_failures", "verdict", "drop_jobs", "made_from",
           "prestart"]


def wanted() -> bool:
    """Was scons started with ``--experimental=ninja``?"""
    try:
        return "ninja" in (SCons.Script.GetOption("experimental") or ())
    except (AttributeError, KeyError):
        return False


def load_tool(env, build_dir: str) -> None:
    """Load SCons's ninja tool into ``env``, its files in ``build_dir``:
    ``<build_dir>/build.ninja`` (``ninja -f`` it; the paths in it stay
    relative to the project's folder) and ninja's own state, its
    ``builddir`` (``.ninja_log``, ``.ninja_deps``), in
    ``<build_dir>/.ninja``, so that two build folders never share them. It
    regenerates build.ninja by re-running ``sys.argv[0]``; under ``python
    -m SCons`` that is not a program, so it becomes this package's
    ``scons.py``, which the tool runs with this Python."""
    env["NINJA_FILE_NAME"] = os.path.join(build_dir, "build.ninja")
    env["NINJA_DIR"] = os.path.join(build_dir, ".ninja")
    argv0 = sys.argv[0]
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scons.py")
    if not (os.path.isfile(argv0) and os.access(argv0, os.X_OK)):
        sys.argv[0] = launcher
    stdin_sconstruct = _stdin_file()
    if stdin_sconstruct and SCons.Script.GetOption("file") == ["-"]:
        # (gpsimd-build: SCons read the SConstruct from its stdin, that
        # file; the regeneration gives it the file again)
        sys.argv[0:1] = [launcher, scons_launcher.STDIN_FLAG, stdin_sconstruct]
    asked = env.get("NINJA_DISABLE_AUTO_RUN")
    env["NINJA_DISABLE_AUTO_RUN"] = True        # ninja runs here, on our stdout
    env.Tool("ninja")
    ninja_file = env.get("NINJA_FILE")
    # not when generating only: --disable-execute-ninja, or
    # NINJA_DISABLE_AUTO_RUN=1 (how ninja's own regeneration of
    # build.ninja runs scons: a ninja inside it would wait for the outer one)
    generate_only = any(str(v).lower() in ("1", "true") for v in (
        asked, SCons.Script.ARGUMENTS.get("NINJA_DISABLE_AUTO_RUN"),
        SCons.Script.GetOption("disable_execute_ninja")))
    if ninja_file is not None and not generate_only:
        # (run under ``scons -n`` too, as ``ninja -n``: as the tool's own action)
        from SCons.Tool.ninja_tool.Overrides import AlwaysExecAction
        env.AddPostAction(ninja_file, AlwaysExecAction(_run_ninja, {}))
    elif ninja_file is not None:            # (it outlives a stop of the ninja run: ninjakeep)
        env.AddPostAction(ninja_file, SCons.Action.Action(
            lambda target, source, env: ninjakeep.keep(str(target[0]), str(env["NINJA_DIR"])),
            None))


def _stdin_file() -> Optional[str]:
    """The file this process's standard input is, when it is a regular
    file (Linux ``/proc``); else None."""
    try:
        path = os.readlink("/proc/self/fd/0")
        return path if os.path.isfile(path) else None
    except OSError:
        return None


def _run_ninja(target, source, env) -> int:
    """Run ninja on the ``build.ninja`` just written, as SCons's tool does
    (``-j`` of this run or ``NINJA_MAX_JOBS``, ``NINJA_CMD_ARGS`` or ``-n``
    under ``scons -n``, ``-k 0`` under ``scons -k``, the targets of the
    command line, the commands' environment, with ``EMU_SERVER=0`` as
    ``$GPSIMD_EMU_SERVER``) but with our stdout and
    stderr: ninja's own output. Ninja gets SIGTERM if this process dies
    (``kill -9`` of scons), and then stops its commands as on Ctrl-C;
    stop signals scons gets reach it, Ctrl-\\ as SIGTERM (``signals.call``).
    Returns its exit status (not 0: the build failed; ninja said why)."""
    from SCons.Tool import ninja_tool
    from SCons.Util import sanitize_shell_env
    jobs = env.get("NINJA_MAX_JOBS", env.GetOption("num_jobs"))
    args = ["-f", str(target[0]), f"-j{jobs}"]
    args += env.get("NINJA_CMD_ARGS", "-n" if env.GetOption("no_exec") else "").split()
    if env.GetOption("keep_going"):
        args += ["-k", "0"]
    args += [str(t) for t in ninja_tool.NINJA_CMDLINE_TARGETS]
    print("ninja " + " ".join(args), flush=True)
    sys.stderr.flush()
    # the emulator's share of the CPUs for this run's jobs (not in the
    # commands, where -j would change every command line; a plain `ninja`
    # run leaves it to the emulator's default)
    # (on this process's environment, as a `ninja` run by hand has it: the
    # tool exports into each command only the variables whose value
    # differs from this process's, so one equal here, such as a
    # PYTHONPATH that is already the build's, must reach ninja this way)
    run_env = dict(os.environ)
    run_env.update(sanitize_shell_env(env["ENV"]))
    run_env[JOBS_ENV] = str(jobs)
    if not env.get("EMU_SERVER", True):     # (gpsimd_emu.client: the test steps' server)
        run_env[SERVER_ENV] = "0"
    return signals.call([ninja_tool.NINJA_STATE.ninja_bin_path] + args, env=run_env,
                        preexec_fn=tied_to_me(signal.SIGTERM))


def drop_jobs(env) -> None:
    """Leave ``-j`` out of the ninja commands' environment: SCons's tool
    exports the commands' environment into every command line, so a
    ``GPSIMD_EMU_JOBS`` there would make another ``-j`` rebuild
    everything. :func:`_run_ninja` gives it to ninja's environment."""
    env["ENV"].pop(JOBS_ENV, None)

def active(env) -> bool:
    """Is SCons generating a ninja file (``--experimental=ninja``)?"""
    return bool(env.get("GENERATING_NINJA"))


def setup(env) -> None:
    """Register the compile rule (depfile, ``deps = gcc``) and the rule of
    other commands in ``env``, the environment the ninja tool was loaded
    into, each behind the build folder's lock (:func:`_guard`)."""
    _rules(env, "")
    env.NinjaRule("GENERATED_CMD", _guarded(env, "( $cmd )"), description="Building $out",
                  pool="local_pool")


def _guard(env) -> str:
    """What every step of the ninja file but the summary's print edge
    (:func:`summary`) does first: make sure that this ninja run holds the
    build folder's lock, or stop (the ``lock`` step,
    ``gpsimd_build.buildlock.hold_for_ninja``, which marks that the run
    holds it: the mark, :func:`_this_run`, is looked for with the shell's
    builtins, so that a null build starts no Python). Leaves the mark's
    path in ``$m``. Ninja's escapes not yet made."""
    ninja_dir = str(env["NINJA_DIR"])
    build_dir = os.path.dirname(ninja_dir) or "."
    step = env.subst("$GPSIMD_STEP")
    return (f"{{ {_this_run(env)}; [ -e \"$m\" ] || {step} lock {shlex.quote(build_dir)} "
            f"{shlex.quote(ninja_dir)} $PPID; }} && ")


def _this_run(env) -> str:
    """Shell builtins that set ``$m`` to the path of this ninja run's mark
    (``gpsimd_build.buildlock.MARK_PREFIX``: ninja's pid, ``$PPID``, and
    start time, field 22 of its ``/proc`` stat), made by the run's first
    step that does any work as it takes the lock: how the run's steps know
    the lock is theirs, and the run's start (older results are not this
    run's; a second run, which stops, never makes its own). Ninja's
    escapes not yet made."""
    mark = shlex.quote(os.path.join(str(env["NINJA_DIR"]), buildlock.MARK_PREFIX))
    return f"read -r s 2>/dev/null </proc/$PPID/stat; set -- $s; m={mark}$PPID.${{22}}"


def _guarded(env, command: str, rest: str = "") -> str:
    """A rule's command: the exports (``$env``), :func:`_guard`, then
    ``command`` and ``rest`` (ninja-escaped), which run only when it passes."""
    return "$env" + _guard(env).replace("$", "$$") + "{ " + command + rest + "; }"


def _rules(env, on_fail: str) -> None:
    """The compile rule, its command followed by ``on_fail``."""
    from SCons.Tool.ninja_tool.Globals import NINJA_RULES
    # (the command in a subshell: an `exit` in it still reaches on_fail;
    # $env, the exports, before it: on_fail needs them too)
    env.NinjaRule("GPSIMD_CXX", _guarded(env, "( $cmd )", on_fail),
                  description="CXX $out", deps="gcc", use_depfile=True)
    env[NINJA_RULES]["GPSIMD_CXX"]["depfile"] = "$depfile"


def map_compiles(env) -> None:
    """Map ``env``'s compiles to the compile rule, its depfile the
    profile's (``$GPSIMD_DEPFILES``). (An action that is one ``$VARIABLE``
    reaches the ninja tool as the variable's value, so the mapping is by
    value, as the tool's own mappings of ``$CXXCOM`` are.)"""
    for key in ("$GPSIMD_CXXCOM", "${GPSIMD_CXXCOM}", env.get("GPSIMD_CXXCOM")):
        if isinstance(key, str):
            env.NinjaRuleMapping(key, _compile_provider)


def regenerate_on(env, paths: Iterable[str]) -> None:
    """``build.ninja`` is regenerated when any of ``paths`` changes (besides
    the SConscripts)."""
    scripts = [str(s) for s in SCons.Node.SConscriptNodes]
    env["NINJA_REGENERATE_DEPS"] = sorted(set(scripts) | {p for p in paths if p})


def record_failures(env) -> None:
    """A ninja build's test step records a failure and exits 0
    (``gpsimd_emu run --record-failures``), so that ninja, with or without
    ``-k``, still runs the summary step, which reports it and fails (like
    the SCons path's, the step removes the summary and the report as it
    starts: ``GPSIMD_TESTCOM``)."""
    env["GPSIMD_TEST_NINJA_ARGS"] = ["--record-failures", "${TARGET.base}.error.txt"]


def inputs_spec(record, programs: Iterable[Any]) -> str:
    """The text of the inputs spec (``gpsimd_build.ninjarecord``): for each
    entry of ``record.roots`` (name -> ``(key, root nodes)``, the inputs
    record's) every step below its roots with the files no step makes that
    it reads (its sources and explicit dependencies; the headers come from
    ninja's deps log), leaving out ``programs`` (the compilers) and the
    files the record leaves out (``record.recorded_path``: outside the
    project and its allowed folders); and the allowed folders outside the
    project, for the headers of the deps log."""
    skip = {id(n) for n in programs}
    out = {}
    for name, (key, nodes) in record.roots.items():
        steps = {step.path: [p for p in (record.recorded_path(c) for c in reads
                                         if isinstance(c, SCons.Node.FS.Base) and id(c) not in skip)
                             if p is not None]
                 for step, reads in _steps_below(nodes).items()}
        out[name] = (key, [n.path for n in nodes], steps)
    return ninjarecord.spec_text(out, [os.path.relpath(a) for a in record.allowed])


def _steps_below(nodes) -> Dict[Any, List[Any]]:
    """Every step (a node with a builder) at or below ``nodes``, through
    sources and explicit dependencies, with the files no step makes that it
    reads directly (headers, implicit dependencies, are not followed: ninja
    finds them by depfiles). The one walk of both :func:`inputs_spec` and
    :func:`made_from`."""
    steps: Dict[Any, List[Any]] = {}
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if node in steps or not node.has_builder():
            continue
        reads = steps[node] = []
        for child in list(node.sources) + list(node.depends):
            # (an alias, a phony in the ninja file, is read as it is)
            step = child.has_builder() and not isinstance(child, SCons.Node.Alias.Alias)
            (todo if step else reads).append(child)
    return steps


#: The summary step's arguments, one a line (``@`` file), in the profile's folder.
SUMMARY_ARGS = "summary-args.txt"


def summary(env, graph, results: List[Any], profile_dir: str, libraries: int,
            multicore: Iterable[str] = (), spec: Any = None) -> List[Any]:
    """The summary step (``test-summary.txt`` and ``report.html`` from every
    results file; ``multicore``: the multicore libraries' names; its
    arguments in ``SUMMARY_ARGS``, written now), the edge that prints it
    on every run (its output is never made; a summary older than the
    run's start, :func:`_this_run`, or any in a run that did nothing, is
    printed with its results marked as not run in this build). ``spec``:
    the inputs spec's node (:func:`inputs_spec`), from which the summary
    step also writes the inputs record. Every other step runs the summary
    step when it fails (:func:`failure_rules`). Returns the nodes to build
    by default."""
    outputs = [f"{profile_dir}/{states.SUMMARY_FILE}", f"{profile_dir}/{states.REPORT_FILE}"]
    args = ["-o", outputs[0], "--all", str(libraries), "--report", outputs[1]]
    args += [a for name in multicore for a in ("--multicore", name)]
    if spec is not None:
        args += ["--inputs", spec.path, "--ninja-dir", env["NINJA_DIR"]]
    args_file = graph.text(f"{profile_dir}/{SUMMARY_ARGS}",
                           "".join(f"{a}\n" for a in args + [str(r) for r in results]))
    text = graph.step(env.GpsimdSummary(outputs, results, GPSIMD_SUMMARY_ARGS=args_file)[:1])
    env.Depends(text, [args_file] + ([spec] if spec is not None else []))
    # (the print rule's choice when the summary is an earlier run's)
    env["GPSIMD_SUMMARY_PRINTCOM"] = f"sed -E {states.as_kept_sed()} $SOURCE"
    printed = env.GpsimdSummaryPrint(f"{profile_dir}/.summary-printed", text)
    # (their own rules, without the failure branch; the edge that prints,
    # run on every run, a null one too, without the lock either: it writes
    # nothing another build reads; an action that is one $VARIABLE reaches
    # the ninja tool as the variable's value)
    for name, provider in (("GPSIMD_SUMMARYCOM", _summary_provider),
                           ("GPSIMD_SUMMARY_PRINTCOM", _every_run_provider)):
        for key in ("$" + name, "${" + name + "}", env[name]):
            env.NinjaRuleMapping(key, provider)
    return text + printed


#: Made (touched) by a step's failure branch: a step of this run failed
#: when it is newer than the run's start (its mark, :func:`_this_run`).
RUN_FAILED = ".run-failed"


def failure_rules(env, step: str, profile_dir: str) -> None:
    """Every step of the ninja file but the summary's own two (compiles,
    links, packs, test steps, ...) marks the run as failed
    (:data:`RUN_FAILED`) and runs the summary step (``step``: the command
    of ``gpsimd_build.steps``) with ``--after-failure`` when it fails, then
    fails: a run that a failed step stops still prints the summary and
    leaves ``test-summary.txt``, the report and the inputs record true for
    what it built (the libraries it did not get to test again are stale),
    as the SCons path's summary at exit does. Under ``-k``, a test step
    that ends after a failure of its run writes them again (``--quiet``;
    one at a time, coalesced), so that they hold every result when ninja
    stops. ``env``: the environment the ninja tool was loaded into. (The
    tool's rule for commands, ``GENERATED_CMD``, is replaced through
    ``env.NinjaRule``, which the tool merges over its own; test steps get a
    rule of their own, mapped by :func:`map_tests`.)"""
    quote = shlex.quote
    summary = (f"{step} summary @{quote(f'{profile_dir}/{SUMMARY_ARGS}')} --since \"$m\" "
               "--after-failure")
    failed = quote(f"{profile_dir}/{RUN_FAILED}")
    on_fail = (" || { touch " + failed + "; " + summary + "; exit 1; }").replace("$", "$$")
    _rules(env, on_fail)
    env.NinjaRule("GENERATED_CMD", _guarded(env, "( $cmd )", on_fail),
                  description="Building $out", pool="local_pool")
    after = (f"; if [ {failed} -nt \"$m\" ]; then {summary} --quiet; fi").replace("$", "$$")
    env.NinjaRule("GPSIMD_TEST", _guarded(env, "( $cmd )", on_fail + after),
                  description="Building $out", pool="local_pool")
    env.NinjaRule("GPSIMD_SUMMARY", _guarded(env, '$cmd --since "$$m"'),
                  description="Building $out", pool="local_pool")
    # (the summary as this run wrote it, or, when it is an earlier run's or
    # this run did nothing, $cmd: with its results marked as not run in
    # this build)
    printing = (_this_run(env) + '; if [ -e "$m" ] && [ ! "$m" -nt ').replace("$", "$$")
    env.NinjaRule("GPSIMD_EVERY_RUN", f"$env{{ {printing}$in ]; then cat $in; else $cmd; fi; }}",
                  description="Building $out", pool="local_pool")


def map_tests(env) -> None:
    """Map ``env``'s test steps to their rule (:func:`failure_rules`)."""
    for key in ("$GPSIMD_TESTCOM", "${GPSIMD_TESTCOM}", env.get("GPSIMD_TESTCOM")):
        if isinstance(key, str):
            env.NinjaRuleMapping(key, _test_provider)


def _provider(rule: str, depfile: bool = False):
    """A rule mapping: SCons's generic command on the ninja rule ``rule``
    (compiles: ``GPSIMD_CXX``, with their depfile and, when they probe for
    headers, the folders their search reaches: ``probes.search_folders``;
    test steps: ``GPSIMD_TEST``; the summary's two edges: ``GPSIMD_SUMMARY``,
    without the failure branch)."""
    def provide(env, node, action, targets, sources, executor=None):
        _, variables, deps = env.NinjaGetGenericShellCommand(node, action, targets, sources,
                                                             executor=executor)
        if depfile:
            variables["depfile"] = env["GPSIMD_DEPFILES"].depfile_of(str(targets[0]))
            deps = list(deps) + probes.search_folders(targets[0], env["GPSIMD_DEPFILES"])
        return rule, variables, deps
    return provide


_compile_provider = _provider("GPSIMD_CXX", depfile=True)
_test_provider, _summary_provider = _provider("GPSIMD_TEST"), _provider("GPSIMD_SUMMARY")
_every_run_provider = _provider("GPSIMD_EVERY_RUN")


def verdict(env, lib_dir: str, name: str, results: List[Any]) -> List[Any]:
    """The edge that gives ``ninja <lib>``, ``ninja test-<lib>`` and
    ``ninja test`` the library's verdict: the test step records a failure
    and exits 0 (:func:`record_failures`), and these targets do not reach
    the summary step, so this edge (its output is never made: it runs on
    every such run) fails when the library's passing results file is
    missing, and its failure branch (:func:`failure_rules`) then prints
    and writes the summary. Returns its node."""
    return env.Command(f"{lib_dir}/.verdict", results,
                       f"test -f $SOURCE || {{ echo 'gpsimd: {name}: a vector failed, or its "
                       f"test run ended without results (above)' >&2; false; }}")


def made_from(nodes) -> List[Any]:
    """The files no step makes that ``nodes`` are made from: their sources
    and explicit dependencies, and theirs, down to the files without a
    builder (kernel sources, test plans, references, the model, the
    programs the commands run), each once, sorted. (Headers are implicit
    dependencies, found by scanning or by ninja's depfiles: not among
    them.)"""
    return sorted({c for reads in _steps_below(nodes).values() for c in reads}, key=str)


def prestart(env, graph, lib_dir: str, results: List[Any]) -> Any:
    """A library's prestart step (``gpsimd_emu.client.prestart_step``,
    ``<lib_dir>/.emu-prestart``): it starts the ninja run's emulator
    server loading the model as the run begins, so that the library's
    test step (``results``, which needs it order-only) is served. Its
    inputs are the files no step makes that the test is made from
    (:func:`made_from`), so it runs, beside the compiles, exactly when
    that test is to run again and is among the targets, and not in a null
    build. Returns its node."""
    node = graph.uses(env.GpsimdPrestart(f"{lib_dir}/.emu-prestart", made_from(results)),
                      "$PYTHON")
    env.Requires(results, node)
    return node


def build_library_files() -> List[str]:
    """The build library's own Python files (with the tool's) and the
    device facts', in a checkout or installed, and the runtime's source
    folder (a new runtime source changes the graph). A runtime outside the
    project is mirrored into the build folder when the graph is read
    (``gpsimd_build.profiles.host``): then each of its headers and sources
    too, so that an edited one is mirrored again."""
    from gpsimd_build import layout
    here = os.path.dirname(os.path.abspath(__file__))
    runtime = layout.runtime_dir()
    tops = [(layout.PACKAGE_DIR, (".py",)), (here, (".py",)), (layout.device_dir(), (".py",))]
    if os.path.relpath(runtime).startswith(".."):
        tops += [(os.path.join(runtime, "include"), (".h", ".hpp")),
                 (os.path.join(runtime, "src"), (".cpp", ".h"))]
    out = []
    for top, suffixes in tops:
        for folder, _, files in os.walk(top):
            out += [os.path.join(folder, f) for f in files if f.endswith(suffixes)]
    out += [os.path.join(os.path.dirname(here), "gpsimd.py"), os.path.join(runtime, "src")]
    return [os.path.relpath(p) if not os.path.relpath(p).startswith("..") else p
            for p in sorted(set(out))]
