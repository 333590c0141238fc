"""Each library's nodes (``env.GpsimdCollection`` wires every library
through here): the wrapper, one compile per translation unit, one link
per linker spec, packing and the version metadata, and where the profile
runs tests, the static stack report, the test plan (with shape functions:
``shapes_graph``), the test node and the explore node, with the library's
aliases (``<lib>``, ``test-<lib>``, ``explore-<lib>``).

:class:`Libraries` holds what every library shares (the environment, the
graph, the profile and what it built for all, the emulator's program) and
gathers, library after library, what the collection's own targets need
(``collection_targets``).
"""

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from gpsimd_build import codegen, testplan
from gpsimd_build.buildnames import EXPLORE_PREFIX, TEST_PREFIX, WRAPPER_STEM, source_stem
from gpsimd_build.profiles import Shared, linked_names, linker_specs
from gpsimd_device.versions import versions_json

from . import ninja_path as ninja
from .inputs_record import InputsRecord
from .shapes_graph import schemas_text, shape_nodes
from .summary import LibraryTests

__all__ = ["Libraries"]


def _wrapper_text(lib, dialect) -> str:
    """The library's wrapper.cpp (the Neuron SDK's build driver, build_custom_op.py)."""
    return codegen.emit_wrapper([codegen.WrapperOp(
        function=op.function, arg_types=tuple(a.type for a in op.schema.arguments),
        return_types=tuple(r.type for r in op.schema.returns), stack_size=op.stack_size)
        for op in lib.ops], dialect)


