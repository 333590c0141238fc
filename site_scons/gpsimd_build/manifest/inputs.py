"""The inputs of a test vector and literal values: tensor inputs (dtype,
shape, one of values / random / npy, each part checked when it is free of
schema errors), random distributions, scalar inputs (integrality, range),
and nested ``values`` (regular, filling their shape, in range for their
dtype; read iteratively). A part of :class:`~.document._ManifestFile` via
:class:`~.vectors._OpChecks`.
"""

import math
from decimal import Decimal
from typing import Any, List, Optional, Sequence, Tuple

from ..diagnostics import DocPath, shown_repr
from .model import Random, ScalarInput, TensorInput, default_seed
from .rules import FLOAT_MAX, INTEGER_DTYPES, MAX_ELEMENTS, SCALAR_ARG_TYPES, _FLOAT32_MAX


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flatten(values: Any) -> Tuple[List[Any], Optional[Tuple[int, ...]], Optional[DocPath]]:
    """(leaves in row-major order, the nested list's shape, None) of a
    regular nested list; (leaves so far, None, relative path of the first
    ragged sub-list) when one sub-list's length or depth differs from its
    siblings'. A number is one leaf of shape (). Iterative."""
    shape: List[int] = []
    probe = values
    while isinstance(probe, list):
        shape.append(len(probe))
        if not probe:
            break
        probe = probe[0]
    depth = len(shape)
    leaves: List[Any] = []
    stack: List[Tuple[Any, DocPath]] = [(values, ())]
    while stack:
        node, rel = stack.pop()
        level = len(rel)
        if level == depth:
            if isinstance(node, list):
                return leaves, None, rel
            leaves.append(node)
            continue
        if not isinstance(node, list) or len(node) != shape[level]:
            return leaves, None, rel
        if level + 1 == depth:
            for i, item in enumerate(node):
                if isinstance(item, list):
                    return leaves, None, rel + (i,)
            leaves.extend(node)
            continue
        for i in range(len(node) - 1, -1, -1):
            stack.append((node[i], rel + (i,)))
    return leaves, tuple(shape), None


def _leaf_path(shape: Tuple[int, ...], flat: int) -> DocPath:
    """The index path of leaf ``flat`` (row-major) in a nested list of ``shape``."""
    out = []
    for dim in reversed(shape):
        out.append(flat % dim)
        flat //= dim
    return tuple(reversed(out))


