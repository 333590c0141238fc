"""The ``Graph`` interface the target profiles build with
(``gpsimd_build.profiles.base.Graph``), on SCons builders: one method per
kind of node (a compile, a link, a pack, a generated text...), each
recording the programs its command runs as explicit dependencies."""

import os
from typing import Any, Dict, List, Optional, Tuple

from gpsimd_build import buildnames, layout
from gpsimd_build.cflags import named_inputs
from gpsimd_device.atomic import write_if_changed

from .progress import Progress

__all__ = ["SConsGraph", "STEP_SOURCES_ALIAS", "WRAPPERS", "wrapped_program"]

#: The alias of the code the build's own steps run
#: (``layout.step_python_files``): every step node depends on it (see
#: :meth:`SConsGraph.step`), as a test node depends on the emulator's.
STEP_SOURCES_ALIAS = buildnames.STEP_SOURCES_ALIAS


#: Programs that stand for a compiler in a "masquerade" folder (a link of
#: the compiler's name to them, first on PATH) and run the next program of
#: that name on PATH that is not such a link.
WRAPPERS = frozenset({"ccache", "distcc", "icecc", "sccache", "buildcache"})


def wrapped_program(found: str, name: str, path: Optional[str]) -> List[str]:
    """The programs that run when ``name``, found on ``path`` at ``found``,
    runs: ``found``, and when it resolves to a wrapper (:data:`WRAPPERS`),
    the program the wrapper runs as well, found as ccache and distcc find
    it: the next ``name`` on ``path`` that does not resolve to a wrapper
    (none when there is none: the wrapper then fails). Without it a
    wrapper's masquerade folder first on PATH would make every compiler
    behind it the same program to the graph and the cache key."""
    resolved = os.path.realpath(found)
    if os.path.basename(resolved) not in WRAPPERS:
        return [found]
    base = os.path.basename(name)
    for folder in (path or "").split(os.pathsep):
        candidate = os.path.join(folder or ".", base)
        real = os.path.realpath(candidate)
        if os.path.basename(real) not in WRAPPERS and os.path.isfile(real) \
                and os.access(real, os.X_OK):
            return [found, os.path.abspath(candidate)]
    return [found]


