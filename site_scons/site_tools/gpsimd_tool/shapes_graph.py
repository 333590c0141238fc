"""The shape-function nodes of a library with ``shape_sources``
(ARCHITECTURE.md; docs/shape-functions.md).

Under ``<BUILD_DIR>/<profile>/<lib>/shapes/``:

* ``obj/<source>.o``: each shape source compiled for the host, with the
  library's includes and cflags (never linked into a core object);
* ``<lib>_shapes.so``: the host shape library (the profile links it;
  ``Profile.shape_library``);
* ``registration.json``: what it registers, read in a subprocess
  (``python -m gpsimd_emu.shapes registration``);
* ``manifest-ops.json``: the manifest's side (text written while the graph
  is read, ``gpsimd_build.regcheck.manifest_facts``);
* ``registration-check.txt``: the check node
  (``python -m gpsimd_build.steps check-registration``); a mismatch fails
  it with located errors, and the library's tests wait for it;

and ``<lib>/testplan.shaped.json``: the test plan with every vector's output
from its op's shape function (``python -m gpsimd_emu.shapes outputs``, from
``registration.json``), which the test node runs instead of ``testplan.json``.

The registration, the check and the shaped plan are made by the
emulator's and the device facts' code (``gpsimd_emu.shapes``,
``gpsimd_device.shapes``): each depends on the emulator's files, as the
test node does, so that an edit of that code makes them again instead of
running the tests on a plan the old code shaped.

``scons schemas`` prints every op's schema in canonical form (derived ones
included) from ``<lib>/schemas.txt``, written for every library.
"""

from typing import Any, List, Optional

import SCons.Builder

from gpsimd_build import testplan
from gpsimd_build.buildnames import source_stem
from gpsimd_build.regcheck import manifest_facts

from .signature import SignedCommand

__all__ = ["add_shape_builders", "schemas_text", "ShapeNodes", "shape_nodes"]


def add_shape_builders(env) -> None:
    """The builders and commands of the shape nodes (idempotent)."""
    env.SetDefault(
        GPSIMD_REGCOM="$PYTHON -m gpsimd_emu.shapes registration $SOURCE -o $TARGET",
        GPSIMD_REGCHECKCOM="$GPSIMD_STEP check-registration -o $TARGET $SOURCES",
        GPSIMD_SHAPEDCOM="$PYTHON -m gpsimd_emu.shapes outputs $SOURCES -o $TARGET",
        GPSIMD_REGCOMSTR="SHAPES   $TARGET",
        GPSIMD_REGCHECKCOMSTR="CHECK    $TARGET",
        GPSIMD_SHAPEDCOMSTR="SHAPES   $TARGET",
    )
    if "GpsimdRegistration" in env["BUILDERS"]:
        return
    env.Append(BUILDERS={
        "GpsimdRegistration": SCons.Builder.Builder(
            action=SignedCommand("GPSIMD_REGCOM", "$GPSIMD_REGCOMSTR")),
        "GpsimdRegistrationCheck": SCons.Builder.Builder(
            action=SignedCommand("GPSIMD_REGCHECKCOM", "$GPSIMD_REGCHECKCOMSTR")),
        "GpsimdShapedPlan": SCons.Builder.Builder(
            action=SignedCommand("GPSIMD_SHAPEDCOM", "$GPSIMD_SHAPEDCOMSTR")),
    })


def schemas_text(lib) -> str:
    """One line per op of ``lib``: its canonical schema, then ``# derived
    from the shape function`` or ``# kernel <name>`` when that applies."""
    lines = []
    for op in lib.ops:
        notes = []
        if op.schema_derived:
            notes.append("derived from its shape function")
        if op.function != op.name:
            notes.append(f"kernel {op.function}")
        lines.append(str(op.schema) + (f"   # {'; '.join(notes)}" if notes else ""))
    return "\n".join(lines) + "\n"


class ShapeNodes:
    """The nodes of one library's shape functions (module text)."""

    def __init__(self, objects: List[Any], library: Any, registration: List[Any],
                 check: List[Any], plan: List[Any]):
        self.objects, self.library = objects, library
        self.registration, self.check, self.plan = registration, check, plan

    def all(self) -> List[Any]:
        return self.objects + [self.library] + self.registration + self.check + self.plan


def shape_nodes(env, graph, profile, shared, lib, lib_dir: str, compile_vars,
                plan_node: List[Any], emulator: List[Any]) -> Optional[ShapeNodes]:
    """Add the shape nodes of ``lib`` (None when it has no shape sources or
    the profile builds no shape library); ``emulator``: the emulator's
    files, a dependency of every step here that runs its code."""
    if not lib.shape_sources or not profile.builds_shape_library:
        return None
    add_shape_builders(env)
    objects = [graph.compile(f"{lib_dir}/shapes/obj/{source_stem(src)}.o", graph.source(src),
                             **compile_vars) for src in lib.shape_sources]
    so = profile.shape_library(graph, f"{lib_dir}/shapes/{lib.name}_shapes.so", objects, shared)
    registration = graph.uses(env.GpsimdRegistration(f"{lib_dir}/shapes/registration.json", so),
                              "$PYTHON")
    facts = graph.text(f"{lib_dir}/shapes/manifest-ops.json", manifest_facts(lib))
    check = graph.step(env.GpsimdRegistrationCheck(f"{lib_dir}/shapes/registration-check.txt",
                                                   [facts] + registration))
    plan = graph.uses(env.GpsimdShapedPlan(f"{lib_dir}/{testplan.SHAPED_PLAN_NAME}",
                                           [so] + registration + plan_node), "$PYTHON")
    env.Depends(plan, check)
    env.Depends(registration + check + plan, emulator)
    return ShapeNodes(objects, so, registration, check, plan)
