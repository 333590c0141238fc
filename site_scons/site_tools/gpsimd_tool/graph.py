"""``env.GpsimdCollection``: the graph of a whole op collection.

Loads the manifest (``gpsimd_build.manifest``), picks the target profile
plug-in (``gpsimd_build.profiles``), lets it build what every library shares,
then wires each library through the same stages (DESIGN.md "The graph for
one library"): wrapper, one compile per translation unit, one link per
linker spec, packing, version metadata, and where the profile runs tests,
call graphs, the stack report, the test plan and the test node. The graph
code never asks which profile it holds.
"""

import atexit
import json
import os
import sys
from typing import Any, Dict, List

import SCons.Script

from gpsimd_build import testplan
from gpsimd_build.manifest import ManifestError, load_manifest
from gpsimd_build.profiles import ProfileError, Shared, get_profile, linked_names, linker_specs
from gpsimd_device.headers import INCLUDE_DIR
from gpsimd_device.versions import versions_json

from .builders import summary_text

__all__ = ["GpsimdCollection", "SConsGraph"]

#: The folders our own steps import from (the build library, the device
#: model and facts): PYTHONPATH of every action.
_SITE_SCONS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_RUNTIME_MODEL = os.path.dirname(INCLUDE_DIR)
_PYTHONPATH = os.pathsep.join([_RUNTIME_MODEL, _SITE_SCONS])
_EMU_SOURCES = [os.path.join(_RUNTIME_MODEL, d) for d in ("gpsimd_emu", "gpsimd_device")]


class SConsGraph:
    """The ``Graph`` a profile builds through (``gpsimd_build.profiles.base``):
    each method adds one node with this tool's builders and returns it."""

    def __init__(self, env):
        self.env = env

    def source(self, path: str) -> Any:
        return self.env.File(path)

    def dir_path(self, path: str) -> str:
        return self.env.Dir(path).path

    def compile(self, target: str, source: Any, **vars: Any) -> Any:
        return self.env.GpsimdObject(target, source, **vars)[0]

    def callgraph(self, target: str, source: Any, **vars: Any) -> Any:
        return self.env.GpsimdCallGraph(target, source, **vars)[0]

    def archive(self, target: str, objects) -> Any:
        return self.env.GpsimdArchive(target, list(objects))[0]

    def text(self, target: str, text: str) -> Any:
        return self.env.GpsimdText(target, self.env.Value(text))[0]

    def link(self, target: str, sources, **vars: Any) -> Any:
        return self.env.GpsimdLink(target, list(sources), **vars)[0]

    def host_pack(self, base: str, linked: Any, metadata) -> Any:
        core = metadata["core"]
        return self.env.GpsimdPack(base, linked, GPSIMD_LIBRARY=metadata["library"],
                                   GPSIMD_LSP=metadata["lsp"],
                                   GPSIMD_CORE="none" if core is None else str(core))[0]

    def vendor_pack(self, base: str, linked: Any) -> Any:
        return self.env.GpsimdVendorPack(base, linked)[0]


def _source_stem(src: str) -> str:
    """A source's path below the top without its suffix, '..' made safe."""
    rel = os.path.normpath(src).replace(os.sep, "/")
    parts = ["__" if p == ".." else p for p in rel.split("/")]
    return os.path.splitext("/".join(parts))[0]


def _wrapper_spec(lib, dialect) -> str:
    return json.dumps({
        "dialect": {"fnptr_cast": dialect.fnptr_cast, "switch_back": dialect.switch_back},
        "ops": [{"function": op.name,
                 "arg_types": [a.type for a in op.schema.arguments],
                 "return_types": [r.type for r in op.schema.returns],
                 "stack_size": op.stack_size} for op in lib.ops],
    }, sort_keys=True)


def _summary_at_exit(result_paths: List[str]) -> None:
    """When a test node failed, SCons never builds the summary: print it at exit."""
    failures = SCons.Script.GetBuildFailures()
    if any(str(f.node).endswith("test-results.json") for f in failures):
        print(summary_text(result_paths), end="")


