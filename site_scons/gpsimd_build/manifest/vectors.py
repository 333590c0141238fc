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

import re
from typing import Any, Dict, List, Optional, Tuple, Union

from ..diagnostics import DocPath, shown
from ..opschema import (CPP_KEYWORDS, MAX_NAME_LENGTH, SUPPORTED_TYPES, OpSchema, OpSchemaError,
                        parse_schema, reserved_clash, reserved_text, wrapper_clash)

from .defaults import _Defaults, _op_with_defaults
from .model import Expected, Op, ScalarInput, TensorInput, Vector
from .exploreblock import _ExploreChecks
from .inputs import _InputChecks
from .shapes import LibraryShapes
from .rules import DEFAULT_STACK_SIZE, DEFAULT_TOLERANCES, MAX_NAME_CHARS, SCALAR_ARG_TYPES
from .schema import _name_too_long, _suggest

# Stands for an op reference that was reported as bad (vectors then say nothing more).
_BAD_REFERENCE = object()
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A vector without an expected result: it runs every check, compares nothing.
_CHECKS_ONLY = object()
#: The error of a checks-only vector that cannot tell its output's shape.
CHECKS_ONLY_NEEDS_SHAPE = (
    "no expected result (no expected: and no reference on the op): a checks-only vector "
    "needs output: {shape: [...]} for the output the host allocates (or shape_sources for "
    "its library, whose shape function gives it); to compare values give expected: "
    "{reference | values | npy} or a reference on the op")


