"""Test-vector inputs and expected outputs, from the test plan
(``gpsimd_device.plan``: ``TensorSpec``, ``ScalarSpec``, ``VectorPlan``...).

Every problem with the plan itself (unknown dtype, bad shape, missing file, reference that cannot be
imported or raises) is a ``PlanError`` whose message becomes the failure line
of the vector; nothing here lets a traceback escape.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from gpsimd_device.plan import OpPlan, PlanError, ScalarSpec, TensorSpec, VectorPlan

from . import dtypes as dt
from .convert import kind, read_list, to_dtype
from .sourceonly import load_reference, reference_scope, short_exc, user_frame

__all__ = [
    "PlanError", "Input", "LOCATIONS", "location_of", "make_tensor", "make_scalar", "make_inputs",
    "expected_output", "output_shape", "tolerances",
]


@dataclass(frozen=True)
class Input:
    """One argument of a vector, in schema order.

    Attributes:
        name: the schema argument name.
        kind: ``"tensor"`` or ``"scalar"``.
        dtype: its device dtype (scalars: the plan's ``dtype``).
        array: the data written to HBM (a 0-D array for a scalar).
        value: what the reference gets: the array for a tensor, a Python
            ``int``/``float`` (as the device sees it, e.g. rounded to
            float32) for a scalar.
        location: ``"hbm"`` (default) or ``"sbuf"``: the storage arm of its
            descriptor (the device ABI (gpsimd_host/abi.h) location byte +0);
            scalars are always in HBM.
    """

    name: str
    kind: str
    dtype: dt.DType
    array: np.ndarray
    value: Any
    location: str = "hbm"


def _dtype(name) -> dt.DType:
    try:
        return dt.by_name(name)
    except KeyError as e:
        raise PlanError(str(e.args[0])) from None


def _shape(shape, what: str) -> Optional[Tuple[int, ...]]:
    if shape is None:
        return None
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise PlanError(f"{what}: bad shape {shape!r} (a list of non-negative ints)")
    return tuple(shape)


def _load_npy(path: str, root: str, what: str) -> np.ndarray:
    try:       # (a path relative to root; os.path.join keeps an absolute one)
        return np.load(os.path.join(root, path), allow_pickle=False)
    except (OSError, ValueError) as e:
        raise PlanError(f"{what}: cannot load {path}: {e}") from None


def make_tensor(spec: TensorSpec, root: str = ".", what: str = "input") -> np.ndarray:
    """The data of a tensor input.

    Args:
        spec: dtype, shape and one of random / values / npy (ARCHITECTURE.md
            "The test plan"). ``random`` defaults: ``seed`` 0, ``low`` 0,
            ``high`` 1 (required for ``integers``), ``mean`` 0, ``std`` 1;
            drawn with ``np.random.default_rng(seed)`` in float64 (int64 for
            integers), a float draw for an integer dtype rounded toward zero.
            ``npy`` is relative to ``root``. Every conversion is
            ``convert.to_dtype``'s (``values`` as literal values).
        root: directory relative paths are resolved against.
        what: a name for messages.

    Returns:
        A C-contiguous array of the spec's dtype and shape.

    Raises:
        PlanError: unknown dtype or distribution, bad shape, values that do
            not reshape, npy that cannot be read or has another shape, a
            value the dtype cannot hold (``convert.to_dtype``).
    """
    dtype = _dtype(spec.dtype)
    shape = _shape(spec.shape, what)
    sources = spec.sources()
    if len(sources) != 1:
        raise PlanError(f"{what}: needs exactly one of random, values, npy "
                        f"(has {', '.join(sources) or 'none'})")
    if "random" in sources:
        if shape is None:
            raise PlanError(f"{what}: a random input needs a shape")
        r = spec.random
        rng = np.random.default_rng(r.seed)
        dist = r.distribution
        pick = lambda v, default: default if v is None else v  # noqa: E731
        try:
            if dist == "uniform":
                raw = rng.uniform(pick(r.low, 0.0), pick(r.high, 1.0), size=shape)
            elif dist == "normal":
                raw = rng.normal(pick(r.mean, 0.0), pick(r.std, 1.0), size=shape)
            elif dist == "integers":
                if r.high is None:
                    raise PlanError(f"{what}: integers needs high")
                low, high = int(pick(r.low, 0)), int(r.high)
                kind = np.uint64 if high > np.iinfo(np.int64).max else np.int64
                raw = rng.integers(low, high, size=shape, dtype=kind)
            else:
                raise PlanError(f"{what}: unknown distribution {dist!r} "
                                "(uniform, normal, integers)")
        except (ValueError, TypeError, OverflowError) as e:
            raise PlanError(f"{what}: bad {dist} parameters: {e}") from None
        if dtype.is_integer and raw.dtype.kind == "f":
            raw = np.trunc(raw)
        data = to_dtype(raw, dtype, f"{what} value", f"its random draw ({dist})")
    elif "values" in sources:
        try:
            raw = read_list(spec.values, dtype)
            if shape is not None:
                raw = raw.reshape(shape)
        except ValueError as e:
            raise PlanError(f"{what}: values of shape {list(np.shape(spec.values))} "
                            f"do not fit shape {list(shape or ())}: {e}") from None
        data = to_dtype(raw, dtype, f"{what} value", "its values", literal=True)
    else:
        raw = _load_npy(spec.npy, root, what)
        if shape is not None and tuple(raw.shape) != shape:
            raise PlanError(f"{what}: {spec.npy} has shape {list(raw.shape)}, "
                            f"the plan says {list(shape)}")
        data = to_dtype(raw, dtype, f"{what} value", f"its .npy {spec.npy}")
    return np.asarray(data, order="C")     # (0-D stays 0-D: ascontiguousarray makes it 1-D)


def make_scalar(spec: ScalarSpec, what: str = "input") -> Tuple[np.ndarray, Any]:
    """A scalar input: ``(0-D array of the plan dtype, Python number)``.

    The plan's ``dtype`` (ARCHITECTURE.md "The test plan") decides the HBM
    payload; the Python number is the value the device sees.

    Raises:
        PlanError: no/unknown dtype, a non-numeric value, or a value the
            dtype cannot hold as written (``convert.to_dtype``, a literal:
            a non-integer or out of range for an integer dtype, past the
            largest finite float32).
    """
    dtype = _dtype(spec.dtype)
    value = spec.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(f"{what}: scalar value {value!r} is not a number")
    arr = to_dtype(np.asarray(value), dtype, f"{what} value", literal=True).reshape(())
    return arr, (float(arr) if dtype.is_float else int(arr))


LOCATIONS = ("hbm", "sbuf")


def location_of(loc: Any, what: str) -> str:
    """A plan tensor's or output's ``location``: ``"hbm"`` or ``"sbuf"``
    (the device ABI (gpsimd_host/abi.h) location enum).

    Raises:
        PlanError: any other value.
    """
    if loc not in LOCATIONS:
        raise PlanError(f"{what}: unknown location {loc!r} (hbm or sbuf)")
    return loc


def make_inputs(op: OpPlan, vector: VectorPlan, root: str = ".") -> List[Input]:
    """All inputs of a vector in schema order (``op.args``).

    Raises:
        PlanError: an argument without an input, an input that is no
            argument, or any ``make_tensor``/``make_scalar`` error.
    """
    given = vector.inputs
    names = [a.name for a in op.args]
    extra = sorted(set(given) - set(names))
    if extra:
        raise PlanError(f"inputs {', '.join(extra)} are not arguments of {op.name}")
    out: List[Input] = []
    for name in names:
        if name not in given:
            raise PlanError(f"no input for argument {name!r}")
        spec = given[name]
        what = f"input {name!r}"
        if isinstance(spec, TensorSpec):
            arr = make_tensor(spec, root, what)
            out.append(Input(name, "tensor", _dtype(spec.dtype), arr, arr,
                             location_of(spec.location, what)))
        else:
            arr, value = make_scalar(spec, what)
            out.append(Input(name, "scalar", _dtype(spec.dtype), arr, value))
    return out


def expected_output(vector: VectorPlan, inputs: Sequence[Input],
                    out_dtype: dt.DType, root: str, timeout: float) -> np.ndarray:
    """The expected output, converted to ``out_dtype`` (C-contiguous; by
    ``convert.to_dtype``, inline ``values`` as literal values). A
    reference's import and call take at most ``timeout`` seconds (the
    vector's time limit, ``sourceonly.reference_scope``).

    A reference (ARCHITECTURE.md "The test plan") gets a private copy of
    each input array, and its result is copied into an array of its own
    (it may return one buffer it fills at every call); inline ``values``
    are reshaped to the output shape when that is given and has as many
    elements.

    Raises:
        PlanError: no expected entry, an import problem, the reference
            raising (message gives the exception and line), a result that
            is not an array of numbers, or a value ``out_dtype`` cannot hold
            (the message names ``vector.expected.source``).
    """
    exp = vector.expected
    shape = _shape(vector.output.shape, "output")
    if exp.reference is not None:
        ref = exp.reference
        args = [i.value.copy() if i.kind == "tensor" else i.value for i in inputs]
        try:
            with reference_scope(timeout, f"reference {ref.label}:{ref.function}",
                                 f"[reference {ref.label}:{ref.function}, vector {vector.name}] "):
                fn = load_reference(ref, root)
                with np.errstate(all="ignore"):
                    result = fn(*args)
        except PlanError:           # (a module the build cannot see, load_reference; time_limit)
            raise
        except BaseException as e:  # the reference's own bug
            raise PlanError(f"reference {ref.label}:{ref.function} raised "
                            f"{short_exc(e)}{user_frame(e, ref.file)}") from None
        try:        # (a copy: it may return one buffer it fills at every call)
            raw = read_list(result, out_dtype)
        except (ValueError, TypeError) as e:    # (a ragged list, say)
            raise PlanError(f"{exp.source} returned no array: {short_exc(e)}") from None
    elif exp.values is not None:
        try:
            raw = read_list(exp.values, out_dtype)
        except ValueError as e:
            raise PlanError(f"{exp.source}: {e}") from None
        meant = vector.output.source and raw.ndim > 1   # (nested: its shape is checked below)
        if shape is not None and raw.shape != shape and raw.size == math.prod(shape) and not meant:
            raw = raw.reshape(shape)
    elif exp.npy is not None:
        raw = _load_npy(exp.npy, root, "expected")
    else:
        raise PlanError("vector has no expected output (reference, values or npy)")
    if vector.output.defaulted and exp.values is None and kind(raw.dtype) in "biu" \
            and not out_dtype.is_integer:
        raise PlanError(f"{exp.source} gives {raw.dtype} values, but the output's dtype is "
                        f"{out_dtype.name} only as the first tensor input's: say which the kernel "
                        f"returns (output: {{dtype: ...}} on the op or the vector)")
    if vector.output.source:
        _check_shape_function(vector, shape or (), raw, out_dtype, exp.values is not None)
    return np.asarray(to_dtype(raw, out_dtype, "expected value", exp.source,
                               role="the output's dtype", literal=exp.values is not None),
                      order="C")


def _check_shape_function(vector: VectorPlan, shape: Tuple[int, ...], raw: np.ndarray,
                          out_dtype: dt.DType, inline: bool) -> None:
    """With a shape function (``output.source``), the expected result must
    have its ``shape`` and dtype, as the runtime allocates the output from it
    (inline values are of the output dtype by construction: shape only).

    Raises:
        PlanError: naming both sides and where each comes from.
    """
    if tuple(raw.shape) != shape:
        mine, theirs = f"shape {list(raw.shape)}", list(shape)
    elif not inline and raw.dtype != out_dtype.numpy:
        # (a device dtype's name is its numpy dtype's, gpsimd_emu.dtypes)
        mine, theirs = f"dtype {raw.dtype}", out_dtype.name
    else:
        return
    raise PlanError(f"the expected result ({vector.expected.source}) has {mine}, but "
                    f"{vector.output.source} gives {theirs} (the runtime allocates the output "
                    "from the shape function: fix the one that is wrong)")


def output_shape(vector: VectorPlan, expected: Optional[np.ndarray]) -> Tuple[int, ...]:
    """The output shape: the plan's ``output.shape``, or the expected array's
    shape when that is null (``expected`` None: a checks-only vector).

    Raises:
        PlanError: a bad shape, none for a checks-only vector, or one that
            differs from the expected array's.
    """
    shape = _shape(vector.output.shape, "output")
    if shape is None and expected is None:
        raise PlanError("a checks-only vector (no expected result) needs output.shape")
    if shape is None:
        return tuple(expected.shape)
    if expected is not None and tuple(expected.shape) != shape:
        raise PlanError(f"expected output has shape {list(expected.shape)}, "
                        f"the plan's output shape is {list(shape)}")
    return shape


def tolerances(vector: VectorPlan, out_dtype: dt.DType) -> Tuple[float, float]:
    """``(rtol, atol)`` of a vector: its own, else the dtype's defaults.
    Integers are always exact (0, 0)."""
    if out_dtype.is_integer:
        return 0.0, 0.0
    rtol, atol = vector.rtol, vector.atol
    return (out_dtype.rtol if rtol is None else float(rtol),
            out_dtype.atol if atol is None else float(atol))
