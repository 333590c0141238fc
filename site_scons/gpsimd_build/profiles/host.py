"""The ``host`` profile: shared objects for this machine, linked with the
project's own runtime (``runtime_model/src``, archived as
``libneuroncustomop.a``) and a generated per-core linker-spec object, which
the emulator loads and runs (ARCHITECTURE.md).

A runtime outside the project (an installed package, another checkout's
tool) is compiled from a mirror in ``<profile dir>/runtime/include`` and
``src``, so that no output holds its absolute path.

Compile: ``$GPSIMD_CXX $GPSIMD_CXXFLAGS -ffile-prefix-map=<top>=.
$GPSIMD_USER_CFLAGS -I<runtime include> <includes> -MD -MF <obj>.d -o <obj>
-c <src>`` (the prefix map, like a compiler launcher, stays out of the
signature, so checkouts in different folders share a cache; the depfile
``<obj>.d`` names every file the compile read, which the object then
depends on: ``gpsimd_tool.depfiles``, and ninja's ``deps = gcc``). The
static stack report reads its frames and calls from these objects (``gpsimd_build.objgraph``, with
``$GPSIMD_OBJDUMP``), so each translation unit is compiled once under any
launcher. Link: ``$GPSIMD_CXX
$GPSIMD_LINKFLAGS -o <so> -Wl,--whole-archive <objects> <lsp.o> <runtime.a>
-Wl,--no-whole-archive`` (the runtime archive is the only archive, and
``--whole-archive`` does not change how objects are linked), with
``-fuse-ld=gold`` where the machine has gold (``LINKER``). Pack, one step
per library: for each core ``$GPSIMD_STRIP --strip-unneeded``, then the
host pack container (``gpsimd_device.pack``).
"""

import glob
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from gpsimd_device.headers import INCLUDE_DIR
from gpsimd_device.lsp import MULTICORE_LSPS, SINGLE_LSP, LinkerSpec
from gpsimd_device.pack import pack_metadata
from gpsimd_device.versions import VERSIONS

from ..buildnames import LSP_DIR, RUNTIME_DIR
from .base import HOST_DIALECT, Graph, Profile, ProfileError, Shared, prefix_maps

__all__ = ["DEPFILE_SUFFIX", "GOLD", "HOST_CXXFLAGS", "HOST_LINKFLAGS", "RUNTIME_DEBUGFLAGS",
           "RUNTIME_SRC", "HostProfile", "linker_flags", "lsp_source", "runtime_files"]

#: Host compile flags: the device's (the Neuron SDK's build driver, build_custom_op.py) where they mean
#: the same on the host; -O2 for a fast emulator, -fPIC for a loadable object;
#: -fstack-clash-protection makes every frame larger than a page probe its
#: pages in order, so a kernel with a huge local array (a 1 MiB frame) hits
#: the launcher's guard page below the wrapper stack and is reported as a
#: stack overflow (docs/kernel-api.md "Limits") instead of
#: jumping past the guard into unrelated memory; -no-integrated-cpp
#: preprocesses as a separate pass, exactly as distcc does before it sends
#: the preprocessed text away, so the debug line table (and so every byte of
#: an object) is the same whether a compile ran here or through distcc;
#: -gno-record-gcc-switches keeps the command line out of the debug info, so
#: an object is the same bytes whatever flags outside the signature (a
#: launcher, the prefix maps) its compile was given; -gno-column-info leaves
#: columns out of it, which a compile of preprocessed text elsewhere (icecc)
#: records differently (DW_AT_decl_column, .debug_line).
HOST_CXXFLAGS = ("-g", "-gno-record-gcc-switches", "-gno-column-info", "-std=c++14", "-O2",
                 "-Wall", "-Werror",
                 "-fPIC", "-fno-jump-tables", "-fstack-clash-protection", "-no-integrated-cpp")
#: A compile's depfile is its object's path with this suffix (``-MD -MF``).
DEPFILE_SUFFIX = ".d"
#: The runtime keeps line tables only (-g1): linked into every core object,
#: its full debug info made each object ~0.9 MB (three times the size).
RUNTIME_DEBUGFLAGS = ("-g1",)
#: -Wl,--no-undefined: a kernel the schema names but no source defines (or
#: defines with another signature) is a link error naming the C++ function,
#: not a load failure at test time.
HOST_LINKFLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,--no-undefined")
#: ``LINKER=auto`` uses GNU gold when the machine has it: the per-core links
#: are a third of a full build's compiler-and-linker CPU with bfd, and gold
#: links them about 2.7 times faster (BENCHMARKS.md, "Full build").
GOLD = "ld.gold"


