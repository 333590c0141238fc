"""The ops and test vectors of a library: op schemas and names,
references, a vector's inputs against the schema's arguments (each input
checked by :class:`~.inputs._InputChecks`), expected results, and the
fully defaulted model of each. A part of :class:`~.document._ManifestFile`
(it relies on its ``error``, ``line``, ``location``, ``clean``, ``usable``
and path helpers).

Each check reads only the nodes it needs and runs when those are free of
schema errors: a bad ``rtol`` does not hide that the same vector's values do
not fill their shape, nor does a bad ``dtype`` hide a missing ``.npy`` file.
A model is built only for a node without any error.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

from ..diagnostics import DocPath, shown
from ..opschema import (CPP_KEYWORDS, MAX_NAME_LENGTH, SUPPORTED_TYPES, WRAPPER_RESERVED_NAMES,
                        OpSchema, OpSchemaError, parse_schema)
from .defaults import _Defaults, _op_with_defaults
from .model import Expected, Op, ScalarInput, TensorInput, Vector
from .inputs import _InputChecks
from .rules import DEFAULT_STACK_SIZE, DEFAULT_TOLERANCES, SCALAR_ARG_TYPES
from .schema import _name_too_long, _suggest

# Stands for an op reference that was reported as bad (vectors then say nothing more).
_BAD_REFERENCE = object()


class _OpChecks(_InputChecks):
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

