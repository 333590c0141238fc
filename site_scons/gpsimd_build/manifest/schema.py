"""The manifest's JSON Schema (``schema/ops.schema.json``, draft 2020-12):
loading it, inlining its local references for speed, and turning
jsonschema's errors into located diagnostics in plain words ("expected a
list, got a string", "unknown key 'soruces' (did you mean 'sources'?)").
"""

import difflib
import functools
import json
import math
from typing import Any, List, Optional, Sequence, Tuple

import jsonschema
from jsonschema.exceptions import best_match

from .. import layout
from ..diagnostics import Diagnostic, DocPath, shown, shown_repr
from ..opschema import MAX_NAME_LENGTH
from ..yamlloc import LocatedDocument
from .rules import MAX_DIAGNOSTICS_PER_FILE, MAX_DIM_SIZE, MAX_DIM_SIZE_4D, MAX_DIMS, MAX_DIMS_4D
from .rules import MAX_NAME_CHARS, MAX_VECTOR_NAME_CHARS

#: The JSON Schema of the manifest (``schema/ops.schema.json`` in a checkout,
#: package data when installed: ``gpsimd_build.layout``).
SCHEMA_PATH = layout.SCHEMA_PATH


@functools.lru_cache(maxsize=None)
def load_schema() -> dict:
    """The manifest's JSON Schema (:data:`SCHEMA_PATH`) as a dict.

    Raises ``OSError``/``ValueError`` if the installed schema file is missing
    or broken (an installation problem, not a manifest problem)."""
    with open(SCHEMA_PATH, encoding="utf-8") as stream:
        return json.load(stream)


_ANNOTATIONS = frozenset(("description", "title", "$comment", "examples", "default"))