@dataclass
class Libraries:
    """What the libraries share, and what their nodes add up to.

    ``env``: the profile's environment; ``graph``: its ``SConsGraph``;
    ``profile``, ``shared``: the profile and what it built for every
    library; ``profile_dir``: ``<BUILD_DIR>/<profile>``; ``program``: the
    emulator's program (None when the profile runs no tests);
    ``emu_sources``: the emulator's files a test depends on; ``inputs``:
    the record of what each library was built from; ``to_ninja``: the
    graph goes to a ninja file."""

    env: Any
    graph: Any
    profile: Any
    shared: Shared
    profile_dir: str
    program: Optional[Any]
    emu_sources: List[Any]
    inputs: InputsRecord
    to_ninja: bool
    #: every artifact (``scons digests``), the profile's shared ones first
    artifacts: List[Any] = field(default_factory=list)
    loadable: List[Any] = field(default_factory=list)
    versions: List[Any] = field(default_factory=list)
    stack: List[Any] = field(default_factory=list)
    results: List[Any] = field(default_factory=list)
    explore: List[Any] = field(default_factory=list)
    #: each library's explore node(s), by library name
    explore_by_lib: Dict[str, List[Any]] = field(default_factory=dict)
    #: the ninja path's verdict edges (``ninja_path.verdict``)
    verdicts: List[Any] = field(default_factory=list)
    schemas: List[Any] = field(default_factory=list)
    tests: List[LibraryTests] = field(default_factory=list)
    #: name -> {"wrapper", "objects", "linked", "loadable", "versions", "results"}
    nodes: Dict[str, Dict[str, List[Any]]] = field(default_factory=dict)

    def add(self, lib) -> None:
        """Add the nodes of manifest library ``lib``."""
        env, graph, profile, shared = self.env, self.graph, self.profile, self.shared
        lib_dir = f"{self.profile_dir}/{lib.name}"
        compile_vars = profile.compile_vars(shared, lib.includes, lib.cflags)
        wrapper = [graph.text(f"{lib_dir}/wrapper.cpp", _wrapper_text(lib, profile.dialect))]
        sources = [(src, source_stem(src)) for src in lib.sources] + [(wrapper[0], WRAPPER_STEM)]
        objects = []
        for src, stem in sources:
            obj = graph.compile(f"{lib_dir}/obj/{stem}.o", src, **compile_vars)
            for extra in profile.object_side_effects(obj.path):
                env.SideEffect(extra, obj)
                env.Clean(obj, extra)
            objects.append(obj)
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
        self.loadable += loadable
        self.versions += versions
        results = []
        if profile.runs_tests:
            results, verdict = self._tests(lib, lib_dir, compile_vars, objects, loadable, cores)
            # `scons <lib>`: the inner loop: objects, stack report, tests
            env.Alias(lib.name, loadable + versions + self.stack[-1:] + results + verdict)
        else:
            env.Alias(lib.name, loadable + versions)
        self.schemas.append(graph.text(f"{lib_dir}/schemas.txt", schemas_text(lib)))
        self.artifacts += wrapper + objects + linked + loadable + versions
        self.nodes[lib.name] = {"wrapper": wrapper, "objects": objects, "linked": linked,
                                "loadable": loadable, "versions": versions, "results": results}

    def _tests(self, lib, lib_dir: str, compile_vars, objects, loadable, cores):
        """The stack report, the plan, the test node and the explore node
        of ``lib``; returns the test node's targets and (on the ninja path)
        its verdict edge's."""
        env, graph = self.env, self.graph
        # the static stack report, from the library's objects and the runtime's graph
        ops = [a for op in lib.ops for a in ("--op", (
            op.name if op.function == op.name else f"{op.name}:{op.function}")
            + f"={op.stack_size}")]
        self.stack += graph.step(env.GpsimdStackReport(
            f"{lib_dir}/stack-report.txt", objects + self.shared.stack_graph,
            GPSIMD_LIBRARY=lib.name, GPSIMD_STACK_OPS=ops), "$GPSIMD_OBJDUMP")
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
        shapes = shape_nodes(env, graph, self.profile, self.shared, lib, lib_dir, compile_vars,
                             plan_node, self.emu_sources)
        if shapes is not None:
            plan_node = shapes.plan
            self.artifacts += shapes.objects + [shapes.library]
        self.inputs.add(lib, loadable + ([shapes.library] + shapes.plan if shapes else []))
        files = testplan.plan_files(lib)
        listed = graph.text(f"{lib_dir}/{testplan.FILES_NAME}", "".join(f"{f}\n" for f in files))
        results = graph.uses(env.GpsimdTest(
            f"{lib_dir}/test-results.json",
            plan_node + loadable + [listed] + [env.File(f) for f in files],
            GPSIMD_LOCATIONS=locations[0], GPSIMD_ZYGOTE=self.program,
            GPSIMD_TEST_LABEL=f"{lib.name} ({count} vector{'' if count == 1 else 's'})"),
            "$PYTHON")
        env.Depends(results, self.emu_sources + [self.program])
        if env.get("RETEST"):   # (run again: neither current nor from the cache)
            env.AlwaysBuild(results)
            env.NoCache(results)
        verdict: List[Any] = []
        if self.to_ninja:        # (its server loading as the run begins; its verdict)
            ninja.prestart(env, graph, lib_dir, results)
            verdict = ninja.verdict(env, lib_dir, lib.name, results)
            self.verdicts += verdict
        env.Alias(f"{TEST_PREFIX}{lib.name}", results + verdict)
        # `scons explore-<lib>`: a search for failing inputs (always runs;
        # a failing example's .npy go to explore/ beside the manifest)
        explore = graph.uses(env.GpsimdExplore(
            f"{lib_dir}/.explored", plan_node + loadable + ([shapes.library] if shapes else []),
            GPSIMD_ZYGOTE=self.program,
            GPSIMD_EXPLORE_SHAPES=["--shapes", shapes.library] if shapes else [],
            GPSIMD_EXPLORE_DIR=env.Dir(os.path.join(os.path.dirname(lib.manifest), "explore")),
            GPSIMD_TEST_LABEL=lib.name), "$PYTHON")
        env.Depends(explore, self.emu_sources + [self.program])
        env.AlwaysBuild(explore)
        env.Alias(f"{EXPLORE_PREFIX}{lib.name}", explore)
        self.explore += explore
        self.explore_by_lib[lib.name] = list(explore)
        self.results += results
        self.tests.append(LibraryTests(lib.name, results[0]))
        return results, verdict