def linker_flags(linker: str) -> List[str]:
    """The link flags that choose the linker: ``gold`` -> ``-fuse-ld=gold``,
    ``bfd`` -> ``-fuse-ld=bfd``, ``auto`` -> gold when ``ld.gold`` is on
    PATH, else none (the compiler's default linker).

    Raises:
        ProfileError: another value, or ``gold`` on a machine without it.
    """
    if linker == "auto":
        return ["-fuse-ld=gold"] if shutil.which(GOLD) else []
    if linker not in ("gold", "bfd"):
        raise ProfileError(f"LINKER={linker}: the host profile links with auto, gold or bfd")
    if linker == "gold" and not shutil.which(GOLD):
        raise ProfileError(f"LINKER=gold: {GOLD} is not on PATH (install binutils-gold, "
                           f"or use LINKER=bfd)")
    return [f"-fuse-ld={linker}"]


#: The host runtime's sources: every ``*.cpp`` of this folder.
RUNTIME_SRC = os.path.join(os.path.dirname(INCLUDE_DIR), "src")


def lsp_source(spec: LinkerSpec) -> str:
    """C++ text of the host LSP object that carries a core's link-time facts.

    It defines ``gpsimd_linker_spec`` (runtime_model/include/gpsimd_host/abi.h),
    which the host runtime checks against the core it is bound to.
    """
    core = "GPSIMD_LSP_SINGLE" if spec.core is None else f"{spec.core}u"
    return (
        "// WARNING: AUTO GENERATED DO NOT EDIT\n"
        f"// Host linker spec {spec.name}: the link-time identity of one core.\n"
        '#include "gpsimd_host/abi.h"\n'
        'extern "C" const gpsimd_lsp_info gpsimd_linker_spec = {\n'
        f"    {core}, 0u, 0x{spec.scratch_origin:x}ull, 0x{spec.scratch_size:x}ull,\n"
        f'    "{spec.name}"\n'
        "};\n"
    )


def runtime_files() -> List[Tuple[str, str]]:
    """``(path, text)`` of every runtime header (``include/...``) and source
    (``src/...``) (paths with ``/``, sorted): what a mirror of the runtime
    holds."""
    root = os.path.dirname(INCLUDE_DIR)
    out = []
    for sub, suffixes in (("include", (".h", ".hpp")), ("src", (".cpp", ".h"))):
        for folder, _, names in os.walk(os.path.join(root, sub)):
            for name in names:
                if name.endswith(suffixes):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        out.append((os.path.relpath(path, root).replace(os.sep, "/"), f.read()))
    return sorted(out)


