"""Target profiles: the toolchain facts of each way a library can be built.

``host`` (the default) builds shared objects for this machine with the
project's own runtime (``runtime_model/``), which the emulator loads.
``xtensa`` (issue 6) issues the vendor driver's commands.

Everything that differs between the host and the device in the *generated
text* is in :class:`WrapperDialect`, and nowhere else.
"""

from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence

from gpsimd_device import limits as _limits
from gpsimd_device.lsp import (MULTICORE_LSPS, SINGLE_LSP, LinkerSpec, linked_names,  # noqa: F401
                               linker_specs)
from gpsimd_device.versions import VERSIONS, versions_json  # noqa: F401

#: Cores of the SPMD model (build-front-end.txt §6, NUM_CPUS = 8).
NUM_CPUS = _limits.NUM_CORES


@dataclass(frozen=True)
class WrapperDialect:
    """The two places where the host wrapper text must differ from the device.

    ``fnptr_cast``: the type the launcher casts ``<fn>_wrapper`` to. The
    device is a 32-bit core, so the driver casts to ``uint32_t``
    (build-front-end.txt §3c); a 64-bit host would truncate the pointer, so
    the host casts to ``uintptr_t``.

    ``switch_back``: the statement that ends a wrapper that ran on a switched
    stack. The device emits the Xtensa jump ``asm("j switchBack");``
    (§3b/§3c); the host has no such instruction and calls the runtime's
    ``switchBack()``, which returns to the launcher the same way.
    """

    fnptr_cast: str
    switch_back: str


DEVICE_DIALECT = WrapperDialect(fnptr_cast="uint32_t",
                                switch_back='asm("j switchBack");')
HOST_DIALECT = WrapperDialect(fnptr_cast="uintptr_t",
                              switch_back="switchBack();")


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


# ---- toolchains ------------------------------------------------------------
#
# A toolchain turns one graph step into an argv list. The SCons tool calls
# these from command generators, so the exact command of every node comes
# from here and nowhere else.

#: Host compile flags: the device's (build-front-end.txt §5b) where they mean
#: the same on the host; -O2 for a fast emulator, -fPIC for a loadable object;
#: -fstack-clash-protection makes every frame larger than a page probe its
#: pages in order, so a kernel with a huge local array (a 1 MiB frame) hits
#: the launcher's guard page below the wrapper stack and is reported as a
#: stack overflow (device-api.md "Overflow is a device error") instead of
#: jumping past the guard into unrelated memory; -no-integrated-cpp
#: preprocesses as a separate pass, exactly as distcc does before it sends
#: the preprocessed text away, so the debug line table (and so every byte of
#: an object) is the same whether a compile ran here or through distcc.
HOST_CXXFLAGS = ("-g", "-std=c++14", "-O2", "-Wall", "-Werror", "-fPIC",
                 "-fno-jump-tables", "-fstack-clash-protection", "-no-integrated-cpp")
#: -Wl,--no-undefined: a kernel the schema names but no source defines (or
#: defines with another signature) is a link error naming the C++ function,
#: not a load failure at test time.
HOST_LINKFLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,--no-undefined")


@dataclass(frozen=True)
class HostToolchain:
    """The host profile: this machine's g++/clang++ and the project runtime.

    ``runtime_include`` is the folder of the host device headers and
    ``runtime_lib`` the host ``libneuroncustomop.a``; ``prefix_map`` maps the
    project root to ``.`` in debug info and ``__FILE__`` (reproducible
    outputs from any directory).
    """

    cxx: str = "g++"
    strip: str = "strip"
    name: str = "host"
    dialect: WrapperDialect = HOST_DIALECT
    packs_with_tool: bool = False
    runs_tests: bool = True

    def _cxx(self, extra: Sequence[str], cflags: Sequence[str], includes: Sequence[str],
             runtime_include: str) -> List[str]:
        """The compiler with the host flags, ``extra``, the user's cflags and
        the include path (the runtime's headers first)."""
        return [self.cxx, *HOST_CXXFLAGS, *extra, *cflags, f"-I{runtime_include}",
                *(f"-I{d}" for d in includes)]

    def compile_command(self, src: str, obj: str, cflags: Sequence[str],
                        includes: Sequence[str], runtime_include: str,
                        prefix_map: Optional[str] = None) -> List[str]:
        """argv that compiles ``src`` into ``obj``."""
        extra = [f"-ffile-prefix-map={prefix_map}=."] if prefix_map else []
        return self._cxx(extra, cflags, includes, runtime_include) + ["-o", obj, "-c", src]

    def callgraph_command(self, src: str, asm: str, cflags: Sequence[str],
                          includes: Sequence[str], runtime_include: str) -> List[str]:
        """argv that writes GCC's call graph with stack usage for ``src``:
        ``<asm without .s>.ci`` (-fcallgraph-info=su), from the same flags as
        the object, stopping after code generation (-S, ``asm``). A separate
        step from the compile, so that a launcher (ccache, distcc), which
        does not bring the .ci file back, never stands in its way."""
        return (self._cxx(["-fcallgraph-info=su"], cflags, includes, runtime_include)
                + ["-o", asm, "-S", src])

    def link_command(self, out: str, objs: Sequence[str], lsp_obj: str,
                     runtime_lib: str) -> List[str]:
        """argv that links one core object: kernels + wrapper + LSP + runtime."""
        return [self.cxx, *HOST_LINKFLAGS, "-o", out, *objs, lsp_obj,
                "-Wl,--whole-archive", runtime_lib, "-Wl,--no-whole-archive"]

    def strip_command(self, linked: str, stripped: str) -> List[str]:
        """argv that writes the stripped object (the pack's payload)."""
        return [self.strip, "--strip-unneeded", "-o", stripped, linked]


