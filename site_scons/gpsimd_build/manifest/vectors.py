"""The ops and test vectors of a library: op schemas and names,
references, inputs against the schema's arguments (kind, dtype, shape,
values, random parameters, scalars in range), expected results, and the
fully defaulted model of each. A part of :class:`~.document._ManifestFile`
(it relies on its ``error``, ``line``, ``location``, ``clean`` and path
helpers).
"""

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..diagnostics import DocPath
from ..opschema import (CPP_KEYWORDS, MAX_NAME_LENGTH, SUPPORTED_TYPES, WRAPPER_RESERVED_NAMES,
                        OpSchema, OpSchemaError, parse_schema)
from .defaults import _Defaults, _op_with_defaults
from .model import Expected, Op, Random, Reference, ScalarInput, TensorInput, Vector, default_seed
from .rules import (DEFAULT_STACK_SIZE, DEFAULT_TOLERANCES, FLOAT_MAX, INTEGER_DTYPES,
                    MAX_ELEMENTS, SCALAR_ARG_TYPES, _FLOAT32_MAX)
from .schema import _name_too_long, _suggest

# Stands for an op reference that was reported as bad (vectors then say nothing more).
_BAD_REFERENCE = object()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _leaves(values: Any, path: DocPath) -> List[Tuple[Any, DocPath]]:
    """Every number of a nested list, with its document path (row-major)."""
    if isinstance(values, list):
        out: List[Tuple[Any, DocPath]] = []
        for i, item in enumerate(values):
            out.extend(_leaves(item, path + (i,)))
        return out
    return [(values, path)]


