"""``env.GpsimdCollection``: the graph of a whole op collection.

Checks and locks the build folder, loads the manifest
(``gpsimd_build.manifest``), picks the target profile plug-in
(``gpsimd_build.profiles``) and sets up its environment (signals, the
emulator server, the decider, the ninja path), lets the profile build what
every library shares, then wires each library through the same stages
(``library_nodes``: wrapper, one compile per translation unit, one link per
linker spec, packing, version metadata, and where the profile runs tests,
the stack report, the test plan and the test node), adds the
collection's own targets (``collection_targets``), and at exit saves the
records and prints the summary. The graph code never asks which profile
it holds.
"""

import atexit
import os
import sys
from typing import Any, Dict, List

import SCons.Node.FS
import SCons.Script

from gpsimd_build import buildfolder, buildnames, buildlock as lock, layout, project_record
from gpsimd_build.manifest.model import ManifestError
from gpsimd_build.profiles import ProfileError, Shared, get_profile

from . import (collector, depfiles, emu_server, integrity, manifest_cache,
               ninja_path as ninja, options, signals, sconsign as sconsign_db)
from .builders import zygote_node
from .collection_targets import add_targets
from .inputs_record import InputsRecord
from .library_nodes import Libraries
from .progress import Progress, Timer
from .sconsgraph import SConsGraph
from .summary import Summary
from .targets import selected_libraries

__all__ = ["GpsimdCollection"]

#: The folders our own steps import from (the build library, the device
#: model and facts; a checkout's or an installed copy's): PYTHONPATH of every
#: action.
_PYTHONPATH = os.pathsep.join(layout.python_roots())
#: The alias of the emulator's code and the facts it reads
#: (``layout.emulator_python_files``): every test node depends on it.
EMU_SOURCES_ALIAS = buildnames.EMU_SOURCES_ALIAS


def _outputs(folder) -> List[Any]:
    """Every File node with a builder below the SCons Dir node ``folder``."""
    out, todo = [], [folder]
    while todo:
        d = todo.pop()
        for name, entry in sorted(d.entries.items()):
            if name in (".", ".."):
                continue
            if isinstance(entry, SCons.Node.FS.Dir):
                todo.append(entry)
            elif entry.has_builder():
                out.append(entry)
    return out


def _building() -> bool:
    """False for -h, -n, -q and -c (nothing is built: no lock, no checks)."""
    get = SCons.Script.GetOption
    return not (get("help") or get("no_exec") or get("question") or get("clean"))


def _check_folder(build_dir: str) -> None:
    """Stop (exit status 2) when the build folder, or what is in it, is not
    safe to build in (``gpsimd_build.buildfolder``)."""
    try:
        buildfolder.check(build_dir, remember=_building())    # (-n, -q, -h, -c: no record)
    except buildfolder.UnsafeBuildFolder as err:
        _stop(f"scons: {err}")