def inline_refs(schema: dict) -> dict:
    """The schema with every local ``{"$ref": "#/$defs/X"}`` replaced by a copy
    of ``X`` (recursively), for validation speed: resolving thousands of
    references through jsonschema's registry costs more than validating
    (BENCHMARKS.md). Keys beside a ``$ref`` are kept: merged when they are
    annotations or new keywords, else through ``allOf``. A recursive
    reference is left as it is. The instance paths of errors are unchanged.
    """
    defs = schema.get("$defs", {})

    def inline(node, active):
        if isinstance(node, list):
            return [inline(v, active) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs \
                and ref[8:] not in active:
            target = inline(defs[ref[8:]], active | {ref[8:]})
            siblings = {k: inline(v, active) for k, v in node.items() if k != "$ref"}
            clash = [k for k in siblings if k in target and k not in _ANNOTATIONS]
            if clash:
                return {"allOf": [target], **siblings}
            return {**target, **siblings}
        return {k: (v if k == "$defs" else inline(v, active)) for k, v in node.items()}

    return inline(schema, frozenset())


@functools.lru_cache(maxsize=None)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(inline_refs(load_schema()))


_TYPE_WORDS = {
    "object": "a mapping", "array": "a list", "string": "a string",
    "integer": "an integer", "number": "a number",
    "boolean": "a boolean (true or false)", "null": "null",
}

#: (each pattern ends in (?!\n)$: a Python ``$`` (jsonschema's re.search) also
#: matches before a final newline, and "relu\n" would be a name; ECMA-262 reads it alike)
_PATTERN_WORDS = {
    "^[A-Za-z_][A-Za-z0-9_]*(?!\\n)$":
        "is not a C identifier (letters, digits and '_', not starting with a digit)",
    "^[^:\\n]+:[A-Za-z_][A-Za-z0-9_]*(?!\\n)$":
        "is not a reference: write 'path/file.py:function' or 'dotted.module:function'",
    "^[A-Za-z0-9_][A-Za-z0-9_.-]*(?!\\n)$":
        "is not a valid vector name (letters, digits, '_', '-' and '.')",
}

#: YAML 1.1 boolean words that YAML 1.2 (this loader) reads as strings.
_YAML11_BOOLS = frozenset(("y", "n", "yes", "no", "on", "off"))

#: Keys of a library that its ``defaults:`` cannot give (they belong to the library).
_LIBRARY_KEYS = frozenset(("name", "sources", "shape_sources", "includes", "cflags", "multicore",
                           "ops"))

_LIST_NOUNS = {
    "libraries": "the manifest needs at least one library",
    "sources": "a library needs at least one source file",
    "shape_sources": "shape_sources lists at least one file (leave the key out for none)",
    "ops": "a library needs at least one op",
}


def _describe(value: Any) -> str:
    """``value`` in words for "got ..." (YAML spelling)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({shown_repr(value, 40)})"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def _key_name(path: DocPath) -> Optional[str]:
    """The last mapping key of ``path`` (the property a value belongs to)."""
    for elem in reversed(path):
        if isinstance(elem, str):
            return elem
    return None


def _suggest(word: str, candidates: Sequence[str]) -> Optional[str]:
    if len(word) > 64:  # no name is that long; difflib's time grows with it
        return None
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def _schema_diagnostics(doc: LocatedDocument, error: jsonschema.ValidationError) -> List[Diagnostic]:
    """One jsonschema error as located diagnostics (readable messages)."""
    if error.validator == "anyOf" and not error.absolute_path:
        return [doc.diagnostic((), "a manifest needs 'libraries', 'include' or both")]
    if error.context:  # anyOf / oneOf: report the most relevant sub-error
        return _schema_diagnostics(doc, best_match(error.context))
    path: DocPath = tuple(error.absolute_path)
    kind, expect, value = error.validator, error.validator_value, error.instance
    key = _key_name(path)
    parent = path[-2] if len(path) >= 2 else None

    if kind == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        extra = [k for k in value if k not in known] if isinstance(value, dict) else []
        del extra[MAX_DIAGNOSTICS_PER_FILE + 1:]
        diags = []
        for name in extra:
            message = f"unknown key '{shown(name)}'"
            guess = _suggest(name, known)
            if key == "defaults" and isinstance(parent, int) and name in _LIBRARY_KEYS:
                message += (f" (a library's defaults give {', '.join(known)}; set '{name}' "
                            "on the library itself)")
            elif guess:
                message += f" (did you mean '{guess}'?)"
            elif known:
                message += f" (expected one of: {', '.join(known)})"
            diags.append(doc.diagnostic(path + (name,), message, key=True))
        return diags
    if kind == "required":
        missing = [k for k in expect if isinstance(value, dict) and k not in value]
        diags = []
        for name in missing:
            message = f"missing required key '{name}'"
            if name in ("dtype", "shape") and parent == "inputs":
                message += " (a tensor input needs dtype and shape unless it reads npy)"
            diags.append(doc.diagnostic(path, message))
        return diags
    if kind == "type":
        wanted = expect if isinstance(expect, list) else [expect]
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in wanted)
        message = f"expected {words}, got {_describe(value)}"
        if "boolean" in wanted and isinstance(value, str) and value.lower() in _YAML11_BOOLS:
            message += (f"; this file is YAML 1.2, where '{value}' is a string (YAML 1.1 read "
                        "it as a boolean): write true or false")
        return [doc.diagnostic(path, message)]
    if kind == "enum":
        noun = "dtype" if key in ("dtype",) else (key or "value")
        guess = _suggest(str(value), [str(e) for e in expect])
        if guess:
            message = f"unknown {noun} {shown_repr(value)} (did you mean {guess!r}?)"
        else:
            message = (f"unknown {noun} {shown_repr(value)} (expected one of: "
                       f"{', '.join(map(str, expect))})")
        return [doc.diagnostic(path, message)]
    if kind == "const":
        if path == ("version",):
            message = (f"unsupported manifest version {shown_repr(value)} (this build reads "
                       f"version {expect})")
        else:
            message = f"expected {expect!r}, got {shown_repr(value)}"
        return [doc.diagnostic(path, message)]
    if kind == "maxItems":
        count = len(value) if isinstance(value, list) else 0
        if key == "shape":
            message = (f"a tensor has at most {expect} dimensions (docs/kernel-api.md, Limits); "
                       f"this shape has {count}")
        elif key == "ops":
            message = (f"a library has at most {expect} ops (docs/kernel-api.md, Limits); "
                       f"this one has {count}")
        else:
            message = f"at most {expect} items allowed, got {count}"
        return [doc.diagnostic(path + (expect,), message)]
    if kind == "minItems":
        message = _LIST_NOUNS.get(key or "", f"needs at least {expect} item(s)")
        return [doc.diagnostic(path, message)]
    if kind in ("maximum", "exclusiveMaximum"):
        if parent == "shape" and expect == MAX_DIM_SIZE:
            message = (f"dimension {value} is larger than {expect}, the largest dimension of "
                       f"a tensor of {MAX_DIMS_4D + 1} to {MAX_DIMS} dimensions (at most "
                       f"{MAX_DIMS_4D} dimensions: up to {MAX_DIM_SIZE_4D}; "
                       "docs/kernel-api.md, Limits)")
        elif parent == "shape":
            message = (f"dimension {value} is larger than {expect}, the largest a tensor "
                       "dimension may be (docs/kernel-api.md, Limits)")
        elif key == "stack_size":
            message = (f"stack_size {value} is larger than {expect} bytes, the 400 KB "
                       "the device allows (docs/kernel-api.md, Limits)")
        else:
            message = f"{value} is larger than the maximum {expect}"
        return [doc.diagnostic(path, message)]
    if kind in ("minimum", "exclusiveMinimum"):
        if parent == "shape":
            message = f"dimension {value} is negative"
        elif key in ("rtol", "atol", "std"):
            message = f"{key} must not be negative, got {value}"
        else:
            message = f"{value} is less than the minimum {expect}"
        return [doc.diagnostic(path, message)]
    if kind == "maxLength":
        if key == "name" and parent is not None and isinstance(parent, int) and len(path) >= 3 \
                and path[-3] == "ops":
            message = _name_too_long(str(value))
        elif expect in (MAX_NAME_CHARS, MAX_VECTOR_NAME_CHARS) and isinstance(value, str):
            what = "vector name" if path[-3:-2] == ("vectors",) else \
                "library name" if path[-3:-2] == ("libraries",) else "name"
            message = (f"{what} '{shown(value, 24)}' has {len(value)} characters; a {what} "
                       f"has at most {expect} (the build names files and prints lines after "
                       "it; docs/manifest.md \"Limits of the manifest reader\")")
        else:
            message = f"{shown_repr(value)} is longer than {expect} characters"
        return [doc.diagnostic(path, message)]
    if kind == "minLength":
        return [doc.diagnostic(path, "must not be empty")]
    if kind == "pattern":
        words = _PATTERN_WORDS.get(expect, f"does not match {expect!r}")
        return [doc.diagnostic(path, f"{shown_repr(value)} {words}")]
    return [doc.diagnostic(path, shown(error.message, 200))]


def _name_too_long(name: str) -> str:
    return (f"op name '{shown(name)}' is too long ({len(name)} characters); CustomOp function "
            f"names must be less than {MAX_NAME_LENGTH} characters (the Neuron SDK's build driver, build_custom_op.py)")


def _without_values(document: Any) -> Tuple[Any, List[Tuple[DocPath, str]]]:
    """(a view of ``document`` for jsonschema, the problems of its
    ``values``): every ``values`` list of a tensor input or an expected
    result is checked here (numbers or nested lists of numbers, the schema's
    ``$defs.values``) and stands as ``0`` in the view, so that jsonschema,
    which spends about 14 us per element, never walks them. Only the
    containers on the way to a replaced list are copied."""
    problems: List[Tuple[DocPath, str]] = []
    libraries = document.get("libraries") if isinstance(document, dict) else None
    if not isinstance(libraries, list):
        return document, problems
    view_libs = None
    for i, lib in enumerate(libraries):
        ops = lib.get("ops") if isinstance(lib, dict) else None
        if not isinstance(ops, list):
            continue
        view_ops = None
        for j, op in enumerate(ops):
            vectors = op.get("vectors") if isinstance(op, dict) else None
            if not isinstance(vectors, list):
                continue
            view_vectors = None
            for k, vec in enumerate(vectors):
                if not isinstance(vec, dict):
                    continue
                base = ("libraries", i, "ops", j, "vectors", k)
                new_vec = _vector_without_values(vec, base, problems)
                if new_vec is not vec:
                    view_vectors = view_vectors or list(vectors)
                    view_vectors[k] = new_vec
            if view_vectors is not None:
                view_ops = view_ops or list(ops)
                view_ops[j] = dict(op, vectors=view_vectors)
        if view_ops is not None:
            view_libs = view_libs or list(libraries)
            view_libs[i] = dict(lib, ops=view_ops)
    if view_libs is None:
        return document, problems
    return dict(document, libraries=view_libs), problems


def _nonfinite_tolerances(document: Any) -> List[Tuple[DocPath, str]]:
    """Every ``rtol``/``atol`` that is NaN or infinite (the schema's
    ``minimum`` lets NaN through and takes ``.inf``; an infinite tolerance
    passes any output), at each level that may give one."""
    problems: List[Tuple[DocPath, str]] = []

    def check(mapping: Any, base: DocPath) -> None:
        for key in ("rtol", "atol"):
            value = mapping.get(key) if isinstance(mapping, dict) else None
            if isinstance(value, float) and not math.isfinite(value):
                why = "a NaN tolerance makes every comparison fail" if math.isnan(value) \
                    else "an infinite tolerance passes any output"
                problems.append((base + (key,), f"{key} must be a finite number, got {value} "
                                 f"({why})"))
    if not isinstance(document, dict):
        return problems
    check(document.get("defaults"), ("defaults",))
    libraries = document.get("libraries")
    for i, lib in enumerate(libraries if isinstance(libraries, list) else []):
        if not isinstance(lib, dict):
            continue
        check(lib.get("defaults"), ("libraries", i, "defaults"))
        ops = lib.get("ops")
        for j, op in enumerate(ops if isinstance(ops, list) else []):
            check(op, ("libraries", i, "ops", j))
            vectors = op.get("vectors") if isinstance(op, dict) else None
            for k, vec in enumerate(vectors if isinstance(vectors, list) else []):
                check(vec, ("libraries", i, "ops", j, "vectors", k))
    return problems


def _vector_without_values(vec: dict, base: DocPath,
                           problems: List[Tuple[DocPath, str]]) -> dict:
    new_vec = vec
    inputs = vec.get("inputs")
    if isinstance(inputs, dict):
        new_inputs = None
        for name, given in inputs.items():
            if isinstance(given, dict) and "value" not in given \
                    and isinstance(given.get("values"), list):
                _check_values(given["values"], base + ("inputs", name, "values"), problems)
                new_inputs = new_inputs or dict(inputs)
                new_inputs[name] = dict(given, values=0)
        if new_inputs is not None:
            new_vec = dict(vec, inputs=new_inputs)
    expected = vec.get("expected")
    if isinstance(expected, dict) and isinstance(expected.get("values"), list):
        _check_values(expected["values"], base + ("expected", "values"), problems)
        new_vec = dict(new_vec, expected=dict(expected, values=0))
    return new_vec


def _check_values(values: list, path: DocPath, problems: List[Tuple[DocPath, str]]) -> None:
    """The schema's ``$defs.values`` on a nested list (iteratively), in
    jsonschema's order and words."""
    stack = [(values, path)]
    while stack:
        node, where = stack.pop()
        for index in range(len(node) - 1, -1, -1):
            item = node[index]
            if isinstance(item, list):
                stack.append((item, where + (index,)))
            elif not isinstance(item, (int, float)) or isinstance(item, bool):
                problems.append((where + (index,),
                                 f"expected a list or a number, got {_describe(item)}"))
                if len(problems) > MAX_DIAGNOSTICS_PER_FILE:
                    return
