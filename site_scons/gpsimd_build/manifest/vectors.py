"""The ops and test vectors of a library: op schemas and names,
references, inputs against the schema's arguments (kind, dtype, shape,
values, random parameters, scalars in range), expected results, and the
fully defaulted model of each. A part of :class:`~.document._ManifestFile`
(it relies on its ``error``, ``line``, ``location``, ``clean``, ``usable``
and path helpers).

Each check reads only the nodes it needs and runs when those are free of
schema errors: a bad ``rtol`` does not hide that the same vector's values do
not fill their shape, nor does a bad ``dtype`` hide a missing ``.npy`` file.
A model is built only for a node without any error.
"""

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..diagnostics import DocPath, shown, shown_repr
from ..opschema import (CPP_KEYWORDS, MAX_NAME_LENGTH, SUPPORTED_TYPES, WRAPPER_RESERVED_NAMES,
                        OpSchema, OpSchemaError, parse_schema)
from .defaults import _Defaults, _op_with_defaults
from .model import Expected, Op, Random, ScalarInput, TensorInput, Vector, default_seed
from .rules import (DEFAULT_STACK_SIZE, DEFAULT_TOLERANCES, FLOAT_MAX, INTEGER_DTYPES,
                    MAX_ELEMENTS, SCALAR_ARG_TYPES, _FLOAT32_MAX)
from .schema import _name_too_long, _suggest

# Stands for an op reference that was reported as bad (vectors then say nothing more).
_BAD_REFERENCE = object()


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


