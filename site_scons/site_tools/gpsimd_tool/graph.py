"""``env.GpsimdCollection``: the graph of a whole op collection.

Loads the manifest (``gpsimd_build.manifest``), picks the target profile
plug-in (``gpsimd_build.profiles``), lets it build what every library shares,
then wires each library through the same stages (ARCHITECTURE.md): wrapper, one compile per translation unit, one link per
linker spec, packing, version metadata, and where the profile runs tests,
call graphs, the stack report, the test plan and the test node. The graph
code never asks which profile it holds.
"""

import atexit
import json
import os
import sys
from typing import Any, Dict, List

import SCons.Node.FS
import SCons.Script

from gpsimd_build import buildfolder, codegen, layout, ninjarecord, project_record, testplan
from gpsimd_build.manifest.model import ManifestError
from gpsimd_build.profiles import ProfileError, Shared, get_profile, linked_names, linker_specs
from gpsimd_device.versions import versions_json

from . import (collector, emu_server, integrity, lock, manifest_cache, ninja_path as ninja,
               options, signals)
from .builders import zygote_node
from .inputs_record import InputsRecord
from .progress import Progress, Timer
from .sconsgraph import SConsGraph
from .targets import help_text, selected_libraries
from .shapes_graph import schemas_text, shape_nodes
from .summary import LibraryTests, Summary

__all__ = ["GpsimdCollection"]

#: The folders our own steps import from (the build library, the device
#: model and facts; a checkout's or an installed copy's): PYTHONPATH of every
#: action.
_PYTHONPATH = os.pathsep.join(layout.python_roots())
#: The emulator's code and the facts it reads: a test node depends on them.
_EMU_SOURCES = [layout.emulator_dir(), layout.device_dir()]


def _source_stem(src: str) -> str:
    """A source's path below the top without its suffix, '..' made safe."""
    rel = os.path.normpath(src).replace(os.sep, "/")
    parts = ["__" if p == ".." else p for p in rel.split("/")]
    return os.path.splitext("/".join(parts))[0]


def _wrapper_text(lib, dialect) -> str:
    """The library's wrapper.cpp (the Neuron SDK's build driver, build_custom_op.py)."""
    return codegen.emit_wrapper([codegen.WrapperOp(
        function=op.function, arg_types=tuple(a.type for a in op.schema.arguments),
        return_types=tuple(r.type for r in op.schema.returns), stack_size=op.stack_size)
        for op in lib.ops], dialect)


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