class _OpChecks(_ExploreChecks, _InputChecks):
    """The op and vector checks of a manifest file (mixed into
    :class:`~.document._ManifestFile`)."""

    # -- ops ----------------------------------------------------------------

    def op(self, path: DocPath, op: Any, library: str, names: Dict[str, DocPath],
           defaults: Optional[_Defaults] = None,
           shapes: Optional[LibraryShapes] = None,
           kernels: Optional[Dict[str, DocPath]] = None) -> Optional[Op]:
        """Check one op (schema, name, kernel, reference) and its vectors;
        its model (``stack_size`` from the op, else ``defaults``, else 4196),
        or None. ``shapes``: the library's shape sources as read (None
        without them): the kernel name defaults to the op's ``m.def``, and
        an op without ``schema:`` gets the schema derived from its shape
        function. ``names``, ``kernels``: the library's op names and kernels
        so far (each op registers its own kernel function)."""
        defaults = defaults or _Defaults()
        if not isinstance(op, dict):
            return None
        schema: Optional[OpSchema] = None
        text = op.get("schema")
        derived = False
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
                    name = None
        elif schema is not None:
            name, name_path = schema.name, path + ("schema",)
        if "schema" not in op and self.clean(path):
            if shapes is None:
                self.error(path, "an op needs schema: (it may be left out only in a library "
                                 "with shape_sources, whose shape function gives it)")
            elif "name" not in op:
                self.error(path, "an op without schema: needs name: (the op name its m.def "
                                 "registers)")
            elif name is not None:
                text, why = shapes.derive_schema(library, name)
                if text is None:
                    self.error(path + ("name",), why)
                else:
                    try:
                        schema, derived = parse_schema(text), True
                    except OpSchemaError as err:
                        self.error(path + ("name",), f"the schema derived from the shape "
                                                     f"function, '{shown(text, 200)}', is not "
                                                     f"valid: {shown(err.message, 200)}; give "
                                                     "schema:")
        if schema is not None:
            schema = self.argument_names(path + ("schema" if "schema" in op else "name",),
                                         text if "schema" in op else None, schema)
        kernel, kernel_given = self.kernel_name(path, op, name, shapes)
        if kernel is not None and kernels is not None and (kernel_given or name not in names):
            where = path + (("kernel",) if "kernel" in op else ())
            clash = wrapper_clash(kernel, kernels)
            if kernel in kernels:
                self.error(where, f"kernel '{shown(kernel)}' is already the kernel of the op at "
                                  f"line {self.line(kernels[kernel])}: each op of a library "
                                  "registers a function of its own")
            elif clash is not None:
                base = min(kernel, clash, key=len)
                self.error(where, f"kernel '{shown(kernel)}' clashes with the kernel "
                                  f"'{shown(clash)}' of the op at line "
                                  f"{self.line(kernels[clash])}: the generated wrapper.cpp "
                                  f"defines {base}_wrapper() and {base}_stack_switch() for "
                                  f"'{base}'; rename one")
            else:
                kernels[kernel] = where
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
                                           schema, op_defaults, reference, vector_names,
                                           shapes is not None))
        explore = self.explore_block(path, op, defaults.explore, schema, vectors)
        if schema is None or name is None or kernel is None \
                or not self.clean(path, except_items_of="vectors"):
            return None
        own_reference = reference if not vectors and reference is not _BAD_REFERENCE else None
        return Op(explore=explore, reference=own_reference, name=name, schema=schema, schema_text=str(schema) if derived else text,
                  stack_size=int(op.get("stack_size", defaults.stack_size
                                        if defaults.stack_size is not None
                                        else DEFAULT_STACK_SIZE)),
                  vectors=tuple(vectors), location=self.location(path),  # type: ignore[arg-type]
                  kernel=kernel, schema_derived=derived, kernel_given=kernel_given)

    def kernel_name(self, path: DocPath, op: dict, name: Optional[str],
                    shapes: Optional[LibraryShapes]) -> Tuple[Optional[str], bool]:
        """(the op's kernel function name, whether ``kernel:`` gives it):
        ``kernel:``, else the third argument of the op's ``m.def`` in the
        shape sources, else the op name. It must be a C++ function name the
        generated wrapper can declare (the Neuron SDK's build driver, build_custom_op.py). None
        after reporting."""
        if "kernel" in op:
            if not self.usable(op, "kernel", path + ("kernel",), str):
                return None, True
            kernel, where, given = op["kernel"], path + ("kernel",), True
            what = f"kernel '{shown(kernel)}'"
        else:
            found = shapes.op_def(name) if shapes is not None and name is not None else None
            if found is not None:
                kernel, where, given = found[0].kernel, path, False
                what = (f"the kernel '{shown(kernel)}' that the m.def of op '{shown(name)}' "
                        f"names ({found[1]}:{found[0].line})")
            elif name is not None:
                kernel, where, given = name, (path + ("name",) if "name" in op
                                              else path + ("schema",)), False
                what = f"op name '{name}'"
            else:
                return None, False
        if not _IDENTIFIER.fullmatch(kernel):
            self.error(where, f"{what} is not a C++ function name")
        elif len(kernel) >= MAX_NAME_LENGTH:
            self.error(where, f"{what} is too long ({len(kernel)} characters); CustomOp "
                              f"function names must be less than {MAX_NAME_LENGTH} characters "
                              "(the Neuron SDK's build driver, build_custom_op.py)")
        elif kernel in CPP_KEYWORDS:
            self.error(where, f"{what} is a reserved C++ keyword; the kernel is a C++ function "
                              "of that name")
        elif reserved_clash(kernel) is not None:
            self.error(where, f"{what} clashes with a name the generated wrapper.cpp uses"
                              f"{reserved_text(kernel)}")
        else:
            return kernel, given
        return None, given

    # -- vectors ------------------------------------------------------------

    def vector(self, path: DocPath, vec: Any, library: str, op_name: str,
               schema: Optional[OpSchema], op: dict, op_reference: Any,
               names: Dict[str, DocPath], shaped: bool = False) -> Optional[Vector]:
        """Check one vector against the op's schema (None: the op's schema
        did not parse; the inputs are then checked by their form); its fully
        defaulted model, or None. ``shaped``: the library has shape sources
        (the shape function gives the output: its dtype and shape are not
        defaulted here). A vector without an expected result (its own or
        the op's reference) is a checks-only vector; without shape sources
        it must then give ``output.shape``."""
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
        output_dtype = output.get("dtype") or op_output.get("dtype") \
            or (None if shaped else first_tensor_dtype)
        output_shape = tuple(int(d) for d in output["shape"]) if "shape" in output else None
        if output_dtype is None and not shaped and schema is not None \
                and len(self.diagnostics) == errors_before and self.clean(path):
            self.error(path, "cannot tell the output dtype: give output: {dtype: ...} on the "
                             "vector or the op (no tensor input with a known dtype)")

        expected = self.expected(path, vec, op_reference, output_shape, output_dtype)
        if expected is _CHECKS_ONLY:
            expected = None
            if output_shape is None and not shaped and self.clean(path):
                self.error(path, CHECKS_ONLY_NEEDS_SHAPE)
        elif expected is None:
            return None
        if len(self.diagnostics) != errors_before or (output_dtype is None and not shaped) \
                or schema is None or not self.clean(path):
            return None
        rtol_default, atol_default = DEFAULT_TOLERANCES[output_dtype] if output_dtype \
            else (None, None)
        rtol = vec.get("rtol", op.get("rtol", rtol_default))
        atol = vec.get("atol", op.get("atol", atol_default))
        rtol = None if rtol is None else float(rtol)
        atol = None if atol is None else float(atol)
        return Vector(name=name, inputs=tuple(inputs), output_dtype=output_dtype,
                      output_shape=output_shape, expected=expected, rtol=rtol, atol=atol,
                      location=self.location(path),
                      output_memory=output.get("location", "hbm"),
                      output_dtype_defaulted=not (shaped or output.get("dtype")
                                                  or op_output.get("dtype")))

    def argument_names(self, path: DocPath, text: Optional[str],
                       schema: OpSchema) -> Optional[OpSchema]:
        """``schema``, or None after reporting an argument name longer than
        :data:`MAX_NAME_CHARS` (explore names files after it) at its place in
        ``text`` (the schema written; None: derived)."""
        for arg in schema.arguments:
            if len(arg.name) > MAX_NAME_CHARS:
                at = text.find(arg.name) if text is not None else -1
                self.error(path, f"argument name '{shown(arg.name, 24)}' has {len(arg.name)} "
                                 f"characters; an argument name has at most {MAX_NAME_CHARS} "
                                 "(docs/manifest.md \"Limits of the manifest reader\")",
                           offset=at if at >= 0 else None)
                return None
        return schema

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
                 output_shape: Optional[Tuple[int, ...]], output_dtype: Optional[str]) -> Any:
        """A vector's expected result (its own, else the op's reference),
        :data:`_CHECKS_ONLY` when it has none, or None after reporting.
        ``output_dtype``: None when a shape function gives it (an integer
        dtype, as far as the literals' exactness goes)."""
        if "expected" not in vec:
            if op_reference is _BAD_REFERENCE:
                return None  # the op's reference was reported already
            if op_reference is None:
                return _CHECKS_ONLY
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
        # (an output dtype a shape function gives is known only when the
        # vector runs: its literals are not judged here, docs/manifest.md)
        if not self.clean(epath + ("values",)) or \
                not self.check_values(epath + ("values",), values, output_shape, None) or \
                (output_dtype is not None
                 and not self.exact_literals(epath + ("values",), output_dtype)):
            return None
        return Expected(reference=None, values=values, npy=None)

