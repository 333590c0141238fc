"""The registration check: what a library's compiled shape library
registered (``gpsimd_device.shapes.Registration``, read by ``python -m
gpsimd_emu.shapes registration``) against what its manifest says
(:func:`manifest_facts`), before any test runs (docs/shape-functions.md).

Build step::

    python -m gpsimd_build.steps check-registration -o CHECK FACTS REGISTRATION

Every mismatch is one located line ``FILE:LINE:COL: library 'L'[, op 'O']:
message (SHAPE_SOURCE:LINE)`` naming the manifest place and the shape
source: the ``NEURON_LIBRARY`` (exactly one, not ``builtin``, the namespace
of explicit schemas), an op of the manifest without an ``m.def`` or the
reverse, an op registered twice, more than 10 registrations, each op's
kernel name, and each shape function's C++ parameters (count and kind)
against the op's schema, with the type map of ``gpsimd_device.shapes``
(which says where the public guide and the shipped codegen disagree).
Stdlib only; no SCons.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from gpsimd_device.shapes import SCHEMA_TYPES, Registration, RegisteredOp, accepted_spellings

__all__ = ["MAX_REGISTRATIONS", "manifest_facts", "check_registration", "check_text"]

#: Functions one custom-op library may register (docs/kernel-api.md, Limits).
MAX_REGISTRATIONS = 10
RESERVED = "builtin"


def manifest_facts(lib) -> str:
    """The facts of a manifest library (``gpsimd_build.manifest.model.Library``
    with shape sources) the check needs, as sorted JSON text: its name and
    location, its shape sources, and per op its name, kernel (and whether
    ``kernel:`` gave it), location, schema namespace and arguments."""
    return json.dumps({
        "library": lib.name, "where": str(lib.location),
        "shape_sources": list(lib.shape_sources),
        "ops": [{"name": op.name, "kernel": op.function, "kernel_given": op.kernel_given,
                 "where": str(op.location), "derived": op.schema_derived,
                 "namespace": op.schema.namespace,
                 "args": [[a.name, a.type] for a in op.schema.arguments]}
                for op in lib.ops]}, sort_keys=True, indent=1) + "\n"


def _params_text(reg: RegisteredOp) -> str:
    return ", ".join(s for _, s in reg.params) or "no parameters"


def _check_op(op: Dict[str, Any], reg: RegisteredOp, out: List[str], head: str) -> None:
    at = f" ({reg.where})"
    fn = reg.function_name
    if reg.kernel != op["kernel"]:
        if op["kernel_given"]:
            out.append(f"{head}: kernel: '{op['kernel']}' disagrees with the registration "
                       f"m.def(\"{reg.op}\", &{fn}, \"{reg.kernel}\"){at}: the kernel name is "
                       "the m.def's third argument; change one of them")
        else:
            out.append(f"{head}: the registration names kernel '{reg.kernel}' "
                       f"(m.def(\"{reg.op}\", &{fn}, \"{reg.kernel}\")){at}, but the manifest "
                       f"read '{op['kernel']}' from the source text (a macro?): give kernel:")
    if not reg.returns_tensor:
        out.append(f"{head}: the shape function {fn} returns '{reg.returns}', not "
                   f"torch::Tensor{at}")
    args = op["args"]
    if len(reg.params) != len(args):
        schema = ", ".join(f"{t} {n}" for n, t in args) or "no arguments"
        out.append(f"{head}: the shape function {fn} takes {len(reg.params)} parameter(s) "
                   f"({_params_text(reg)}), but the op's schema has {len(args)} argument(s) "
                   f"({schema}){at}: a shape function has the kernel's parameters")
        return
    for k, ((kind, spelling), (name, type_)) in enumerate(zip(reg.params, args)):
        if type_ in SCHEMA_TYPES.get(kind, ()):
            continue
        out.append(f"{head}: parameter {k + 1} of the shape function {fn} is '{spelling}', but "
                   f"argument '{name}' of the op's schema is {type_}, which a shape function "
                   f"writes as {accepted_spellings(type_)}{at}")


def check_registration(facts: Dict[str, Any], registration: Registration) -> List[str]:
    """Every mismatch between the manifest ``facts`` (:func:`manifest_facts`)
    and ``registration``, one located line each (module text); [] when
    they agree."""
    out: List[str] = []
    lib, where = facts["library"], facts["where"]
    head = f"{where}: library '{lib}'"
    sources = ", ".join(facts["shape_sources"])
    blocks = registration.libraries
    namespace = None
    if not blocks:
        out.append(f"{head}: its shape sources ({sources}) run no NEURON_LIBRARY(<name>, m) "
                   "block: include \"torchneuron/register.h\" and register the ops in one")
    elif len({b.name for b in blocks}) > 1:
        places = ", ".join(f"{b.name} ({b.where})" for b in blocks)
        out.append(f"{head}: its shape sources open more than one NEURON_LIBRARY ({places}): "
                   "a library registers its ops in one")
    else:
        namespace = blocks[0].name
        if namespace == RESERVED:
            out.append(f"{head}: NEURON_LIBRARY({RESERVED}, m) ({blocks[0].where}): the name "
                       f"'{RESERVED}' is reserved")
    by_op = registration.by_op()
    if len(registration.ops) > MAX_REGISTRATIONS:
        out.append(f"{head}: its shape sources register {len(registration.ops)} ops, more "
                   f"than the {MAX_REGISTRATIONS} functions a library may have "
                   f"({registration.ops[MAX_REGISTRATIONS].where} is the "
                   f"{MAX_REGISTRATIONS + 1}th)")
    names = [op["name"] for op in facts["ops"]]
    for op in facts["ops"]:
        ohead = f"{op['where']}: library '{lib}', op '{op['name']}'"
        if namespace and op["namespace"] and op["namespace"] != namespace:
            out.append(f"{ohead}: the schema's namespace '{op['namespace']}' is not the "
                       f"library's NEURON_LIBRARY name '{namespace}' ({blocks[0].where}): "
                       "torch calls the op as torch.ops.<that name>.<op>")
        regs = by_op.get(op["name"], [])
        if not regs:
            known = ", ".join(sorted(by_op)) or "none"
            out.append(f"{ohead}: no m.def(\"{op['name']}\", ...) in the shape sources "
                       f"({sources}; they register: {known})")
            continue
        if len(regs) > 1:
            places = ", ".join(r.where for r in regs)
            out.append(f"{ohead}: registered more than once ({places})")
        _check_op(op, regs[0], out, ohead)
    for name, regs in by_op.items():
        if name not in names:
            out.append(f"{head}: m.def(\"{name}\", &{regs[0].function_name}, "
                       f"\"{regs[0].kernel}\") ({regs[0].where}) registers op '{name}', which "
                       f"the manifest does not list (its ops: {', '.join(names)}): add it or "
                       "remove the m.def")
    return out


def check_text(facts: Dict[str, Any], registration: Registration) -> str:
    """What a passing check writes: one line per op, ``op -> kernel
    (shape function, FILE:LINE)``, in manifest order."""
    by_op = registration.by_op()
    lines = [f"{facts['library']}: registration matches the manifest"]
    for op in facts["ops"]:
        reg = by_op[op["name"]][0]
        lines.append(f"  {op['name']} -> kernel {reg.kernel} (shape function "
                     f"{reg.function_name}, {reg.where})")
    return "\n".join(lines) + "\n"