class SConsGraph:
    """The ``Graph`` a profile builds through (``gpsimd_build.profiles.base``):
    each method adds one node with this tool's builders and returns it.

    Text that is a pure function of the manifest (``wrapper.cpp``, the test
    plan, the version metadata, the linker-spec sources: :meth:`text`) is
    written while the graph is read, when it differs from what is on disk,
    and is a source of the graph, not a target: no Python action runs for
    it, and the same graph runs under ninja. ``write`` False (``-h``,
    ``-c``): nothing is written."""

    def __init__(self, env, write: bool = True, progress: Optional[Progress] = None):
        self.env = env
        self.write = write
        self.progress = progress
        self._programs: Dict[str, List[Any]] = {}
        self._inputs: Dict[Any, Tuple[List[Any], List[Any]]] = {}
        self._step_sources: Optional[List[Any]] = None

    def uses(self, nodes, *programs: str) -> Any:
        """Make ``nodes`` depend on the programs their command runs (e.g.
        ``"$GPSIMD_CXX"``), resolved once on PATH: a new compiler rebuilds
        what it compiled. (SCons's own implicit command dependencies find
        the same file by substituting every node's command, which costs a
        null build more than the rest of its walk.) Every action node passes
        here: it is counted for the ``[done/total]`` of its line. A program
        found in a wrapper's masquerade folder (``/usr/lib/ccache/g++``, a
        link to ccache) counts with the program the wrapper runs
        (:func:`wrapped_program`). Returns ``nodes``."""
        if self.progress is not None:
            self.progress.add(nodes)
        deps = []
        for program in programs:
            if program not in self._programs:
                name = self.env.subst(program)
                path = self.env["ENV"].get("PATH")
                found = self.env.WhereIs(name, path=path) if name else None
                self._programs[program] = [self.env.File(f) for f in
                                           wrapped_program(found, name, path)] if found else []
            deps += self._programs[program]
        if deps:
            for node in [nodes] if hasattr(nodes, "add_dependency") else nodes:
                node.add_dependency(deps)
        return nodes

    def step(self, nodes, *programs: str) -> Any:
        """:meth:`uses` for a node whose command is one of the build's own
        steps (``$GPSIMD_STEP``, Python, and ``programs``): it depends on
        the steps' code too (one alias, ``STEP_SOURCES_ALIAS``, a phony on
        the ninja path), so that a new version of that code (an upgrade of
        the tool) makes its output again, as a new compiler recompiles.
        Returns ``nodes``."""
        if self._step_sources is None:
            self._step_sources = self.env.Alias(
                STEP_SOURCES_ALIAS, [self.env.File(f) for f in layout.step_python_files()])
        self.env.Depends(nodes, self._step_sources)
        return self.uses(nodes, "$PYTHON", *programs)

    def programs(self) -> List[Any]:
        """The nodes of the programs the commands run (see :meth:`uses`)."""
        return [n for nodes in self._programs.values() for n in nodes]

    def source(self, path: str) -> Any:
        return self.env.File(path)

    def dir_path(self, path: str) -> str:
        return self.env.Dir(path).path

    def compile(self, target: str, source: Any, **vars: Any) -> Any:
        """A compile. SCons's C scanner searches the folders its flags
        add (the library's ``cflags``, ``GPSIMD_USER_CFLAGS``, and the
        ``-I`` flags of ``Profile.compile_vars``, ``GPSIMD_INCFLAGS``), and
        the object depends on the files ``cflags`` force in (``-include``,
        ``-imacros``); the rest of what the compile read comes from its
        depfile (``depfiles.py``)."""
        folders, forced = self._flag_inputs(tuple(vars.get("GPSIMD_USER_CFLAGS", ())),
                                            tuple(vars.get("GPSIMD_INCFLAGS", ())))
        vars.setdefault("CPPPATH", folders)
        node = self.uses(self.env.GpsimdObject(target, source, **vars)[0], "$GPSIMD_CXX")
        if forced:
            node.add_dependency(forced)
        depfiles = self.env.get("GPSIMD_DEPFILES")
        where = depfiles.depfile_of(node.path) if depfiles is not None else None
        if where:       # (its compile's depfile: depfiles.py; `scons -c` removes it)
            self.env.Clean(node, where)
        return node

    def _flag_inputs(self, cflags: Tuple[str, ...],
                     incflags: Tuple[str, ...]) -> Tuple[List[Any], List[Any]]:
        """The Dir nodes a compile's flags search, in order, and the File
        nodes of the files they force in that exist (``gpsimd_build.cflags``;
        once per pair of flag lists)."""
        key = (cflags, incflags)
        found = self._inputs.get(key)
        if found is None:
            before, after, forced = named_inputs(cflags)
            own = [f[2:] for f in incflags if f.startswith("-I")]
            env = self.env
            found = self._inputs[key] = (
                [env.Dir(d) for d in before + own + after],
                [env.File(f) for f in forced if os.path.isfile(env.File(f).get_abspath())])
        return found

    def depends(self, node: Any, on: Any) -> None:
        self.env.Depends(node, on)

    def stack_graph(self, target: str, objects) -> Any:
        return self.step(self.env.GpsimdStackGraph(target, list(objects))[0], "$GPSIMD_OBJDUMP")

    def archive(self, target: str, objects) -> Any:
        return self.uses(self.env.GpsimdArchive(target, list(objects))[0], "$AR")

    def text(self, target: str, text: str) -> Any:
        node = self.env.File(target)
        if self.write:
            write_if_changed(node.abspath, text)
        return node

    def link(self, target: str, sources, **vars: Any) -> Any:
        return self.uses(self.env.GpsimdLink(target, list(sources), **vars)[0], "$GPSIMD_CXX")

    def host_pack(self, members) -> List[Any]:
        targets, sources, args = [], [], []
        for i, (base, linked, metadata) in enumerate(members):
            core = metadata["core"]
            targets += [base + ".packed.so", base + ".stripped.so"]
            sources.append(linked)
            args.append(f"--member {metadata['lsp']} {'none' if core is None else core} "
                        f"${{SOURCES[{i}]}} ${{TARGETS[{2 * i}]}} ${{TARGETS[{2 * i + 1}]}}")
        first = members[0][0]
        if len(members) > 1 and first.endswith("_cpu0"):
            first = first[:-1] + f"[0-{len(members) - 1}]"
        label = first + ".packed.so"
        nodes = self.step(self.env.GpsimdPack(targets, sources,
                                              GPSIMD_LIBRARY=members[0][2]["library"],
                                              GPSIMD_PACK_MEMBERS=" ".join(args),
                                              GPSIMD_PACK_LABEL=label),
                          "$GPSIMD_STRIP")
        return nodes[0::2]

    def vendor_pack(self, base: str, linked: Any) -> Any:
        return self.uses(self.env.GpsimdVendorPack(base, linked), "$GPSIMD_PACKER")[0]
