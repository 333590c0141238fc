"""The ``xtensa`` profile: the exact commands of the Neuron SDK's build
driver, ``build_custom_op.py`` (ARCHITECTURE.md "The vendor driver's commands"):
compile (its CC_OPT), link once per linker spec with ``-mlsp=`` (LINK_OPT +
LINKING_LIBS), strip and pack with ``xt-pkg-loadlib -e lib_func``
(STRIP_OPT); the same environment knobs (``Q7_CORE``, ``NEURON_CUSTOM_OP``,
``Q7_TOOLS``) and output names.
Nothing runs (no emulator for the device's objects).
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from gpsimd_device.lsp import LinkerSpec

from .base import DEVICE_DIALECT, Graph, Profile, Shared

__all__ = ["XTENSA_TOOLS_DEFAULT", "NEURON_CUSTOM_OP_DEFAULT", "XTENSA_COMMON_FLAGS",
           "XtensaProfile"]

XTENSA_TOOLS_DEFAULT = "/opt/aws/neuron/gpsimd/tools/{core}/config"
NEURON_CUSTOM_OP_DEFAULT = "/opt/aws/neuron/gpsimd/custom_op"
#: CC_OPT / LINK_OPT common part (the Neuron SDK's build driver, build_custom_op.py).
XTENSA_COMMON_FLAGS = ("-g", "-std=c++14", "-stdlib=libc++-e", "-fno-jump-tables",
                       "-Os", "-Wall", "-Werror", "-Wno-c99-designator", "-mcoproc")


class XtensaProfile(Profile):
    """The vendor profile. ``core`` is ``Q7_CORE`` (default ``ncore2gp``),
    ``root`` is ``NEURON_CUSTOM_OP`` and ``system`` is ``Q7_TOOLS``
    (default derived from the core)."""

    name = "xtensa"
    dialect = DEVICE_DIALECT
    runs_tests = False

    def __init__(self, core: str = "ncore2gp", root: str = NEURON_CUSTOM_OP_DEFAULT,
                 system: Optional[str] = None, cxx: str = "xt-clang++",
                 packer: str = "xt-pkg-loadlib"):
        self.core = core
        self.root = root
        self.system = system or XTENSA_TOOLS_DEFAULT.format(core=core)
        self.cxx = cxx
        self.packer = packer
        self.programs = (cxx, packer)

    @classmethod
    def configure(cls, environ: Mapping[str, str], cxx: str) -> "XtensaProfile":
        """Read Q7_CORE, NEURON_CUSTOM_OP and Q7_TOOLS as the driver does."""
        core = environ.get("Q7_CORE", "ncore2gp")
        return cls(core=core, root=environ.get("NEURON_CUSTOM_OP", NEURON_CUSTOM_OP_DEFAULT),
                   system=environ.get("Q7_TOOLS", XTENSA_TOOLS_DEFAULT.format(core=core)))

    def target_flags(self) -> List[str]:
        """``--xtensa-core=<core> --xtensa-system=<system>``."""
        return [f"--xtensa-core={self.core}", f"--xtensa-system={self.system}"]

    def inc(self) -> List[str]:
        """INC of the Neuron SDK's build driver, build_custom_op.py (line 41)."""
        r = self.root
        return [f"-I{r}", f"-I{r}/torch/include", f"-I{r}/c10/include"]

    def linking_libs(self, lsp: LinkerSpec) -> List[str]:
        """The driver's LINKING_LIBS for one linker spec (the only per-core difference)."""
        r = self.root
        return [f"{r}/neuron/libneuroncustomop.a", f"{r}/c10/lib/libc10.a", "-lloader",
                f"-mlsp={r}/lsp_fll_load_cpus/{lsp.name}",
                "-lxmem", "-lhal", "-lc++-e", "-lm", "-lgcc", f"{r}/neuron/libcweak.a"]

    def construction_vars(self, top: str, build_dir: str, launcher: str = "",
                          linker: str = "auto") -> Dict[str, Any]:
        # (the vendor's xt-clang++ links: ``linker`` does not apply)
        return {
            "GPSIMD_CXX": self.cxx,
            "GPSIMD_CXXFLAGS": list(XTENSA_COMMON_FLAGS),
            "GPSIMD_TARGETFLAGS": self.target_flags(),
            "GPSIMD_INC": self.inc(),
            # the driver's CC_OPT
            "GPSIMD_CXXCOM": ("$( $GPSIMD_LAUNCHER $) $GPSIMD_CXX $GPSIMD_CXXFLAGS -MMD -MP "
                              "-fpic -mlongcalls -c $GPSIMD_TARGETFLAGS $GPSIMD_USER_CFLAGS "
                              "$GPSIMD_INC $GPSIMD_INCFLAGS -o $TARGET $SOURCE"),
            # its LINK_OPT + LINKING_LIBS
            "GPSIMD_LINKCOM": ("$GPSIMD_CXX $GPSIMD_CXXFLAGS $GPSIMD_TARGETFLAGS $GPSIMD_INC "
                               "-o $TARGET $SOURCES $GPSIMD_LINKING_LIBS"),
            "GPSIMD_PACKER": self.packer,
            # its STRIP_OPT
            "GPSIMD_VENDORPACKCOM": ("$GPSIMD_PACKER -e lib_func $GPSIMD_TARGETFLAGS "
                                     "-o ${TARGETS[0]} -s ${TARGETS[1]} $SOURCE"),
        }

    def object_side_effects(self, obj: str) -> List[str]:
        """-MMD -MP writes ``<obj without .o>.d`` beside each object."""
        return [self.depfile(obj)]

    def depfile(self, obj: str) -> Optional[str]:
        """``<obj without .o>.d``, the vendor command's -MMD -MP (which
        leaves out headers found in system folders: ``-isystem``, the
        toolchain's)."""
        return obj[:-2] + ".d" if obj.endswith(".o") else obj + ".d"

    def link(self, graph: Graph, target: str, objects: Sequence[Any], spec: LinkerSpec,
             shared: Shared) -> Any:
        return graph.link(target, list(objects), GPSIMD_LINKING_LIBS=self.linking_libs(spec))

    def package(self, graph: Graph, members: Sequence[Tuple[str, Any, LinkerSpec]],
                library: str) -> List[Any]:
        """``xt-pkg-loadlib`` once per core (the Neuron SDK's build driver, build_custom_op.py)."""
        return [graph.vendor_pack(base, linked) for base, linked, _ in members]
