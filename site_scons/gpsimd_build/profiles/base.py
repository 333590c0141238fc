"""The profile interface, and the one place the generated wrapper text may
differ between targets (:class:`WrapperDialect`).

A profile turns a library of the manifest model into graph nodes through a
:class:`Graph` the SCons tool hands it: the tool owns the builders (one per
stage), the profile decides which stages a library has on its target and
with which construction variables. Commands are construction variables
(``$GPSIMD_CXXCOM`` over ``$GPSIMD_CXX``, ``$GPSIMD_CXXFLAGS``,
``$GPSIMD_USER_CFLAGS``, ``$GPSIMD_INCFLAGS``; ``$GPSIMD_LINKCOM``;
``$GPSIMD_STRIP`` (run by ``$GPSIMD_PACKCOM``); ``$GPSIMD_OBJDUMP`` (run by
``$GPSIMD_STACKCOM``); ``$GPSIMD_VENDORPACKCOM``), set by
:meth:`Profile.construction_vars`, so that an SConstruct can ``Append`` to
them as SCons users expect.
"""

import abc
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from gpsimd_device.lsp import LinkerSpec

__all__ = ["WrapperDialect", "HOST_DIALECT", "DEVICE_DIALECT", "ProfileError", "Graph",
           "Shared", "Profile"]


@dataclass(frozen=True)
class WrapperDialect:
    """The two places where the host wrapper text must differ from the device.

    ``fnptr_cast``: the type the launcher casts ``<fn>_wrapper`` to. The
    device is a 32-bit core, so the driver casts to ``uint32_t``
    (the Neuron SDK's build driver, build_custom_op.py); a 64-bit host would truncate the pointer, so
    the host casts to ``uintptr_t``.

    ``switch_back``: the statement that ends a wrapper that ran on a switched
    stack. The device emits the Xtensa jump ``asm("j switchBack");``
    (ARCHITECTURE.md "The generated wrapper"); the host has no such
    instruction and calls the runtime's ``switchBack()``, which returns to
    the launcher the same way.
    """

    fnptr_cast: str
    switch_back: str


DEVICE_DIALECT = WrapperDialect(fnptr_cast="uint32_t", switch_back='asm("j switchBack");')
HOST_DIALECT = WrapperDialect(fnptr_cast="uintptr_t", switch_back="switchBack();")


#: What BUILD_DIR is called in every output (debug information,
#: ``__FILE__``), whatever its name and place, so that two builds of the
#: same sources into different folders give the same bytes.
BUILD_PREFIX = "build"


def prefix_maps(top: str, build_dir: str) -> List[str]:
    """The compiler's ``-ffile-prefix-map`` flags that make outputs
    independent of where the project and BUILD_DIR are: ``top`` (absolute)
    becomes ``.``, ``build_dir`` (as the graph names it: relative to
    ``top`` when inside it, else absolute) and its absolute path become
    :data:`BUILD_PREFIX`. GCC and Clang apply the last map that matches, so
    BUILD_DIR's come after ``top``'s."""
    maps = [f"-ffile-prefix-map={top}=."]
    absolute = os.path.normpath(os.path.join(top, build_dir))
    if absolute != os.path.normpath(top):
        maps.append(f"-ffile-prefix-map={absolute}/={BUILD_PREFIX}/")
        relative = os.path.normpath(build_dir)
        if not os.path.isabs(relative):
            maps.append(f"-ffile-prefix-map={relative}/={BUILD_PREFIX}/")
    return maps


class ProfileError(Exception):
    """A profile cannot be used here (unknown name, a missing tool); the
    message is one line for the user."""


class Graph(Protocol):
    """What the SCons tool offers a profile: one method per stage, each
    adding a node and returning it (an opaque handle the profile passes
    back). ``vars`` are construction-variable overrides of that node."""

    def source(self, path: str) -> Any: ...
    def dir_path(self, path: str) -> str: ...
    def compile(self, target: str, source: Any, **vars: Any) -> Any: ...
    def depends(self, node: Any, on: Any) -> None: ...
    def archive(self, target: str, objects: Sequence[Any]) -> Any: ...
    def stack_graph(self, target: str, objects: Sequence[Any]) -> Any: ...
    def text(self, target: str, text: str) -> Any: ...
    def link(self, target: str, sources: Sequence[Any], **vars: Any) -> Any: ...
    def host_pack(self, members: Sequence[Tuple[str, Any, Mapping[str, Any]]]) -> List[Any]: ...
    def vendor_pack(self, base: str, linked: Any) -> Any: ...