def _stop(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    SCons.Script.Exit(2)


def GpsimdCollection(env, manifest, build_dir="build", toolchain="host") -> Dict[str, Dict[str, List]]:
    """Load ``manifest`` and add every library's nodes to the graph.

    ``toolchain`` names the target profile: ``host`` (build, then run every
    vector on the emulator) or ``xtensa`` (the vendor driver's commands;
    nothing runs). Outputs go under ``<build_dir>/<toolchain>/``. Returns
    ``{library name: {"wrapper", "objects", "linked", "loadable", "versions",
    "results"}}``, lists of nodes. A manifest with errors prints each as
    ``FILE:LINE:COL: path: message`` and stops SCons with exit status 2
    before anything is built; so does a profile whose programs are missing.
    """
    try:
        collection = load_manifest(manifest, allow_paths=env.get("ALLOW_PATHS", ""))
    except ManifestError as err:
        _stop(str(err))
    try:
        profile = get_profile(toolchain, os.environ, env.subst("$CXX") or "g++")
    except ProfileError as err:
        _stop(f"scons: {err}")
    missing = profile.missing_program(lambda p: env.WhereIs(p, path=os.environ.get("PATH", "")))
    if missing:
        _stop(f"scons: {missing}")

    env = env.Clone()
    env["ENV"]["PATH"] = os.environ.get("PATH", env["ENV"].get("PATH", ""))
    env["ENV"]["PYTHONPATH"] = _PYTHONPATH
    env.Replace(**profile.construction_vars(env.Dir("#").abspath))
    launcher = env.get("CXX_LAUNCHER")
    if launcher:
        env["GPSIMD_LAUNCHER"] = launcher
    graph = SConsGraph(env)
    profile_dir = f"{build_dir}/{profile.name}"
    shared: Shared = profile.shared(graph, profile_dir)
    artifacts: List[Any] = list(shared.all())
    scan_base = [env.Dir(shared.include)] if shared.include else []
    emu_sources = sorted((f for d in _EMU_SOURCES for f in env.Dir(d).glob("*.py")), key=str)

    nodes = {}
    all_results, all_loadable, all_versions, all_stack = [], [], [], []
    for lib in collection.libraries:
        lib_dir = f"{profile_dir}/{lib.name}"
        compile_vars = dict(profile.compile_vars(shared, lib.includes, lib.cflags),
                            CPPPATH=scan_base + [env.Dir(d) for d in lib.includes])
        wrapper = env.GpsimdWrapper(f"{lib_dir}/wrapper.cpp",
                                    env.Value(_wrapper_spec(lib, profile.dialect)))
        sources = [(src, _source_stem(src)) for src in lib.sources] + [(wrapper[0], "wrapper")]
        objects = []
        for src, stem in sources:
            obj = graph.compile(f"{lib_dir}/obj/{stem}.o", src, **compile_vars)
            for extra in profile.object_side_effects(obj.path):
                env.SideEffect(extra, obj)
                env.Clean(obj, extra)
            objects.append(obj)
        linked, loadable, cores = [], [], []
        for spec, name in zip(linker_specs(lib.multicore), linked_names(lib.name, lib.multicore)):
            so = profile.link(graph, f"{lib_dir}/{name}.so", objects, spec, shared)
            linked.append(so)
            if "-g" in lib.cflags:
                obj = so   # build-front-end.txt §5d: the user's -g skips the pack step
            else:
                obj = profile.package(graph, f"{lib_dir}/{name}", so, lib.name, spec)
            loadable.append(obj)
            cores.append((spec.core, spec.name, obj.path))
        # build-front-end.txt §1: the version metadata, with every library.
        versions = env.GpsimdText(f"{lib_dir}/versions.json",
                                  env.Value(versions_json(lib.name, profile.name)))
        env.Alias(lib.name, loadable + versions)
        all_loadable += loadable
        all_versions += versions
        results = []
        if profile.runs_tests:
            # the static stack report (-fcallgraph-info=su of every TU), each
            # after its object: a TU that does not compile is reported once
            callgraphs = []
            for (src, stem), obj in zip(sources, objects):
                ci = graph.callgraph(f"{lib_dir}/stack/{stem}.ci", src, **compile_vars)
                env.Depends(ci, obj)
                callgraphs.append(ci)
            ops = [a for op in lib.ops for a in ("--op", f"{op.name}={op.stack_size}")]
            all_stack += env.GpsimdStackReport(f"{lib_dir}/stack-report.txt",
                                               callgraphs + shared.callgraphs,
                                               GPSIMD_LIBRARY=lib.name, GPSIMD_STACK_OPS=ops)
            plan = testplan.library_plan(lib, cores)
            plan_node = env.GpsimdText(f"{lib_dir}/testplan.json", env.Value(plan.dumps()))
            # where each vector is written: needed by the run, not part of its
            # signature (Requires: built first, never a reason to re-run)
            locations = env.GpsimdText(
                f"{lib_dir}/locations.json",
                env.Value(json.dumps(testplan.plan_locations(lib), sort_keys=True, indent=1)))
            results = env.GpsimdTest(
                f"{lib_dir}/test-results.json",
                plan_node + loadable + [env.File(f) for f in testplan.plan_files(lib)],
                GPSIMD_LOCATIONS=locations[0])
            env.Requires(results, locations)
            env.Depends(results, emu_sources)
            env.Alias(f"test-{lib.name}", results)
            all_results += results
        artifacts += wrapper + objects + linked + loadable + versions
        nodes[lib.name] = {"wrapper": wrapper, "objects": objects, "linked": linked,
                           "loadable": loadable, "versions": versions, "results": results}
    env.Alias("compiledb", env.CompilationDatabase())
    digests = env.GpsimdDigests(f"{profile_dir}/digests.txt", artifacts)
    env.AlwaysBuild(digests)
    env.Alias("digests", digests)
    if profile.runs_tests:
        env.Alias("test", all_results)
        summary = env.GpsimdSummary(f"{profile_dir}/test-summary.txt", all_results)
        env.Depends(summary, all_versions + all_stack)   # built first, so the totals come last
        atexit.register(_summary_at_exit, [n.abspath for n in all_results])
        env.Alias("stack-report", all_stack)
        env.Default(env.Alias("all", summary + all_stack))
    else:
        env.Default(env.Alias("all", all_loadable + all_versions))
    return nodes
