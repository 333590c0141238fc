"""The test plan of a library, filled from the typed manifest model.

The plan classes live in ``gpsimd_device.plan`` (the contract with the
device model, which never imports the build side); this module turns a
``gpsimd_build.manifest.Library`` into a ``TestPlan``, and says which files
a test run reads and where each vector is written.
"""

from typing import Dict, List, Optional, Sequence, Tuple

from gpsimd_device.plan import (ArgSpec, CorePlan, ExpectedSpec, OpPlan, OutputSpec, RandomSpec,
                                ReferenceSpec, ScalarSpec, TensorSpec, TestPlan, VectorPlan)

from .manifest import Expected, Library, Op, Reference, ScalarInput, TensorInput, Vector

__all__ = ["PLAN_NAME", "SHAPED_PLAN_NAME", "FILES_NAME", "library_plan", "op_plan",
           "plan_locations", "dump_plan", "plan_files"]


def _reference(ref: Reference) -> ReferenceSpec:
    return ReferenceSpec(ref.file, ref.module, ref.function, ref.imports)


def _input(inp, arg_type: str):
    if isinstance(inp, TensorInput):
        r = inp.random
        return TensorSpec(
            inp.name, inp.dtype, tuple(inp.shape) if inp.shape is not None else None,
            RandomSpec(r.distribution, r.seed, r.low, r.high, r.mean, r.std) if r else None,
            inp.values, inp.npy, inp.memory)
    assert isinstance(inp, ScalarInput)
    return ScalarSpec(inp.name, arg_type, inp.dtype, inp.value)


def _expected(exp: Optional[Expected]) -> ExpectedSpec:
    if exp is None:   # a checks-only vector
        return ExpectedSpec()
    if exp.reference is not None:
        return ExpectedSpec(reference=_reference(exp.reference))
    if exp.values is not None:
        return ExpectedSpec(values=exp.values)
    return ExpectedSpec(npy=exp.npy)


def _vector(v: Vector, types: Dict[str, str]) -> VectorPlan:
    return VectorPlan(
        v.name, {i.name: _input(i, types[i.name]) for i in v.inputs},
        OutputSpec(v.output_dtype, tuple(v.output_shape) if v.output_shape is not None else None,
                   v.output_memory, defaulted=v.output_dtype_defaulted),
        _expected(v.expected), v.rtol, v.atol, str(v.location))


def op_plan(op: Op) -> OpPlan:
    """The plan of one manifest op."""
    types = {a.name: a.type for a in op.schema.arguments}
    return OpPlan(op.name, str(op.schema), tuple(ArgSpec(a.name, a.type) for a in op.schema.arguments),
                  op.stack_size, tuple(_vector(v, types) for v in op.vectors),
                  kernel=op.function if op.function != op.name else "", explore=op.explore,
                  reference=_reference(op.reference) if op.reference is not None else None)


#: A library's test plan, in ``<BUILD_DIR>/<profile>/<lib>/``.
PLAN_NAME = "testplan.json"
#: The plan with every output from a shape function (a library with shape
#: sources, on a profile that builds shape libraries): what its test run runs.
SHAPED_PLAN_NAME = "testplan.shaped.json"
#: The list of :func:`plan_files`, in ``<BUILD_DIR>/<profile>/<lib>/``: a
#: source of the test, so that a change of the list itself (a module a
#: reference imported, removed) runs it again where the command does not
#: name the files (the ninja path).
FILES_NAME = "test-inputs.txt"


def library_plan(library: Library, cores: Sequence[Tuple[Optional[int], str, str]]) -> TestPlan:
    """The whole plan of one library.

    ``cores``: one ``(core, lsp_name, object_path)`` per loaded object, in
    core order; ``core`` is None for a single-core library, and
    ``object_path`` is relative to the directory SCons runs in.
    """
    return TestPlan(library.name, library.multicore,
                    tuple(CorePlan(c, lsp, path) for c, lsp, path in cores),
                    tuple(op_plan(op) for op in library.ops))


def plan_locations(library: Library) -> Dict[str, Dict[str, str]]:
    """Where each vector is written: ``{op: {vector: "FILE:LINE:COL"}}``.

    Kept apart from the plan: an edit that only moves lines of the manifest
    must not re-run a library's tests, yet messages must name the new place.
    """
    return {op.name: {v.name: str(v.location) for v in op.vectors}
            for op in library.ops}


def dump_plan(plan: TestPlan) -> str:
    """Serialise a plan deterministically (sorted keys, one trailing newline)."""
    return plan.dumps()


def plan_files(library: Library) -> List[str]:
    """Files a library's test run reads besides its objects: references
    (``file.py`` ones, and the local modules each reference imports,
    ``Reference.imports``), .npy.

    Sorted and unique, so they can be declared as dependencies of the node.
    """
    files = set()
    for op in library.ops:
        for v in op.vectors:
            for i in v.inputs:
                if isinstance(i, TensorInput) and i.npy:
                    files.add(i.npy)
            exp = v.expected
            if exp is None:
                continue
            if exp.reference is not None:
                if exp.reference.file:
                    files.add(exp.reference.file)
                files.update(exp.reference.imports)
            if exp.npy:
                files.add(exp.npy)
    return sorted(files)