def _ragged(values: Any, path: DocPath) -> Optional[DocPath]:
    """The path of the first sub-list whose length or depth differs from its
    siblings (a ragged nested list), else None."""
    def shape_of(v):
        return (len(v),) + (shape_of(v[0]) if v and isinstance(v[0], list) else ()) \
            if isinstance(v, list) else ()

    def walk(v, p, expect):
        if not expect:
            return None if not isinstance(v, list) else p
        if not isinstance(v, list) or len(v) != expect[0]:
            return p
        for i, item in enumerate(v):
            bad = walk(item, p + (i,), expect[1:])
            if bad is not None:
                return bad
        return None
    return walk(values, path, shape_of(values))


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
        if not isinstance(op, dict) or not self.clean(path, except_items_of="vectors"):
            return None
        text = op["schema"]
        try:
            schema: Optional[OpSchema] = parse_schema(text)
        except OpSchemaError as err:
            self.error(path + ("schema",), f"invalid op schema: {err.message}",
                       offset=err.column - 1)
            schema = None
        if "name" in op:
            name, name_path = op["name"], path + ("name",)
            if len(name) >= MAX_NAME_LENGTH:
                self.error(name_path, _name_too_long(name))
            elif name in CPP_KEYWORDS:
                self.error(name_path, f"op name '{name}' is a reserved C++ keyword; the kernel "
                                      "is a C++ function of that name")
            elif name in WRAPPER_RESERVED_NAMES:
                self.error(name_path, f"op name '{name}' clashes with a name the generated "
                                      "wrapper.cpp uses")
        elif schema is not None:
            name, name_path = schema.name, path + ("schema",)
        else:
            return None
        if name in names:
            self.error(name_path, f"duplicate op name '{name}' in library '{library}' "
                                  f"(first at line {self.line(names[name])})")
        else:
            names[name] = name_path
        reference: Optional[Reference] = None
        if "reference" in op:
            reference = self.reference(path + ("reference",), op["reference"]) or _BAD_REFERENCE
        if schema is None:
            return None
        vectors = []
        vector_names: Dict[str, DocPath] = {}
        op_defaults = _op_with_defaults(op, defaults)
        for k, vec in enumerate(op["vectors"]):
            vectors.append(self.vector(path + ("vectors", k), vec, library, name, schema,
                                       op_defaults, reference, vector_names))
        return Op(name=name, schema=schema, schema_text=text,
                  stack_size=int(op.get("stack_size", defaults.stack_size
                                        if defaults.stack_size is not None
                                        else DEFAULT_STACK_SIZE)),
                  vectors=tuple(vectors), location=self.location(path))  # type: ignore[arg-type]

    # -- vectors ------------------------------------------------------------

    def vector(self, path: DocPath, vec: Any, library: str, op_name: str, schema: OpSchema,
               op: dict, op_reference: Optional[Reference],
               names: Dict[str, DocPath]) -> Optional[Vector]:
        """Check one vector against the op's schema; its fully defaulted model, or None."""
        if not isinstance(vec, dict) or not self.clean(path):
            return None
        name = vec["name"]
        if name in names:
            self.error(path + ("name",), f"duplicate vector name '{name}' "
                                         f"(first at line {self.line(names[name])})")
        else:
            names[name] = path + ("name",)
        errors_before = len(self.diagnostics)

        inputs_path = path + ("inputs",)
        given = vec.get("inputs", {})
        args = {a.name: a.type for a in schema.arguments}
        for key in given:
            if key not in args:
                message = f"input '{key}' names no argument of '{schema}'"
                guess = _suggest(key, list(args))
                if guess and guess not in given:
                    message += f" (did you mean '{guess}'?)"
                self.error(inputs_path + (key,), message, key=True)
        inputs: List[Union[TensorInput, ScalarInput, None]] = []
        first_tensor_dtype: Optional[str] = None
        seen_tensor = False
        for arg in schema.arguments:
            if arg.name not in given:
                where = inputs_path if "inputs" in vec else path
                self.error(where, f"no input for argument '{arg.name}' ({arg.type})")
                continue
            ipath = inputs_path + (arg.name,)
            value = given[arg.name]
            if arg.type == "Tensor":
                tensor, dtype = self.tensor_input(ipath, arg.name, value,
                                                  (library, op_name, name, arg.name))
                inputs.append(tensor)
                if not seen_tensor:
                    seen_tensor, first_tensor_dtype = True, dtype
            elif arg.type in SCALAR_ARG_TYPES:
                inputs.append(self.scalar_input(ipath, arg.name, arg.type, value))
            else:  # pragma: no cover - opschema only accepts SUPPORTED_TYPES
                self.error(ipath, f"argument type '{arg.type}' cannot be given in a test vector "
                                  f"(supported: {', '.join(SUPPORTED_TYPES)})")

        output = vec.get("output", {})
        output_dtype = output.get("dtype") or op.get("output", {}).get("dtype") or first_tensor_dtype
        output_shape = tuple(int(d) for d in output["shape"]) if "shape" in output else None
        if output_dtype is None and len(self.diagnostics) == errors_before:
            self.error(path, "cannot tell the output dtype: give output: {dtype: ...} on the "
                             "vector or the op (no tensor input with a known dtype)")

        expected = self.expected(path, vec, op_reference, output_shape)
        if len(self.diagnostics) != errors_before or output_dtype is None or expected is None:
            return None
        rtol_default, atol_default = DEFAULT_TOLERANCES[output_dtype]
        rtol = float(vec.get("rtol", op.get("rtol", rtol_default)))
        atol = float(vec.get("atol", op.get("atol", atol_default)))
        return Vector(name=name, inputs=tuple(inputs), output_dtype=output_dtype,
                      output_shape=output_shape, expected=expected, rtol=rtol, atol=atol,
                      location=self.location(path),
                      output_memory=output.get("location", "hbm"))

    def expected(self, path: DocPath, vec: dict, op_reference: Optional[Reference],
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
        given = [k for k in ("reference", "values", "npy") if k in exp]
        if len(given) != 1:
            self.error(epath, "expected needs exactly one of 'reference', 'values' or 'npy'"
                       + (f"; got {' and '.join(repr(k) for k in given)}" if given else ""))
            return None
        if "reference" in exp:
            ref = self.reference(epath + ("reference",), exp["reference"])
            return Expected(reference=ref, values=None, npy=None) if ref else None
        if "npy" in exp:
            found = self.npy(epath + ("npy",), exp["npy"], tensor=False)
            return Expected(reference=None, values=None, npy=found[0]) if found else None
        values = exp["values"]
        if not self.check_values(epath + ("values",), values, output_shape, None):
            return None
        return Expected(reference=None, values=values, npy=None)

    def check_values(self, path: DocPath, values: Any, shape: Optional[Tuple[int, ...]],
                     dtype: Optional[str]) -> bool:
        """Literal values: a regular nested list whose element count is the
        shape's (if given), integral and in range for an integer dtype."""
        bad = _ragged(values, path)
        if bad is not None:
            self.error(bad, "ragged values: every sub-list at one depth must have the "
                            "same length")
            return False
        leaves = _leaves(values, path)
        if shape is not None and len(leaves) != _product(shape):
            self.error(path, f"{len(leaves)} values do not fill shape {list(shape)} "
                             f"({_product(shape)} elements)")
            return False
        if dtype in INTEGER_DTYPES:
            low, high = INTEGER_DTYPES[dtype]
            for value, vpath in leaves:
                if not (_is_int(value) or (isinstance(value, float) and value.is_integer())):
                    self.error(vpath, f"value {value!r} is not an integer (dtype {dtype})")
                    return False
                if not low <= value <= high:
                    self.error(vpath, f"value {value!r} is out of range for {dtype} "
                                      f"({low}..{high})")
                    return False
        elif dtype in FLOAT_MAX:
            largest = FLOAT_MAX[dtype]
            for value, vpath in leaves:
                if isinstance(value, (int, float)) and math.isfinite(value) \
                        and abs(value) > largest:
                    self.error(vpath, f"value {value!r} is out of range for {dtype} "
                                      f"(largest finite value {largest:g}); write .inf "
                                      f"for an infinity")
                    return False
        return True

    # -- inputs -------------------------------------------------------------

    def tensor_input(self, path: DocPath, name: str, value: Any,
                     seed_parts: Tuple[str, str, str, str]
                     ) -> Tuple[Optional[TensorInput], Optional[str]]:
        """Check a tensor input; (model or None, its dtype if known)."""
        if not isinstance(value, dict) or "value" in value:
            self.error(path, f"argument '{name}' has type Tensor: give a tensor input "
                             "(a mapping with dtype, shape and one of random, values, npy), "
                             "not a scalar")
            return None, None
        sources = [k for k in ("random", "values", "npy") if k in value]
        if len(sources) != 1:
            if sources:
                self.error(path, f"a tensor input has exactly one of 'random', 'values' or "
                                 f"'npy'; got {' and '.join(repr(k) for k in sources)}")
            else:
                self.error(path, "a tensor input needs one of 'random', 'values' or 'npy'")
            return None, value.get("dtype")
        location = self.location(path, key=True)
        if "npy" in value:
            if "shape" in value:
                self.error(path + ("shape",), "'shape' is not allowed with 'npy' (the .npy "
                                              "file gives the shape)", key=True)
                return None, value.get("dtype")
            found = self.npy(path + ("npy",), value["npy"], tensor=True)
            if found is None:
                return None, value.get("dtype")
            relative, descr, shape = found
            dtype = self.npy_dtype(path, value["npy"], descr, value.get("dtype"))
            if dtype is None:
                return None, None
            return TensorInput(name, dtype, shape, None, None, relative, location,
                               value.get("location", "hbm")), dtype
        dtype = value["dtype"]
        shape = tuple(int(d) for d in value["shape"])
        if math.prod(shape) > MAX_ELEMENTS:
            self.error(path + ("shape",), f"shape {list(shape)} has {math.prod(shape)} elements; "
                       f"a descriptor counts at most {MAX_ELEMENTS} (its 32-bit num_elem, "
                       f"customop-marshalling.txt §2)")
            return None, dtype
        if "values" in value:
            if not self.check_values(path + ("values",), value["values"], shape, dtype):
                return None, dtype
            return TensorInput(name, dtype, shape, None, value["values"], None, location,
                               value.get("location", "hbm")), dtype
        random = self.random(path + ("random",), value["random"], dtype, seed_parts)
        if random is None:
            return None, dtype
        return TensorInput(name, dtype, shape, random, None, None, location,
                           value.get("location", "hbm")), dtype

    def random(self, path: DocPath, spec: dict, dtype: str,
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
