"""The test plan: what the emulated-runtime node runs for one library.

The plan is the only thing the build hands the device model (which never
imports the build side): JSON with sorted keys, described in
ARCHITECTURE.md "The test plan". Its bytes change exactly when something
the emulator would do differently changes (a vector, a reference, an op,
the objects), so SCons re-runs a library's tests only then.
"""

import json
from typing import Iterable, List, Optional, Sequence, Tuple

PLAN_FORMAT = 1


def _reference(ref) -> dict:
    return {"file": ref.file, "module": ref.module, "function": ref.function}


def _input(inp, arg_type: str) -> dict:
    if arg_type == "Tensor":
        d = {"kind": "tensor", "dtype": inp.dtype,
             "shape": list(inp.shape) if inp.shape is not None else None}
        if inp.random is not None:
            d["random"] = dict(inp.random)
        elif inp.values is not None:
            d["values"] = inp.values
        else:
            d["npy"] = inp.npy
        if getattr(inp, "memory", "hbm") != "hbm":
            d["location"] = inp.memory   # customop-marshalling.txt §2 SBUF arm
        return d
    return {"kind": "scalar", "type": arg_type, "dtype": inp.dtype,
            "value": inp.value}


def _expected(exp) -> dict:
    if exp.reference is not None:
        return {"reference": _reference(exp.reference)}
    if exp.values is not None:
        return {"values": exp.values}
    return {"npy": exp.npy}


def _output(v) -> dict:
    """The plan's ``output`` of a vector: dtype, shape (None: the expected
    array's) and, only when not the default HBM, ``location`` "sbuf"."""
    d = {"dtype": v.output_dtype,
         "shape": list(v.output_shape) if v.output_shape is not None else None}
    if getattr(v, "output_memory", "hbm") != "hbm":
        d["location"] = v.output_memory
    return d


def op_plan(op) -> dict:
    """The plan entry of one manifest op (gpsimd_build.manifest.Op)."""
    types = {a.name: a.type for a in op.schema.arguments}
    vectors = []
    for v in op.vectors:
        vectors.append({
            "name": v.name,
            "inputs": {i.name: _input(i, types[i.name]) for i in v.inputs},
            "output": _output(v),
            "expected": _expected(v.expected),
            "rtol": v.rtol,
            "atol": v.atol,
        })
    return {
        "name": op.name,
        "schema": str(op.schema),
        "args": [{"name": a.name, "type": a.type} for a in op.schema.arguments],
        "stack_size": op.stack_size,
        "vectors": vectors,
    }


def library_plan(library, cores: Sequence[Tuple[Optional[int], str, str]]) -> dict:
    """The whole plan of one library.

    ``cores``: one ``(core, lsp_name, object_path)`` per loaded object, in
    core order; ``core`` is None for a single-core library, and
    ``object_path`` is relative to the directory SCons runs in.
    """
    return {
        "format": PLAN_FORMAT,
        "library": library.name,
        "multicore": library.multicore,
        "cores": [{"core": c, "lsp": lsp, "object": path}
                  for c, lsp, path in cores],
        "ops": [op_plan(op) for op in library.ops],
    }


def plan_locations(library) -> dict:
    """Where each vector is written: ``{op: {vector: "FILE:LINE:COL"}}``.

    Kept apart from the plan: an edit that only moves lines of the manifest
    must not re-run a library's tests, yet messages must name the new place.
    """
    return {op.name: {v.name: str(v.location) for v in op.vectors}
            for op in library.ops}


def dump_plan(plan: dict) -> str:
    """Serialise a plan deterministically (sorted keys, one trailing newline)."""
    return json.dumps(plan, sort_keys=True, indent=1) + "\n"


def plan_files(library) -> List[str]:
    """Files a library's test run reads besides its objects: references, .npy.

    Sorted and unique, so they can be declared as dependencies of the node.
    """
    files = set()
    for op in library.ops:
        for v in op.vectors:
            for i in v.inputs:
                if getattr(i, "npy", None):
                    files.add(i.npy)
            exp = v.expected
            if exp.reference is not None and exp.reference.file:
                files.add(exp.reference.file)
            if exp.npy:
                files.add(exp.npy)
    return sorted(files)
