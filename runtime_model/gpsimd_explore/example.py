"""The failing example explore found, as a vector: the plan's vector the
search runs (:func:`example_vector`) and the YAML to paste under the op's
``vectors:`` (:func:`vector_yaml`), its large or non-finite inputs saved
as ``.npy`` files (whole-or-nothing, never through a planted link)."""

from __future__ import annotations

import io
import math
import os
from typing import Dict, List, Sequence

import numpy as np

from gpsimd_device.atomic import write_atomically
from gpsimd_device.dtypes import TOLERANCES
from gpsimd_device.plan import VectorPlan

__all__ = ["INLINE_ELEMENTS", "example_vector", "vector_yaml"]

#: Values written out in the YAML vector when an input has at most this
#: many elements, all finite; else an ``.npy`` file.
INLINE_ELEMENTS = 16


def _save(path: str, arr: np.ndarray) -> None:
    """``arr`` as the ``.npy`` file ``path``, written whole-or-nothing
    through a new file (a link planted at ``path`` is replaced, never
    followed: ``gpsimd_device.atomic``)."""
    buffer = io.BytesIO()
    np.save(buffer, arr, allow_pickle=False)
    write_atomically(path, buffer.getvalue(), make_folder=True)


def example_vector(template: VectorPlan, arrays: Dict[str, np.ndarray], name: str, folder: str,
            root: str) -> VectorPlan:
    """``template`` with ``arrays`` as its tensor inputs (each an ``.npy``
    file in ``folder``, named relative to ``root``) and no fixed output."""
    doc = template.to_json()
    doc["name"] = name
    given = doc["output"]
    doc["output"] = {"dtype": given.get("dtype"), "shape": None,   # (its location kept)
                     **{k: given[k] for k in ("location", "defaulted") if k in given}}
    for arg, arr in arrays.items():
        if not isinstance(arr, np.ndarray):     # (a drawn scalar)
            doc["inputs"][arg]["value"] = arr
            continue
        path = os.path.join(folder, f"{arg}.npy")
        _save(path, arr)
        given = doc["inputs"][arg]
        doc["inputs"][arg] = {"kind": "tensor", "dtype": given["dtype"],
                              "shape": list(arr.shape), "npy": os.path.relpath(path, root),
                              **({"location": given["location"]} if "location" in given else {})}
    return VectorPlan.from_json(doc, name)


def _yaml_scalar(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):       # (YAML's spellings: `nan` would be read as a string)
        return ".nan"
    if math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    return repr(x)


def _yaml_values(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_yaml_values(x) for x in v) + "]"
    return _yaml_scalar(v)


def vector_yaml(template: VectorPlan, arrays: Dict[str, np.ndarray], name: str,
                save_dir: str, prefix: str, stem: str, order: Sequence[str] = ()) -> str:
    """The YAML of a vector with ``arrays`` as its tensor inputs and drawn
    scalars (else ``template``'s), ready to paste under an op's ``vectors:`` (the
    op's reference is the op's own); an input with more than
    :data:`INLINE_ELEMENTS` elements or one that is not finite is written
    to ``save_dir/stem.<arg>.npy`` and named ``prefix`` + that file name
    (a drawn NaN or subnormal is kept exactly); with the template's
    tolerances, output dtype and locations (:func:`_judgement`), so that
    pasted it is judged as explore judged it. ``order``: the op's
    argument names, the order the inputs are written in (the schema's;
    default the template's)."""
    lines = [f"- name: {name}", "  inputs:"]
    names = [a for a in order if a in template.inputs] + [
        a for a in template.inputs if a not in order]
    for arg, spec in ((a, template.inputs[a]) for a in names):
        if not isinstance(arrays.get(arg), np.ndarray):     # (a scalar: drawn, or the template's)
            lines.append(f"    {arg}: {_yaml_scalar(arrays.get(arg, spec.value))}")
            continue
        arr = arrays[arg]
        dtype, shape = spec.dtype, list(arr.shape)
        where = f", location: {spec.location}" if getattr(spec, "location", "hbm") != "hbm" else ""
        wide = arr.astype(np.float64) if arr.dtype.kind not in "iub" else arr
        if arr.size <= INLINE_ELEMENTS and bool(np.all(np.isfinite(wide))):
            values = _yaml_values(wide.tolist() if arr.dtype.kind != "b" else arr.tolist())
            lines.append(f"    {arg}: {{dtype: {dtype}, shape: {shape}, values: {values}{where}}}")
        else:
            file = f"{stem}.{arg}.npy"
            _save(os.path.join(save_dir, file), arr)
            # (the .npy gives the shape: the manifest refuses both)
            lines.append(f"    {arg}: {{dtype: {dtype}, npy: {prefix}{file}{where}}}")
    return "\n".join(lines + _judgement(template)) + "\n"


def _judgement(template: VectorPlan) -> List[str]:
    """The YAML lines of what the judgement of ``template``'s examples used
    besides the inputs and the op's reference: its tolerances where they
    are not its output dtype's defaults (a vector's ``rtol: 0``, or the
    op's), its output's dtype where the manifest gave one and its
    location, so that pasted the example is judged as explore judged it."""
    out = template.output
    default = TOLERANCES.get(out.dtype, (None, None)) if out.dtype else (None, None)
    lines = []
    output = []
    if out.dtype and not out.defaulted and out.source is None:
        output.append(f"dtype: {out.dtype}")
    if out.location != "hbm":
        output.append(f"location: {out.location}")
    if output:
        lines.append(f"  output: {{{', '.join(output)}}}")
    for key, value, usual in (("rtol", template.rtol, default[0]),
                              ("atol", template.atol, default[1])):
        if value is not None and value != usual:
            lines.append(f"  {key}: {_yaml_scalar(value)}")
    return lines