@dataclass
class Shared:
    """The nodes a profile builds once for every library (the host runtime,
    the LSP objects), by name, the graph of functions every stack report also
    reads (``stack_graph``: the runtime's), and the header folder every compile of a
    kernel sees first (None: none of ours)."""

    include: Optional[str] = None
    nodes: Dict[str, List[Any]] = field(default_factory=dict)
    stack_graph: List[Any] = field(default_factory=list)

    def all(self) -> List[Any]:
        """Every shared node, in a stable order."""
        return [n for key in sorted(self.nodes) for n in self.nodes[key]]


class Profile(abc.ABC):
    """One target. Attributes: ``name`` (the output folder under BUILD_DIR),
    ``dialect`` (:class:`WrapperDialect`), ``runs_tests`` (its objects run
    on the emulator: test plans, stack reports and test nodes exist),
    ``programs`` (what must be on PATH)."""

    name: str = ""
    dialect: WrapperDialect = HOST_DIALECT
    runs_tests: bool = False
    programs: Sequence[str] = ()

    @classmethod
    @abc.abstractmethod
    def configure(cls, environ: Mapping[str, str], cxx: str) -> "Profile":
        """The profile for this machine: ``environ`` is the shell's
        environment, ``cxx`` the host compiler option."""

    def missing_program(self, which) -> Optional[str]:
        """The first of ``programs`` that ``which(name)`` does not find, as the
        driver's own message (the Neuron SDK's build driver, build_custom_op.py: "Could not find
        xt-clang++"), or None."""
        for program in self.programs:
            if not which(program):
                return f"Could not find {program}"
        return None

    @abc.abstractmethod
    def construction_vars(self, top: str, build_dir: str, launcher: str = "",
                          linker: str = "auto") -> Dict[str, Any]:
        """The commands and flags of this target as construction variables
        (``top``: the project root, mapped to ``.`` in debug info;
        ``build_dir``: BUILD_DIR as the graph names it, relative to ``top``
        or absolute, mapped to :data:`BUILD_PREFIX` (:func:`prefix_maps`);
        ``launcher``: the compiler launcher in use, "" for none;
        ``linker``: the ``LINKER`` option, ``auto``, ``gold`` or ``bfd``,
        for a profile whose toolchain lets the build choose)."""

    def shared(self, graph: Graph, profile_dir: str) -> Shared:
        """Build the nodes every library shares (default: none)."""
        return Shared()

    def compile_vars(self, shared: Shared, includes: Sequence[str],
                     cflags: Sequence[str]) -> Dict[str, Any]:
        """Construction variables of a library's compiles: its ``cflags`` and
        ``includes`` (root-relative folders)."""
        return {"GPSIMD_USER_CFLAGS": list(cflags),
                "GPSIMD_INCFLAGS": [f"-I{d}" for d in
                                    ([shared.include] if shared.include else []) + list(includes)]}

    def object_side_effects(self, obj: str) -> List[str]:
        """Files a compile of ``obj`` writes besides it (default: none)."""
        return []

    def depfile(self, obj: str) -> Optional[str]:
        """Where a compile of ``obj`` (a path as the graph names it)
        writes the compiler's depfile: every file the compile read
        (``gpsimd_build.depfile``), which the build makes the object
        depend on; None when its compiles write none (default)."""
        return None

    @abc.abstractmethod
    def link(self, graph: Graph, target: str, objects: Sequence[Any], spec: LinkerSpec,
             shared: Shared) -> Any:
        """Link one core object ``target`` from ``objects`` for ``spec``."""

    @abc.abstractmethod
    def package(self, graph: Graph, members: Sequence[Tuple[str, Any, LinkerSpec]],
                library: str) -> List[Any]:
        """Pack a library's linked objects, given as ``(base, linked node,
        linker spec)`` per core, each into ``<base>.packed.so`` and
        ``<base>.stripped.so``; returns the loadable node of each, in the
        order given."""

    #: Whether :meth:`shape_library` builds a host shape library (the
    #: build then checks the registration and takes outputs from the shape
    #: functions); without it the shape sources go to torch-neuronx's build.
    builds_shape_library = False

    def shape_library(self, graph: Graph, target: str, objects: Sequence[Any],
                      shared: Shared) -> Any:
        """Link a library's host shape library ``target`` (a shared object
        the build loads to read the registration and call the shape
        functions) from its compiled shape sources (only when
        :attr:`builds_shape_library`)."""
        raise NotImplementedError(f"the {self.name} profile builds no shape library")