def _check_folder(build_dir: str, inside: bool = True) -> None:
    """Stop (exit status 2) when the build folder is not safe to build in
    (``gpsimd_build.buildfolder``; ``inside``: what is in it too)."""
    try:
        buildfolder.check(build_dir, inside)
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
    # before anything is read from it or written to it (what is read, the
    # manifest cache, lies in the folder itself), and again, whole, once held
    _check_folder(build_dir, inside=False)
    if ninja.wanted() and not env.get("GENERATING_NINJA"):
        # `scons --experimental=ninja`: the ninja fast path, its files in
        # the build folder (known only here)
        ninja.load_tool(env, build_dir)
    allow = env.get("ALLOW_PATHS", "")
    collection = manifest_cache.load(build_dir, manifest, ".", [allow])
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
    if building:
        try:
            lock.acquire(build_dir, wait=wait_for_lock)
        except lock.LockBusy as err:
            _stop(f"scons: {err} (BUILD_LOCK=wait waits for it)")
        except lock.UnsafeLock as err:
            _stop(f"scons: {err}")
        except OSError as err:
            _stop(f"scons: cannot lock {build_dir}: {err.strerror} (errno {err.errno})")
        _check_folder(build_dir)    # (again, now that it exists: made by us, not another)
    if sconsign and (building or os.path.isdir(build_dir)):
        env.SConsignFile(os.path.join(build_dir, ".sconsign"))
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
    # sources by content (FAST: timestamp first)
    env.Decider(integrity.decider(bool(env.get("FAST"))))
    env["ENV"]["PATH"] = os.environ.get("PATH", env["ENV"].get("PATH", ""))
    env["ENV"]["PYTHONPATH"] = _PYTHONPATH
    launcher = env.get("CXX_LAUNCHER") or ""
    try:
        env.Replace(**profile.construction_vars(env.Dir("#").abspath, env.Dir(build_dir).path,
                                                launcher,
                                                env.get("LINKER") or "auto"))
    except ProfileError as err:
        _stop(f"scons: {err}")
    env["GPSIMD_LAUNCHER"] = launcher
    env["GPSIMD_BUILD_DIR"] = env.Dir(build_dir)      # (a node: quoted in commands)
    if to_ninja:
        ninja.map_compiles(env)
        ninja.drop_jobs(env)
        ninja.record_failures(env, f"{build_dir}/{profile.name}")
    progress = None
    if not to_ninja:   # (ninja prints its own [done/total])
        progress = Progress(env.Dir("#").abspath, quiet=bool(env.get("QUIET")))
        progress.install(env)
    graph = SConsGraph(env, write=not (SCons.Script.GetOption("help")
                                       or SCons.Script.GetOption("clean")), progress=progress)
    profile_dir = f"{build_dir}/{profile.name}"
    shared: Shared = profile.shared(graph, profile_dir)
    artifacts: List[Any] = list(shared.all())
    scan_base = [env.Dir(shared.include)] if shared.include else []
    emu_sources = sorted((f for d in _EMU_SOURCES for f in env.Dir(d).glob("*.py")), key=str)
    program = zygote_node(env, graph, profile_dir, shared.include) if profile.runs_tests else None

    nodes = {}
    inputs = InputsRecord(profile_dir, graph.programs)
    if program is not None:
        inputs.add_zygote(program)
    all_results, all_loadable, all_versions, all_stack = [], [], [], []
    all_explore: List[Any] = []
    all_schemas: List[Any] = []
    tests: List[LibraryTests] = []
    # a command line that names libraries builds the graph of those only
    libraries = selected_libraries(collection.libraries, profile_dir,
                                   SCons.Script.COMMAND_LINE_TARGETS)
    for lib in libraries:
        lib_dir = f"{profile_dir}/{lib.name}"
        compile_vars = dict(profile.compile_vars(shared, lib.includes, lib.cflags),
                            CPPPATH=scan_base + [env.Dir(d) for d in lib.includes])
        wrapper = [graph.text(f"{lib_dir}/wrapper.cpp", _wrapper_text(lib, profile.dialect))]
        sources = [(src, _source_stem(src)) for src in lib.sources] + [(wrapper[0], "wrapper")]
        objects, callgraphs = [], []
        for src, stem in sources:
            obj, ci = profile.compile_unit(graph, f"{lib_dir}/obj/{stem}.o", src, compile_vars)
            for extra in profile.object_side_effects(obj.path):
                env.SideEffect(extra, obj)
                env.Clean(obj, extra)
            objects.append(obj)
            if ci is not None:
                callgraphs.append(ci)
        members = []
        for spec, name in zip(linker_specs(lib.multicore), linked_names(lib.name, lib.multicore)):
            so = profile.link(graph, f"{lib_dir}/{name}.so", objects, spec, shared)
            members.append((f"{lib_dir}/{name}", so, spec))
        linked = [so for _, so, _ in members]
        if "-g" in lib.cflags:
            # the Neuron SDK's build driver, build_custom_op.py: the user's -g skips the pack step
            loadable = list(linked)
        else:
            loadable = profile.package(graph, members, lib.name)
        cores = [(spec.core, spec.name, obj.path) for (_, _, spec), obj in zip(members, loadable)]
        # the Neuron SDK's build driver, build_custom_op.py: the version metadata, with every library.
        versions = [graph.text(f"{lib_dir}/versions.json", versions_json(lib.name, profile.name))]
        all_loadable += loadable
        all_versions += versions
        results = []
        if profile.runs_tests:
            # the static stack report, from the call graphs of every TU
            ops = [a for op in lib.ops for a in ("--op", (
                op.name if op.function == op.name else f"{op.name}:{op.function}")
                + f"={op.stack_size}")]
            all_stack += graph.uses(env.GpsimdStackReport(
                f"{lib_dir}/stack-report.txt", callgraphs + shared.callgraphs,
                GPSIMD_LIBRARY=lib.name, GPSIMD_STACK_OPS=ops), "$PYTHON")
            plan = testplan.library_plan(lib, cores)
            plan_node = [graph.text(f"{lib_dir}/{testplan.PLAN_NAME}", plan.dumps())]
            # where each vector is written: read by the run, not part of its
            # signature (never a reason to re-run)
            locations = [graph.text(
                f"{lib_dir}/locations.json",
                json.dumps(testplan.plan_locations(lib), sort_keys=True, indent=1))]
            count = sum(len(op.vectors) for op in lib.ops)
            # with shape sources: the shape library, its registration, the
            # check, and the plan with every output from a shape function
            shapes = shape_nodes(env, graph, profile, shared, lib, lib_dir, compile_vars,
                                 plan_node)
            if shapes is not None:
                plan_node = shapes.plan
                artifacts += shapes.objects + [shapes.library]
            inputs.add(lib, loadable + ([shapes.library] + shapes.plan if shapes else []))
            results = graph.uses(env.GpsimdTest(
                f"{lib_dir}/test-results.json",
                plan_node + loadable + [env.File(f) for f in testplan.plan_files(lib)],
                GPSIMD_LOCATIONS=locations[0], GPSIMD_ZYGOTE=program,
                GPSIMD_TEST_LABEL=f"{lib.name} ({count} vector{'' if count == 1 else 's'})"),
                "$PYTHON")
            env.Depends(results, emu_sources + [program])
            if env.get("RETEST"):   # (run again: neither current nor from the cache)
                env.AlwaysBuild(results)
                env.NoCache(results)
            if to_ninja:        # (its server loading as the run begins)
                ninja.prestart(env, graph, lib_dir, results)
            env.Alias(f"test-{lib.name}", results)
            # `scons explore-<lib>`: a search for failing inputs (always runs;
            # a failing example's .npy go to explore/ beside the manifest)
            explore = graph.uses(env.GpsimdExplore(
                f"{lib_dir}/.explored", plan_node + loadable, GPSIMD_ZYGOTE=program,
                GPSIMD_EXPLORE_DIR=env.Dir(os.path.join(os.path.dirname(lib.manifest),
                                                        "explore")),
                GPSIMD_TEST_LABEL=lib.name), "$PYTHON")
            env.Depends(explore, emu_sources + [program])
            env.AlwaysBuild(explore)
            env.Alias(f"explore-{lib.name}", explore)
            all_explore += explore
            all_results += results
            tests.append(LibraryTests(lib.name, results[0]))
            # `scons <lib>`: the inner loop: objects, stack report, tests
            env.Alias(lib.name, loadable + versions + all_stack[-1:] + results)
        else:
            env.Alias(lib.name, loadable + versions)
        all_schemas.append(graph.text(f"{lib_dir}/schemas.txt", schemas_text(lib)))
        artifacts += wrapper + objects + linked + loadable + versions
        nodes[lib.name] = {"wrapper": wrapper, "objects": objects, "linked": linked,
                           "loadable": loadable, "versions": versions, "results": results}
    if not to_ninja:   # under ninja: ninja -t compdb
        # in the build folder, where clangd looks (build/), so that another
        # collection's database never overwrites it
        db = env.GpsimdCompileDb(f"{build_dir}/compile_commands.json", [])
        env.AlwaysBuild(db)
        env.NoCache(db)
        env.Alias("compiledb", db)
    # `scons digests`: computed and printed every time, never from a cache
    # (named from BUILD_DIR: the same text for any BUILD_DIR)
    top = env.Dir(build_dir)
    listing = graph.text(f"{profile_dir}/artifacts.txt", "".join(sorted(
        f"{n.get_path(top)}\n" for n in artifacts)))
    digests = graph.uses(env.GpsimdDigests(f"{profile_dir}/digests.txt", [listing] + artifacts),
                         "$PYTHON")
    env.AlwaysBuild(digests)
    env.NoCache(digests)
    env.Alias("digests", digests)
    # `scons schemas`: every op's canonical schema (derived ones too); on
    # the ninja path an edge whose output is never made, so `ninja schemas`
    # prints them on every run too (an alias's own action is not written
    # into build.ninja)
    if to_ninja:
        env.Alias("schemas", env.GpsimdPrint(f"{profile_dir}/.schemas-printed", all_schemas))
    else:
        env.AlwaysBuild(env.Alias("schemas", all_schemas, "@cat $SOURCES"))
    if profile.runs_tests:
        env.Alias("test", all_results)
        env.Alias("explore", all_explore)
        env.Alias("stack-report", all_stack)
        # library by library, each one's stack report before its tests (a
        # report found up to date leaves the progress total before the
        # test line; a library's results come before the next one's compiles)
        default = [n for pair in zip(all_stack, all_results) for n in pair] + all_versions
        if to_ninja:
            # (what ninja built each library from, recorded by the summary step)
            spec = graph.text(f"{profile_dir}/{ninjarecord.SPEC_NAME}",
                              ninja.inputs_spec(inputs.roots, graph.programs()))
            default += ninja.summary(env, graph, all_results, profile_dir,
                                     len(collection.libraries),
                                     [lib.name for lib in libraries if lib.multicore], spec)
            ninja.failure_rules(top_env, env.subst("$GPSIMD_STEP"), profile_dir)
        env.Default(env.Alias("all", default))
    else:
        env.Default(env.Alias("all", all_loadable + all_versions))
    if to_ninja:
        files = [f for lib in libraries for f in testplan.plan_files(lib)]
        from gpsimd_build.manifest import SCHEMA_PATH
        # (and the emulator program's sources: its digest is in its command)
        ninja.regenerate_on(top_env, list(collection.manifests) + files + [SCHEMA_PATH]
                            + ninja.build_library_files()
                            + ([s.path for s in program.sources] if program else []))
    SCons.Script.Help(help_text(collection.libraries, profile), append=True)
    timer.lap(f"graph of {len(libraries)} libraries")
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
        if tests:
            atexit.register(Summary(
                tests, profile_dir, len(collection.libraries),
                collection=[(lib.name, lib.multicore) for lib in collection.libraries],
                checks="--no-checks" not in env.get("GPSIMD_EMU_FLAGS", [])).at_exit)
    return nodes