class _OpChecks:
    """The op and vector checks of a manifest file (mixed into
    :class:`~.document._ManifestFile`)."""

    # -- ops ----------------------------------------------------------------

    def op(self, path: DocPath, op: Any, library: str, names: Dict[str, DocPath],
           defaults: Optional[_Defaults] = None) -> Optional[Op]:
        """Check one op (schema, name, reference) and its vectors; its model
        (``stack_size`` from the op, else ``defaults``, else 4196), or None."""
        defaults = defaults or _Defaults()
        if not isinstance(op, dict):
            return None
        schema: Optional[OpSchema] = None
        text = op.get("schema")
        if self.usable(op, "schema", path + ("schema",), str):
            try:
                schema = parse_schema(text)
            except OpSchemaError as err:
                self.error(path + ("schema",), f"invalid op schema: {shown(err.message, 200)}",
                           offset=err.column - 1)
        name: Optional[str] = None
        if "name" in op:
            if self.usable(op, "name", path + ("name",), str):
                name, name_path = op["name"], path + ("name",)
                if len(name) >= MAX_NAME_LENGTH:
                    self.error(name_path, _name_too_long(name))
                elif name in CPP_KEYWORDS:
                    self.error(name_path, f"op name '{name}' is a reserved C++ keyword; the "
                                          "kernel is a C++ function of that name")
                elif name in WRAPPER_RESERVED_NAMES:
                    self.error(name_path, f"op name '{name}' clashes with a name the "
                                          "generated wrapper.cpp uses")
        elif schema is not None:
            name, name_path = schema.name, path + ("schema",)
        if name is not None:
            if name in names:
                self.error(name_path, f"duplicate op name '{shown(name)}' in library "
                                      f"'{shown(library)}' (first at line "
                                      f"{self.line(names[name])})")
            else:
                names[name] = name_path
        reference: Any = None
        if "reference" in op:
            reference = _BAD_REFERENCE
            if self.usable(op, "reference", path + ("reference",), str):
                reference = self.reference(path + ("reference",), op["reference"]) \
                    or _BAD_REFERENCE
        vectors = []
        op_defaults = _op_with_defaults(
            {k: v for k, v in op.items() if k not in ("rtol", "atol", "output")
             or self.clean(path + (k,))}, defaults)
        if isinstance(op.get("vectors"), list):
            vector_names: Dict[str, DocPath] = {}
            for k, vec in enumerate(op["vectors"]):
                vectors.append(self.vector(path + ("vectors", k), vec, library, name or "?",
                                           schema, op_defaults, reference, vector_names))
        if schema is None or name is None or not self.clean(path, except_items_of="vectors"):
            return None
        return Op(name=name, schema=schema, schema_text=text,
                  stack_size=int(op.get("stack_size", defaults.stack_size
                                        if defaults.stack_size is not None
                                        else DEFAULT_STACK_SIZE)),
                  vectors=tuple(vectors), location=self.location(path))  # type: ignore[arg-type]

    # -- vectors ------------------------------------------------------------

    def vector(self, path: DocPath, vec: Any, library: str, op_name: str,
               schema: Optional[OpSchema], op: dict, op_reference: Any,
               names: Dict[str, DocPath]) -> Optional[Vector]:
        """Check one vector against the op's schema (None: the op's schema
        did not parse; the inputs are then checked by their form); its fully
        defaulted model, or None."""
        if not isinstance(vec, dict):
            return None
        name = vec.get("name")
        if self.usable(vec, "name", path + ("name",), str):
            if name in names:
                self.error(path + ("name",), f"duplicate vector name '{shown(name)}' "
                                             f"(first at line {self.line(names[name])})")
            else:
                names[name] = path + ("name",)
        errors_before = len(self.diagnostics)

        given = vec.get("inputs", {})
        inputs: List[Union[TensorInput, ScalarInput, None]] = []
        first_tensor_dtype: Optional[str] = None
        if isinstance(given, dict):
            first_tensor_dtype = self.vector_inputs(path, vec, given, schema, inputs,
                                                    (library, op_name, str(name)))

        output = vec.get("output", {}) if self.clean(path + ("output",)) else {}
        output = output if isinstance(output, dict) else {}
        op_output = op.get("output", {}) if isinstance(op.get("output"), dict) else {}
        output_dtype = output.get("dtype") or op_output.get("dtype") or first_tensor_dtype
        output_shape = tuple(int(d) for d in output["shape"]) if "shape" in output else None
        if output_dtype is None and schema is not None and len(self.diagnostics) == errors_before \
                and self.clean(path):
            self.error(path, "cannot tell the output dtype: give output: {dtype: ...} on the "
                             "vector or the op (no tensor input with a known dtype)")

        expected = self.expected(path, vec, op_reference, output_shape)
        if len(self.diagnostics) != errors_before or output_dtype is None or expected is None \
                or schema is None or not self.clean(path):
            return None
        rtol_default, atol_default = DEFAULT_TOLERANCES[output_dtype]
        rtol = float(vec.get("rtol", op.get("rtol", rtol_default)))
        atol = float(vec.get("atol", op.get("atol", atol_default)))
        return Vector(name=name, inputs=tuple(inputs), output_dtype=output_dtype,
                      output_shape=output_shape, expected=expected, rtol=rtol, atol=atol,
                      location=self.location(path),
                      output_memory=output.get("location", "hbm"))

    def vector_inputs(self, path: DocPath, vec: dict, given: dict, schema: Optional[OpSchema],
                      inputs: list, seed_parts: Tuple[str, str, str]) -> Optional[str]:
        """Check a vector's inputs (one per schema argument, each of the right
        kind), appending their models to ``inputs``; the first tensor
        input's dtype when known."""
        inputs_path = path + ("inputs",)
        first_tensor_dtype: Optional[str] = None
        seen_tensor = False
        if schema is None:  # the arguments are unknown: check each input by its form
            for key, value in given.items():
                if isinstance(value, dict) and "value" not in value:
                    self.tensor_input(inputs_path + (key,), key, value, seed_parts + (key,))
            return None
        args = {a.name: a.type for a in schema.arguments}
        for key in given:
            if key not in args:
                message = f"input '{shown(key)}' names no argument of '{schema}'"
                guess = _suggest(key, list(args))
                if guess and guess not in given:
                    message += f" (did you mean '{guess}'?)"
                self.error(inputs_path + (key,), message, key=True)
        for arg in schema.arguments:
            if arg.name not in given:
                where = inputs_path if "inputs" in vec else path
                self.error(where, f"no input for argument '{arg.name}' ({arg.type})")
                continue
            ipath = inputs_path + (arg.name,)
            value = given[arg.name]
            if arg.type == "Tensor":
                tensor, dtype = self.tensor_input(ipath, arg.name, value,
                                                  seed_parts + (arg.name,))
                inputs.append(tensor)
                if not seen_tensor:
                    seen_tensor, first_tensor_dtype = True, dtype
            elif arg.type in SCALAR_ARG_TYPES:
                inputs.append(self.scalar_input(ipath, arg.name, arg.type, value)
                              if self.clean(ipath) else None)
            else:  # pragma: no cover - opschema only accepts SUPPORTED_TYPES
                self.error(ipath, f"argument type '{arg.type}' cannot be given in a test vector "
                                  f"(supported: {', '.join(SUPPORTED_TYPES)})")
        return first_tensor_dtype

    def expected(self, path: DocPath, vec: dict, op_reference: Any,
                 output_shape: Optional[Tuple[int, ...]]) -> Optional[Expected]:
        """A vector's expected result (its own, else the op's reference), or None."""
        if "expected" not in vec:
            if op_reference is _BAD_REFERENCE:
                return None  # the op's reference was reported already
            if op_reference is None:
                self.error(path, "no expected result: give expected: {reference | values | npy} "
                                 "or a reference on the op")
                return None
            return Expected(reference=op_reference, values=None, npy=None)
        epath = path + ("expected",)
        exp = vec["expected"]
        if not isinstance(exp, dict):
            return None
        given = [k for k in ("reference", "values", "npy") if k in exp]
        if len(given) != 1:
            self.error(epath, "expected needs exactly one of 'reference', 'values' or 'npy'"
                       + (f"; got {' and '.join(repr(k) for k in given)}" if given else ""))
            return None
        if "reference" in exp:
            if not self.usable(exp, "reference", epath + ("reference",), str):
                return None
            ref = self.reference(epath + ("reference",), exp["reference"])
            return Expected(reference=ref, values=None, npy=None) if ref else None
        if "npy" in exp:
            if not self.usable(exp, "npy", epath + ("npy",), str):
                return None
            found = self.npy(epath + ("npy",), exp["npy"], tensor=False)
            return Expected(reference=None, values=None, npy=found[0]) if found else None
        values = exp["values"]
        if not self.clean(epath + ("values",)) or \
                not self.check_values(epath + ("values",), values, output_shape, None):
            return None
        return Expected(reference=None, values=values, npy=None)

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
                           "num_elem, customop-marshalling.txt §2)")
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