def _stop(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    SCons.Script.Exit(2)


def GpsimdCollection(env, manifest=None, build_dir=None, toolchain=None,
                     wait_for_lock=None, sconsign=True,
                     known_arguments=()) -> Dict[str, Dict[str, List]]:
    """Load ``manifest`` and add every library's nodes to the graph.

    ``manifest``, ``build_dir``, ``toolchain`` and ``wait_for_lock``
    default to the command line's options (``MANIFEST``, ``BUILD_DIR``,
    ``TOOLCHAIN``, ``BUILD_LOCK``: ``gpsimd_tool.options``); a command-line
    argument that no option reads stops SCons with exit status 2 unless
    ``known_arguments`` names it (an SConstruct's own variables).

    ``toolchain`` names the target profile: ``host`` (build, then run every
    vector on the emulator) or ``xtensa`` (the vendor driver's commands;
    nothing runs). Outputs go under ``<build_dir>/<toolchain>/``. Returns
    ``{library name: {"wrapper", "objects", "linked", "loadable", "versions",
    "results"}}``, lists of nodes. A manifest with errors prints each as
    ``FILE:LINE:COL: path: message`` and stops SCons with exit status 2
    before anything is built; so does a profile whose programs are missing.

    One build per ``build_dir`` at a time: a second one waits for the first
    (``wait_for_lock`` False: stops with exit status 2). SCons's own record
    of the build (``SConsignFile``) is kept in ``build_dir`` too, so that
    builds in different folders are independent (``sconsign`` False: the
    SConstruct's choice stands). Before anything is
    built, every output whose bytes are not those the last completed build
    recorded is deleted, so it is rebuilt (``gpsimd_tool.integrity``). When
    the build ends, the truth about the results it was asked for is printed
    (``gpsimd_tool.summary``).
    """
    # (the graph's objects all stay alive: made with the collector off, then
    # frozen, so that the build's own collections never rescan them)
    strange = options.unknown(env, known_arguments)
    if strange:
        _stop("scons: unknown option(s): " + ", ".join(strange) + " (see `scons -h`)")
    manifest = env.get("MANIFEST", "ops.yaml") if manifest is None else manifest
    build_dir = env.get("BUILD_DIR", "build") if build_dir is None else build_dir
    toolchain = env.get("TOOLCHAIN", "host") if toolchain is None else toolchain
    if wait_for_lock is None:
        wait_for_lock = env.get("BUILD_LOCK", "wait") == "wait"
    with collector.paused(freeze=True):
        return _collection(env, manifest, build_dir, toolchain, wait_for_lock, sconsign)


def _collection(env, manifest, build_dir, toolchain, wait_for_lock, sconsign):
    """:func:`GpsimdCollection`'s work."""
    timer = Timer()
    # BUILD_DIR as SCons reads it ('#out' is the project's out/), relative to
    # the project when inside it, else absolute
    build_dir = env.Dir(build_dir).path
    top = env.Dir("#").get_abspath()
    real, real_top = os.path.realpath(os.path.join(top, build_dir)), os.path.realpath(top)
    if real_top == real or real_top.startswith(real.rstrip(os.sep) + os.sep):
        _stop(f"scons: BUILD_DIR={build_dir} holds the project's folder {top}: give the "
              f"build a folder of its own (the default is build)")
    # checked whole before anything is read from it (the manifest cache lies
    # in it; nothing is read from a folder that was not there when checked)
    # and, when missing, made by this build before anything is written to it
    # and checked again (gpsimd_build.buildfolder)
    get = SCons.Script.GetOption
    present = os.path.isdir(build_dir)
    _check_folder(build_dir)
    if ninja.wanted() and not env.get("GENERATING_NINJA"):
        # `scons --experimental=ninja`: the ninja fast path, its files in
        # the build folder (known only here)
        ninja.load_tool(env, build_dir)
    allow = env.get("ALLOW_PATHS", "")
    collection = manifest_cache.load(build_dir, manifest, ".", [allow]) if present else None
    cached = collection is not None
    if not cached:
        from gpsimd_build.manifest import load_manifest
        try:
            collection = load_manifest(manifest, allow_paths=allow)
        except ManifestError as err:
            _stop(str(err))
    timer.lap("manifest " + ("from the cache" if cached else "loaded and validated"))
    try:
        profile = get_profile(toolchain, os.environ, env.subst("$CXX") or "g++")
    except ProfileError as err:
        _stop(f"scons: {err}")
    missing = profile.missing_program(lambda p: env.WhereIs(p, path=os.environ.get("PATH", "")))
    building = _building()
    if missing and (building or not SCons.Script.GetOption("help")):
        _stop(f"scons: {missing}")   # (`scons -h` still shows the help)
    if not (present or get("help") or get("clean")):
        try:
            buildfolder.make(build_dir)
        except OSError as err:
            _stop(f"scons: cannot make {build_dir}: {err.strerror} (errno {err.errno})")
        _check_folder(build_dir)    # (made by this build, or by another user in between)
    # `scons -c` removes what a build of the folder reads and writes: it
    # waits for that build as another build does (when there is a folder)
    cleaning = bool(get("clean")) and present
    if building or cleaning:
        try:
            lock.acquire(build_dir, wait=wait_for_lock)
        except lock.LockBusy as err:
            _stop(f"scons: {err} (BUILD_LOCK=wait waits for it)")
        except lock.UnsafeLock as err:
            _stop(f"scons: {err}")
        except OSError as err:
            _stop(f"scons: cannot lock {build_dir}: {err.strerror} (errno {err.errno})")
    if sconsign and (building or present):
        # (written whole, or the build stops saying so: sconsign.py)
        env.SConsignFile(os.path.join(build_dir, ".sconsign"), sconsign_db)
    if building and not cached:
        manifest_cache.store(build_dir, collection, manifest, ".", [allow])
    if building:    # (where the project is, for front ends run elsewhere)
        try:
            project_record.write(build_dir, top, manifest)
        except OSError as err:
            _stop(f"scons: cannot write {build_dir}/{project_record.RECORD_NAME}: "
                  f"{err.strerror} (errno {err.errno})")
    to_ninja = ninja.active(env)
    if to_ninja:
        ninja.setup(env)
    top_env = env

    env = env.Clone()
    # the programs a command runs are explicit dependencies (SConsGraph.uses)
    env["IMPLICIT_COMMAND_DEPENDENCIES"] = False
    server = bool(env.get("EMU_SERVER", True)) and not to_ninja
    signals.install(env, server=server)
    if server:
        emu_server.configure(env.subst("$PYTHON"))
    # built files are compared by their recorded signatures (integrity.py),
    # sources by content (FAST: timestamp first). By content on every
    # build: SCons's default (--max-drift, two days) takes a source's stored
    # content signature, without reading it, when its time is what was
    # recorded and more than two days old, so a file replaced by another of
    # the same time (`tar x` of an archive made with fixed times, a zip's,
    # `cp -p`, `rsync -a`) would keep the results of the old one
    SCons.Script.SetOption("max_drift", -1)
    env.Decider(integrity.decider(bool(env.get("FAST"))))
    env["ENV"]["PATH"] = os.environ.get("PATH", env["ENV"].get("PATH", ""))
    # (the build's own folders first, then the user's: a reference's
    # module:function may come from PYTHONPATH, as docs/manifest.md says)
    env["ENV"]["PYTHONPATH"] = os.pathsep.join(
        [_PYTHONPATH] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    launcher = env.get("CXX_LAUNCHER") or ""
    try:
        env.Replace(**profile.construction_vars(env.Dir("#").abspath, env.Dir(build_dir).path,
                                                launcher,
                                                env.get("LINKER") or "auto"))
    except ProfileError as err:
        _stop(f"scons: {err}")
    env["GPSIMD_LAUNCHER"] = launcher
    # every file a compile read, from its depfile (read by ninja on its path)
    env[depfiles.VARIABLE] = depfiles.Depfiles(env, profile.depfile, top, build_dir,
                                               scan=not to_ninja)
    env["GPSIMD_BUILD_DIR"] = env.Dir(build_dir)      # (a node: quoted in commands)
    if to_ninja:
        ninja.map_compiles(env)
        ninja.map_tests(env)
        ninja.drop_jobs(env)
        ninja.record_failures(env)
    progress = None
    if not to_ninja:   # (ninja prints its own [done/total])
        progress = Progress(env.Dir("#").abspath, quiet=bool(env.get("QUIET")))
        progress.install(env)
    graph = SConsGraph(env, write=not (SCons.Script.GetOption("help")
                                       or SCons.Script.GetOption("clean")), progress=progress)
    profile_dir = f"{build_dir}/{profile.name}"
    shared: Shared = profile.shared(graph, profile_dir)
    # (one alias, a ninja phony, that every test and explore depends on:
    # not the ~50 files on each of them, which made a 5,000-op ninja file
    # a quarter larger and every null build check each file 1,500 times)
    emu_sources = env.Alias(EMU_SOURCES_ALIAS,
                            [env.File(f) for f in layout.emulator_python_files()])
    program = zygote_node(env, graph, profile_dir, shared.include) if profile.runs_tests else None
    inputs = InputsRecord(profile_dir, graph.programs, allowed=(
        os.path.normpath(os.path.join(env.Dir("#").abspath, r.value))
        for r in collection.reads if r.kind == "allow"))
    if program is not None:
        inputs.add_zygote(program)
    libs = Libraries(env, graph, profile, shared, profile_dir, program, emu_sources, inputs,
                     to_ninja, artifacts=list(shared.all()))
    # a command line that names libraries builds the graph of those only
    libraries = selected_libraries(collection.libraries, profile_dir,
                                   SCons.Script.COMMAND_LINE_TARGETS)
    for lib in libraries:
        libs.add(lib)
    add_targets(top_env, libs, collection, libraries, build_dir)
    timer.lap(f"graph of {len(libraries)} libraries")
    _refuse_ignored_errors(libs, building, to_ninja)
    if not to_ninja and building:
        record = integrity.OutputRecord(build_dir)
        outputs = _outputs(env.Dir(profile_dir))
        removed = record.verify_outputs(outputs)
        timer.lap(f"outputs checked against the record ({len(outputs)})")
        if removed:
            sys.stderr.write(f"scons: {len(removed)} output(s) under {profile_dir} are not what the "
                             "last completed build recorded (an interrupted build?); rebuilding "
                             "them\n")
        integrity.CURRENT = record
        atexit.register(timer.timed(record.save, "record of outputs written"))
        atexit.register(timer.timed(inputs.save, "record of inputs written"))
        if libs.tests:
            atexit.register(Summary(
                libs.tests, profile_dir, len(collection.libraries),
                collection=[(lib.name, lib.multicore) for lib in collection.libraries],
                checks="--no-checks" not in env.get("GPSIMD_EMU_FLAGS", []),
                explore_nodes=libs.explore_by_lib).at_exit)
    return libs.nodes


def _refuse_ignored_errors(libs, building: bool, to_ninja: bool) -> None:
    """Stop a build run with ``-i`` (``--ignore-errors``) that would run
    tests or explores, on either path: SCons then takes a failed test (or
    a failed ninja run) for a built one and exits 0 whatever failed,
    which would make every failure a pass to whoever reads the exit
    status. ``-k`` builds and tests all it can and still fails."""
    if not (building and SCons.Script.GetOption("ignore_errors")):
        return
    # (what the command line asks for; on the ninja path BUILD_TARGETS and
    # the defaults are the ninja file, whose run builds the command line's
    # targets, by default everything)
    targets = [str(t) for t in (SCons.Script.COMMAND_LINE_TARGETS
                                or (["all"] if to_ninja else SCons.Script.BUILD_TARGETS))]
    summary = Summary(libs.tests, "", explore_nodes=libs.explore_by_lib)
    if summary.wanted(targets) or summary.explored(targets):
        _stop("scons: -i (--ignore-errors) is refused for a build that runs tests: SCons would "
              "exit 0 with failed vectors; use -k (--keep-going), which builds and tests "
              "everything it can and still fails")