XTENSA_TOOLS_DEFAULT = "/opt/aws/neuron/gpsimd/tools/{core}/config"
NEURON_CUSTOM_OP_DEFAULT = "/opt/aws/neuron/gpsimd/custom_op"
#: CC_OPT / LINK_OPT common part (build-front-end.txt §5b, §5c).
XTENSA_COMMON_FLAGS = ("-g", "-std=c++14", "-stdlib=libc++-e", "-fno-jump-tables",
                       "-Os", "-Wall", "-Werror", "-Wno-c99-designator", "-mcoproc")


@dataclass(frozen=True)
class XtensaToolchain:
    """The vendor profile: the driver's exact commands (build-front-end.txt §5).

    ``core`` is ``Q7_CORE`` (default ``ncore2gp``, §5a), ``root`` is
    ``NEURON_CUSTOM_OP`` and ``system`` is ``Q7_TOOLS`` (default derived from
    the core, §5a).
    """

    core: str = "ncore2gp"
    root: str = NEURON_CUSTOM_OP_DEFAULT
    system: Optional[str] = None
    cxx: str = "xt-clang++"
    packer: str = "xt-pkg-loadlib"
    name: str = "xtensa"
    dialect: WrapperDialect = DEVICE_DIALECT
    packs_with_tool: bool = True
    runs_tests: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "XtensaToolchain":
        """Read Q7_CORE, NEURON_CUSTOM_OP and Q7_TOOLS as the driver does (§5a)."""
        core = environ.get("Q7_CORE", "ncore2gp")
        return cls(core=core,
                   root=environ.get("NEURON_CUSTOM_OP", NEURON_CUSTOM_OP_DEFAULT),
                   system=environ.get("Q7_TOOLS", XTENSA_TOOLS_DEFAULT.format(core=core)))

    @property
    def xtensa_system(self) -> str:
        return self.system or XTENSA_TOOLS_DEFAULT.format(core=self.core)

    def _target_flags(self) -> List[str]:
        return [f"--xtensa-core={self.core}", f"--xtensa-system={self.xtensa_system}"]

    def inc(self) -> List[str]:
        """INC of build-front-end.txt §5b (line 41)."""
        r = self.root
        return [f"-I{r}", f"-I{r}/torch/include", f"-I{r}/c10/include"]

    def compile_command(self, src: str, obj: str, cflags: Sequence[str],
                        includes: Sequence[str]) -> List[str]:
        """CC_OPT (§5b): `xt-clang++ ... -c --xtensa-core=.. --xtensa-system=..
        <cflags> <INC> <includes> -o <name>.o <src>`."""
        return [self.cxx, *XTENSA_COMMON_FLAGS, "-MMD", "-MP", "-fpic", "-mlongcalls",
                "-c", *self._target_flags(), *cflags, *self.inc(),
                *(f"-I{d}" for d in includes), "-o", obj, src]

    def linking_libs(self, lsp: LinkerSpec) -> List[str]:
        """LINKING_LIBS of §5c for one linker spec (the only per-core difference)."""
        r = self.root
        return [f"{r}/neuron/libneuroncustomop.a", f"{r}/c10/lib/libc10.a", "-lloader",
                f"-mlsp={r}/lsp_fll_load_cpus/{lsp.name}",
                "-lxmem", "-lhal", "-lc++-e", "-lm", "-lgcc", f"{r}/neuron/libcweak.a"]

    def link_command(self, out: str, objs: Sequence[str], lsp: LinkerSpec) -> List[str]:
        """LINK_OPT + LINKING_LIBS (§5c)."""
        return [self.cxx, *XTENSA_COMMON_FLAGS, *self._target_flags(), *self.inc(),
                "-o", out, *objs, *self.linking_libs(lsp)]

    def pack_command(self, linked: str, packed: str, stripped: str) -> List[str]:
        """STRIP_OPT (§5d): `xt-pkg-loadlib -e lib_func ... -o <base>.packed.so
        -s <base>.stripped.so <lib>`."""
        return [self.packer, "-e", "lib_func", *self._target_flags(),
                "-o", packed, "-s", stripped, linked]