def _product(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


class _InputChecks:
    """The input and value checks of a manifest file."""

    def exact_literals(self, prefix: DocPath, dtype: Optional[str], what: str = "") -> bool:
        """For an integer ``dtype`` (or one not known yet: None), that no
        float literal at or under ``prefix`` reads as another integer than
        the number written (``9007199254740993.0`` is the double
        9007199254740992, ``0.99999999999999999`` is 1.0): the YAML text is
        judged, not the double. Reports the first; False then."""
        if dtype is not None and dtype not in INTEGER_DTYPES:
            return True
        for path, text in self.doc.inexact.items():
            if path[:len(prefix)] != prefix:
                continue
            number = Decimal(text)
            read = int(float(text))
            written = f"the integer {int(number)}" if number == number.to_integral_value() \
                else "a number with a fraction"
            fix = f"write {int(number)}" if number == number.to_integral_value() \
                else "write an integer"
            self.error(path, f"{what}{text} is {written}, but as a float literal it reads as "
                             f"{read} (a double holds no more than 53 bits); the integer "
                             f"dtype{'' if dtype is None else ' ' + dtype} takes it exactly "
                             f"or not at all: {fix}")
            return False
        return True

    def check_values(self, path: DocPath, values: Any, shape: Optional[Tuple[int, ...]],
                     dtype: Optional[str]) -> bool:
        """Literal values: a regular nested list whose element count is the
        shape's (if given), integral and in range for an integer dtype."""
        leaves, nested, ragged = _flatten(values)
        if ragged is not None:
            self.error(path + ragged, "ragged values: every sub-list at one depth must have "
                                      "the same length")
            return False
        if shape is not None and len(leaves) != _product(shape):
            self.error(path, f"{len(leaves)} values do not fill shape {list(shape)} "
                             f"({_product(shape)} elements)")
            return False
        if dtype in INTEGER_DTYPES:
            if not self.exact_literals(path, dtype):
                return False
            low, high = INTEGER_DTYPES[dtype]
            for k, value in enumerate(leaves):
                if not (_is_int(value) or (isinstance(value, float) and value.is_integer())):
                    self.error(path + _leaf_path(nested, k),
                               f"value {shown_repr(value)} is not an integer (dtype {dtype})")
                    return False
                if not low <= value <= high:
                    self.error(path + _leaf_path(nested, k),
                               f"value {value!r} is out of range for {dtype} ({low}..{high})")
                    return False
        elif dtype in FLOAT_MAX:
            largest = FLOAT_MAX[dtype]
            for k, value in enumerate(leaves):
                if _is_number(value) and abs(value) > largest and math.isfinite(value):
                    self.error(path + _leaf_path(nested, k),
                               f"value {value!r} is out of range for {dtype} "
                               f"(largest finite value {largest:g}); write .inf "
                               f"for an infinity")
                    return False
        return True

    # -- inputs -------------------------------------------------------------

    def tensor_input(self, path: DocPath, name: str, value: Any,
                     seed_parts: Tuple[str, str, str, str]
                     ) -> Tuple[Optional[TensorInput], Optional[str]]:
        """Check a tensor input; (model or None, its dtype if known). Each
        part (dtype, shape, values, random, npy) is checked when it is free
        of schema errors."""
        if not isinstance(value, dict) or "value" in value:
            if self.clean(path):
                self.error(path, f"argument '{name}' has type Tensor: give a tensor input "
                                 "(a mapping with dtype, shape and one of random, values, npy), "
                                 "not a scalar")
            return None, None
        dtype = value["dtype"] if self.usable(value, "dtype", path + ("dtype",), str) else None
        sources = [k for k in ("random", "values", "npy") if k in value]
        if len(sources) != 1:
            if sources:
                self.error(path, f"a tensor input has exactly one of 'random', 'values' or "
                                 f"'npy'; got {' and '.join(repr(k) for k in sources)}")
            elif self.clean(path):
                self.error(path, "a tensor input needs one of 'random', 'values' or 'npy'")
            return None, dtype
        location = self.location(path, key=True)
        memory = value.get("location", "hbm")
        if "npy" in value:
            if "shape" in value:
                self.error(path + ("shape",), "'shape' is not allowed with 'npy' (the .npy "
                                              "file gives the shape)", key=True)
                return None, dtype
            if not self.usable(value, "npy", path + ("npy",), str):
                return None, dtype
            found = self.npy(path + ("npy",), value["npy"], tensor=True)
            if found is None:
                return None, dtype
            relative, descr, shape = found
            given_dtype = dtype if "dtype" in value else None
            if "dtype" in value and dtype is None:
                return None, None
            dtype = self.npy_dtype(path, value["npy"], descr, given_dtype)
            if dtype is None or not self.clean(path):
                return None, dtype
            return TensorInput(name, dtype, shape, None, None, relative, location, memory), dtype
        shape = None
        if self.usable(value, "shape", path + ("shape",), list):
            shape = tuple(int(d) for d in value["shape"])
            if math.prod(shape) > MAX_ELEMENTS:
                self.error(path + ("shape",), f"shape {list(shape)} has {math.prod(shape)} "
                           f"elements; a descriptor counts at most {MAX_ELEMENTS} (its 32-bit "
                           "num_elem, the device ABI (gpsimd_host/abi.h))")
                return None, dtype
        if "values" in value:
            if not self.clean(path + ("values",)) or \
                    not self.check_values(path + ("values",), value["values"], shape, dtype):
                return None, dtype
            if dtype is None or shape is None or not self.clean(path):
                return None, dtype
            return TensorInput(name, dtype, shape, None, value["values"], None, location,
                               memory), dtype
        if not self.usable(value, "random", path + ("random",), dict):
            return None, dtype
        random = self.random(path + ("random",), value["random"], dtype, seed_parts)
        if random is None or dtype is None or shape is None or not self.clean(path):
            return None, dtype
        return TensorInput(name, dtype, shape, random, None, None, location, memory), dtype

    def random(self, path: DocPath, spec: dict, dtype: Optional[str],
               seed_parts: Tuple[str, str, str, str]) -> Optional[Random]:
        """The fully defaulted random spec, or None after reporting."""
        distribution = spec.get("distribution", "uniform")
        params = {"uniform": ("low", "high"), "normal": ("mean", "std"),
                  "integers": ("low", "high")}[distribution]
        ok = True
        for key in ("low", "high", "mean", "std"):
            if key in spec and key not in params:
                self.error(path + (key,), f"'{key}' does not apply to the {distribution} "
                                          f"distribution (it takes '{params[0]}' and "
                                          f"'{params[1]}')", key=True)
                ok = False
            elif key in spec and not math.isfinite(spec[key]):
                self.error(path + (key,), f"{key} must be a finite number")
                ok = False
        if not ok:
            return None
        seed = int(spec["seed"]) if "seed" in spec else default_seed(*seed_parts)
        if distribution == "normal":
            return Random(distribution, seed, mean=float(spec.get("mean", 0.0)),
                          std=float(spec.get("std", 1.0)))
        if distribution == "uniform":
            low, high = float(spec.get("low", -1.0)), float(spec.get("high", 1.0))
            if low > high:
                self.error(path, f"low ({spec.get('low', -1.0)}) must not exceed high "
                                 f"({spec.get('high', 1.0)})")
                return None
        else:
            if not self.exact_literals(path, None, "integers distribution: "):
                return None
            for key in ("low", "high"):
                if key in spec and not (_is_int(spec[key]) or float(spec[key]).is_integer()):
                    self.error(path + (key,), f"{key} of the integers distribution must be an "
                                              f"integer, got {spec[key]!r}")
                    return None
            low, high = int(spec.get("low", 0)), int(spec.get("high", 10))
            if low >= high:
                self.error(path, f"low ({low}) must be less than high ({high}); high is "
                                 "exclusive")
                return None
            if dtype in INTEGER_DTYPES:
                lo, hi = INTEGER_DTYPES[dtype]
                if low < lo or high - 1 > hi:
                    self.error(path, f"integers in [{low}, {high}) do not fit {dtype} "
                                     f"({lo}..{hi})")
                    return None
        return Random(distribution, seed, low=low, high=high)

    def scalar_input(self, path: DocPath, name: str, arg_type: str,
                     value: Any) -> Optional[ScalarInput]:
        """Check a scalar input (kind, integrality, range); its model, or None."""
        location = self.location(path, key=True)
        if isinstance(value, dict):
            if "value" not in value:
                self.error(path, f"argument '{name}' has type {arg_type}: give a number or "
                                 "{value: ..., dtype: ...}, not a tensor input")
                return None
            number, dtype, vpath = value["value"], value.get("dtype"), path + ("value",)
        else:
            number, dtype, vpath = value, None, path
        if not _is_number(number):
            return None  # the schema said so
        if dtype is None:
            dtype = SCALAR_ARG_TYPES[arg_type] or ("float32" if isinstance(number, float)
                                                   else "int64")
        if dtype in INTEGER_DTYPES:
            if isinstance(number, float):
                if not self.exact_literals(vpath, dtype, f"argument '{name}' ({arg_type}): "):
                    return None
                if not number.is_integer():
                    self.error(vpath, f"argument '{name}' has type {arg_type} ({dtype}): "
                                      f"{number!r} is not an integer")
                    return None
                number = int(number)
            low, high = INTEGER_DTYPES[dtype]
            if not low <= number <= high:
                self.error(vpath, f"{number} is out of range for {dtype} ({low}..{high})")
                return None
        else:
            number = float(number)
            if math.isfinite(number) and abs(number) > _FLOAT32_MAX:
                self.error(vpath, f"{number!r} is out of range for float32")
                return None
        return ScalarInput(name, number, dtype, location)