class HostProfile(Profile):
    """This machine's g++/clang++ (``cxx``) and the project runtime."""

    name = "host"
    dialect = HOST_DIALECT
    runs_tests = True
    builds_shape_library = True

    def __init__(self, cxx: str = "g++", strip: str = "strip", objdump: str = "objdump"):
        self.cxx = cxx
        self.strip = strip
        self.objdump = objdump
        self.programs = (cxx, strip, objdump)
        self.launcher = ""

    @classmethod
    def configure(cls, environ: Mapping[str, str], cxx: str) -> "HostProfile":
        return cls(cxx=cxx or "g++")

    def construction_vars(self, top: str, build_dir: str, launcher: str = "",
                          linker: str = "auto") -> Dict[str, Any]:
        self.launcher = launcher
        compile_ = ("$GPSIMD_CXX $GPSIMD_CXXFLAGS $GPSIMD_DEBUGFLAGS $( $GPSIMD_PREFIXFLAGS $) "
                    "$GPSIMD_USER_CFLAGS $GPSIMD_INCFLAGS $GPSIMD_DEPFLAGS")
        return {
            "GPSIMD_CXX": self.cxx,
            "GPSIMD_CXXFLAGS": list(HOST_CXXFLAGS),
            "GPSIMD_DEBUGFLAGS": [],
            "GPSIMD_PREFIXFLAGS": prefix_maps(top, build_dir),
            "GPSIMD_CXXCOM": f"$( $GPSIMD_LAUNCHER $) {compile_} -o $TARGET -c $SOURCE",
            # every file the compile reads, system headers included (-MMD
            # leaves out those found through -isystem and those a
            # `#pragma GCC system_header` header includes): self.depfile
            "GPSIMD_DEPFLAGS": ["-MD", "-MF", "${TARGET}" + DEPFILE_SUFFIX],
            "GPSIMD_LINKFLAGS": list(HOST_LINKFLAGS) + linker_flags(linker),
            # the sources end with the runtime archive, the one archive:
            # --whole-archive changes nothing for the objects before it;
            # the soname is the file's name (without one, the linker names
            # the base symbol version after the output's path: BUILD_DIR)
            "GPSIMD_LINKCOM": ("$GPSIMD_CXX $GPSIMD_LINKFLAGS -Wl,-soname,${TARGET.file} -o $TARGET "
                               "-Wl,--whole-archive $SOURCES -Wl,--no-whole-archive"),
            "GPSIMD_STRIP": self.strip,
            "GPSIMD_OBJDUMP": self.objdump,
        }

    def depfile(self, obj: str) -> Optional[str]:
        """``<obj>.d`` (``$GPSIMD_DEPFLAGS``)."""
        return obj + DEPFILE_SUFFIX

    def shared(self, graph: Graph, profile_dir: str) -> Shared:
        """The runtime archive (``runtime/libneuroncustomop.a``), its
        functions' stack graph (``runtime/stack-graph.json``, which every
        stack report reads) and one object per linker spec (``lsp/<name>.o``).

        A runtime outside the project (an installed package, another
        checkout's tool) is first mirrored into ``runtime/include`` and
        ``runtime/src`` (:func:`runtime_files`), so that every compile names
        only paths below the project: no object, call graph or message then
        holds the absolute path of the install folder."""
        include, sources = INCLUDE_DIR, sorted(glob.glob(os.path.join(RUNTIME_SRC, "*.cpp")))
        if os.path.isabs(graph.dir_path(os.path.dirname(INCLUDE_DIR))):
            mirror = f"{profile_dir}/{RUNTIME_DIR}"
            for rel, text in runtime_files():
                graph.text(f"{mirror}/{rel}", text)
            include = f"{mirror}/include"
            sources = [f"{mirror}/src/{os.path.basename(src)}" for src in sources]
        shared = Shared(include=graph.dir_path(include))
        vars = dict(self.compile_vars(shared, (), ()), GPSIMD_DEBUGFLAGS=list(RUNTIME_DEBUGFLAGS))
        objects: List[Any] = []
        for src in sources:
            stem = os.path.splitext(os.path.basename(src))[0]
            objects.append(graph.compile(f"{profile_dir}/{RUNTIME_DIR}/obj/{stem}.o",
                                         graph.source(src), **vars))
        shared.stack_graph = [graph.stack_graph(f"{profile_dir}/{RUNTIME_DIR}/stack-graph.json",
                                                objects)]
        shared.nodes["runtime"] = [graph.archive(f"{profile_dir}/{RUNTIME_DIR}/libneuroncustomop.a",
                                                 objects)]
        for spec in MULTICORE_LSPS + (SINGLE_LSP,):
            cpp = graph.text(f"{profile_dir}/{LSP_DIR}/{spec.name}.cpp", lsp_source(spec))
            shared.nodes[f"lsp:{spec.name}"] = [graph.compile(
                f"{profile_dir}/{LSP_DIR}/{spec.name}.o", cpp, **vars)]
        return shared

    def link(self, graph: Graph, target: str, objects: Sequence[Any], spec: LinkerSpec,
             shared: Shared) -> Any:
        return graph.link(target, list(objects) + shared.nodes[f"lsp:{spec.name}"]
                          + shared.nodes["runtime"])

    def package(self, graph: Graph, members: Sequence[Tuple[str, Any, LinkerSpec]],
                library: str) -> List[Any]:
        """One pack step for every core of the library (``gpsimd_build.steps
        pack``): a strip and a container per core, one Python start-up."""
        return graph.host_pack([(base, linked, pack_metadata(library, spec.name, spec.core,
                                                             VERSIONS))
                                for base, linked, spec in members])

    def shape_library(self, graph: Graph, target: str, objects: Sequence[Any],
                      shared: Shared) -> Any:
        """The shape sources' objects linked with the project runtime (its
        registry, meta tensors and ``gpsimd_shape_call``) and the
        single-core linker-spec object, never with a kernel or a wrapper."""
        return graph.link(target, list(objects) + shared.nodes[f"lsp:{SINGLE_LSP.name}"]
                          + shared.nodes["runtime"])
