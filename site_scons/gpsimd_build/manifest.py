"""The manifest front door: load ``ops.yaml``, validate it, return a typed model.

``load_manifest(path, root=".")`` loads the top manifest and every manifest
it includes, runs three stages on each file and the cross-file rules on the
whole collection, and reports every problem of all of them at once, each
located at ``FILE:LINE:COL`` with its document path (see
:mod:`gpsimd_build.diagnostics`), sorted by file, line and column:

1. YAML (:mod:`gpsimd_build.yamlloc`): syntax, tab indentation, duplicate
   keys, empty file, several documents, unreadable or undecodable file. A
   failure here stops loading.
2. JSON Schema (``schema/ops.schema.json``, draft 2020-12): shapes and types,
   unknown keys (with a "did you mean"), required keys, enums, the limits of
   ``device-api.md`` "Limits" (at most 10 ops per library, at most 8
   dimensions of at most 65535 each). All errors are collected.
3. Semantic checks, run on every part of the document that passed the
   schema: op schemas parse (:func:`gpsimd_build.opschema.parse_schema`),
   op names are shorter than 32 characters (``build-front-end.txt`` §4) and
   unique in their library, library names are unique and not ``builtin``
   (device-api.md "Limits"), vector names are unique in their op, vector
   inputs name exactly the schema's arguments with the right kind (tensor for
   ``Tensor``, scalar for ``Scalar``/``int``/``float``/``long long``),
   referenced files exist, literal values fit their shape and dtype, every
   vector has an expected result.

Composition (a monorepo whose teams each own a manifest):

* ``include:`` lists relative paths or globs of other manifests (globs
  resolved in sorted order, never matching the including file). Paths in an
  included manifest are relative to its own folder. Each file is loaded once
  by real path; a diamond (a file reached through two includes) is fine as
  long as both places give it the same effective defaults, else an error at
  the second include entry. Cycles, missing files, directories, absolute
  entries, globs without a match and an entry listed twice are errors at the
  include entry. Library order: a manifest's own libraries, then those of
  its includes, depth first.
* ``defaults:`` (top of any manifest: ``cflags``, ``includes``,
  ``multicore``, ``stack_size``, ``rtol``, ``atol``; a library's
  ``defaults:``: ``stack_size``, ``rtol``, ``atol``). A value comes from the
  nearest level that sets it: vector > op > library (its own keys, then its
  ``defaults:``) > the declaring manifest's ``defaults:`` > the including
  manifests' ``defaults:``, nearest first > built-in (``DEFAULT_STACK_SIZE``,
  ``DEFAULT_TOLERANCES`` by output dtype, no flags, single-core). Lists are
  replaced, not appended.
* Cross-file rules: a library name used twice anywhere in the collection is
  reported at every place (``also at line N`` in the same file, ``also at
  FILE:LINE:COL`` in another); a collection without any library is an error.

YAML 1.1 booleans: the loader reads YAML 1.2 (as the YAML language server
does), so a library, op, vector or argument named ``on``/``off``/``yes``/
``no``/``y``/``n`` is that string; where a boolean is expected, such a word
is an error that says to write ``true``/``false``.

The model is frozen dataclasses (:class:`Collection` > :class:`Library` >
:class:`Op` > :class:`Vector` > :class:`TensorInput` / :class:`ScalarInput`)
with every default filled in, and every path a normalised POSIX path relative
to ``root`` (the directory SCons runs in), so a build does not depend on
where the project sits.

The code keeps "which file" explicit: :class:`_ManifestFile` resolves paths
against its own folder, applies the defaults it inherits and makes its own
diagnostics; :class:`_CollectionLoader` follows the includes and runs the
cross-file rules.
"""

import ast
import difflib
import functools
import gc
import glob
import json
import math
import os
import re
import struct
import zlib
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import jsonschema
from jsonschema.exceptions import best_match

from gpsimd_device import dtypes as _dtypes
from gpsimd_device import limits as _limits

from .diagnostics import Diagnostic, DiagnosticError, DocPath, Location
from .opschema import (CPP_KEYWORDS, MAX_NAME_LENGTH, SUPPORTED_TYPES, WRAPPER_RESERVED_NAMES,
                       OpSchema, OpSchemaError, parse_schema)
from .yamlloc import LocatedDocument, YamlError, load_yaml_file

__all__ = [
    "DTYPES", "INTEGER_DTYPES", "FLOAT8_DTYPES", "SCALAR_DTYPES", "SCALAR_ARG_TYPES",
    "DEFAULT_TOLERANCES", "DEFAULT_STACK_SIZE", "MAX_STACK_SIZE", "MAX_OPS_PER_LIBRARY",
    "MAX_DIMS", "MAX_DIM_SIZE", "MAX_INCLUDE_DEPTH", "RESERVED_LIBRARY_NAMES",
    "MANIFEST_VERSION", "SCHEMA_PATH",
    "Location", "Diagnostic", "ManifestError", "Reference", "Random", "TensorInput", "ScalarInput",
    "Expected", "Vector", "Op", "Library", "Collection", "load_manifest", "load_schema",
    "default_seed",
]

# ---------------------------------------------------------------------------
# Constants (the schema file repeats some of them; tests keep them equal)
# ---------------------------------------------------------------------------

#: The manifest format this module reads.
MANIFEST_VERSION = 1

#: Every dtype a tensor may have, by its numpy / ml_dtypes name, in the order
#: of the one dtype table (``gpsimd_host/dtypes.h``, read by
#: ``gpsimd_device.dtypes``); ``schema/ops.schema.json`` ``$defs.dtype.enum``
#: must equal it (a test checks).
DTYPES: Tuple[str, ...] = _dtypes.names()

#: Integer dtypes and their inclusive value ranges.
INTEGER_DTYPES: Dict[str, Tuple[int, int]] = _dtypes.INTEGER_RANGES

#: The three 8-bit float formats (ml_dtypes names).
FLOAT8_DTYPES: Tuple[str, ...] = tuple(d.name for d in _dtypes.DTYPES.values()
                                       if d.is_float and d.itemsize == 1)

#: Dtypes a scalar argument may travel as (ARCHITECTURE.md "The test plan").
SCALAR_DTYPES: Tuple[str, ...] = ("float32", "int32", "int64")

#: Scalar argument types and their default dtype (None: by the value, float32
#: for a float, int64 for an integer). ``Tensor`` is the only other type.
SCALAR_ARG_TYPES: Dict[str, Optional[str]] = {
    "int": "int32", "long long": "int64", "float": "float32", "Scalar": None,
}

#: Default (rtol, atol) of a vector by its output dtype (the dtype table).
DEFAULT_TOLERANCES: Dict[str, Tuple[float, float]] = _dtypes.TOLERANCES

#: Default launcher stack, bytes (STACK_SIZE of stack_switch.hpp, build-front-end.txt §3c).
DEFAULT_STACK_SIZE = _limits.DEFAULT_STACK_SIZE
#: Largest stack_size, bytes: "-DSTACK_SIZE=N up to 400 KB" (device-api.md Limits).
MAX_STACK_SIZE = _limits.MAX_STACK_SIZE
#: At most 10 functions per library (device-api.md Limits).
MAX_OPS_PER_LIBRARY = _limits.MAX_OPS_PER_LIBRARY
#: At most 8 dimensions per tensor (device-api.md Limits).
MAX_DIMS = _limits.MAX_DIMS
#: Each dimension at most 65535 (device-api.md Limits).
MAX_DIM_SIZE = _limits.MAX_DIM_SIZE
#: Largest finite value of each floating-point dtype: a literal beyond it
#: would silently become an infinity.
FLOAT_MAX = _dtypes.FLOAT_MAX
#: Elements of one tensor: the descriptor's num_elem is a uint32
#: (customop-marshalling.txt §2, +32 HBM / +28 SBUF).
MAX_ELEMENTS = _limits.MAX_ELEMENTS
#: Deepest chain of ``include:`` (a guard, far beyond any real tree).
MAX_INCLUDE_DEPTH = 64
#: Library names the device reserves (device-api.md Limits).
RESERVED_LIBRARY_NAMES: Tuple[str, ...] = (_limits.RESERVED_LIBRARY_NAME,)

#: The JSON Schema of the manifest: <package>/../../schema/ops.schema.json.
SCHEMA_PATH = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "schema", "ops.schema.json"))

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_FLOAT32_MAX = FLOAT_MAX["float32"]
# Stands for an op reference that was reported as bad (vectors then say nothing more).
_BAD_REFERENCE = object()

# ---------------------------------------------------------------------------
# The typed model
# ---------------------------------------------------------------------------


class ManifestError(DiagnosticError):
    """The manifest cannot be used. ``diagnostics`` lists every problem found,
    sorted by (file, line, column); ``str()`` is one
    ``FILE:LINE:COL: $.path: message`` line per problem."""


@dataclass(frozen=True)
class Reference:
    """A reference function computing a vector's expected output.

    Exactly one of ``file`` (a ``.py`` file, POSIX path relative to the root)
    and ``module`` (a dotted, importable module name such as ``numpy``) is
    set; ``function`` names the function in it. It is called with the inputs
    in schema order and returns the expected array.
    """

    file: Optional[str]
    module: Optional[str]
    function: str


@dataclass(frozen=True)
class Random:
    """A random input's distribution, fully defaulted: ``uniform`` on
    [``low``, ``high``) (floats, default -1, 1), ``normal`` with ``mean`` /
    ``std`` (floats, default 0, 1) or ``integers`` on [``low``, ``high``)
    (ints, default 0, 10); the parameters of other distributions are None.
    ``seed`` is the manifest's or :func:`default_seed`."""

    distribution: str
    seed: int
    low: Optional[Union[int, float]] = None
    high: Optional[Union[int, float]] = None
    mean: Optional[float] = None
    std: Optional[float] = None


@dataclass(frozen=True)
class TensorInput:
    """A tensor input of a vector, for a ``Tensor`` argument named ``name``.

    Exactly one of ``random``, ``values``, ``npy`` (a path relative to the
    root) is set. ``dtype`` (one of :data:`DTYPES`) and ``shape`` (tuple of
    ints) are always set: with ``npy`` they are read from the file's header
    (``dtype`` from the manifest when the file holds raw bytes, as numpy saves
    ml_dtypes' bfloat16/fp8). ``random`` is fully defaulted: ``distribution``,
    ``seed`` and the distribution's parameters (``low``/``high`` floats for
    uniform, ``mean``/``std`` floats for normal, ``low``/``high`` ints for
    integers, high exclusive). ``values`` is the nested list as written.
    """

    name: str
    dtype: Optional[str]
    shape: Optional[Tuple[int, ...]]
    random: Optional[Random]
    values: Optional[list]
    npy: Optional[str]
    location: Location
    #: where the host places the tensor: "hbm" or "sbuf" (manifest key
    #: ``location``; customop-marshalling.txt §2 storage arms, §6.1).
    memory: str = "hbm"


@dataclass(frozen=True)
class ScalarInput:
    """A scalar input of a vector, for a ``Scalar``/``int``/``float``/
    ``long long`` argument named ``name``. ``dtype`` is one of
    :data:`SCALAR_DTYPES` (defaulted by :data:`SCALAR_ARG_TYPES`); ``value``
    is an ``int`` for an integer dtype and a ``float`` for float32."""

    name: str
    value: Union[int, float]
    dtype: str
    location: Location


@dataclass(frozen=True)
class Expected:
    """A vector's expected result: exactly one of ``reference``, ``values``
    (nested list, reshaped to the output shape) or ``npy`` (a path relative
    to the root)."""

    reference: Optional[Reference]
    values: Optional[list]
    npy: Optional[str]


@dataclass(frozen=True)
class Vector:
    """One test vector of an op.

    ``inputs`` has one :class:`TensorInput`/:class:`ScalarInput` per schema
    argument, in schema order. ``output_dtype`` is defaulted (vector, then
    op, then the first tensor input's dtype); ``output_shape`` is ``None``
    for "the shape of the expected array". ``rtol``/``atol`` are defaulted
    (vector, op, then :data:`DEFAULT_TOLERANCES` of the output dtype).
    ``location`` is where the vector's mapping starts.
    """

    name: str
    inputs: Tuple[Union["TensorInput", "ScalarInput"], ...]
    output_dtype: str
    output_shape: Optional[Tuple[int, ...]]
    expected: Expected
    rtol: float
    atol: float
    location: Location
    #: where the host places the output: "hbm" or "sbuf" (``output.location``).
    output_memory: str = "hbm"


@dataclass(frozen=True)
class Op:
    """One op of a library: ``name`` is the kernel's C function name (and the
    registered name; shorter than 32 characters, build-front-end.txt §4),
    ``schema`` the parsed schema, ``schema_text`` the schema as written,
    ``stack_size`` the launcher stack in bytes (default 4196, §3c),
    ``vectors`` its test vectors in manifest order."""

    name: str
    schema: OpSchema
    schema_text: str
    stack_size: int
    vectors: Tuple[Vector, ...]
    location: Location


@dataclass(frozen=True)
class Library:
    """One custom-op library: ``sources``/``includes`` are POSIX paths
    relative to the root, ``cflags`` the extra compiler flags in order,
    ``ops`` 1..10 ops in registration order, ``manifest`` the path (relative
    to the root) of the manifest that declares it."""

    name: str
    multicore: bool
    sources: Tuple[str, ...]
    includes: Tuple[str, ...]
    cflags: Tuple[str, ...]
    ops: Tuple[Op, ...]
    location: Location
    manifest: str


@dataclass(frozen=True)
class Collection:
    """A loaded collection: ``manifest`` the top manifest's path relative to
    the root (POSIX), ``libraries`` in collection order (each manifest's own
    libraries, then those of its includes, depth first), names unique across
    every file. ``manifests`` lists every manifest file read (the top one
    first, then each included one once, in load order), root-relative POSIX
    paths: what a build that caches the model must watch."""

    manifest: str
    libraries: Tuple[Library, ...]
    manifests: Tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def default_seed(library: str, op: str, vector: str, argument: str) -> int:
    """The seed of a random input without one: ``zlib.crc32`` of
    ``"library/op/vector/argument"`` (UTF-8), so it is stable across runs and
    machines and two inputs of one vector differ."""
    return zlib.crc32(f"{library}/{op}/{vector}/{argument}".encode("utf-8"))


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


def load_manifest(path: Union[str, "os.PathLike[str]"], *, root: Union[str, "os.PathLike[str]"] = ".") -> Collection:
    """Load, validate and model the collection whose top manifest is ``path``.

    ``path`` is used as given in diagnostics (``FILE`` of ``FILE:LINE:COL``);
    an included manifest is named by joining the including manifest's name
    with the include entry (``teams/vision/ops.yaml``). Paths written in a
    manifest (sources, include directories, ``.npy`` files, reference ``.py``
    files, ``include:`` entries, ``defaults.includes``) are relative to that
    manifest's own folder; paths in the model are normalised POSIX paths
    relative to ``root``. Files the manifests name must exist.

    ``include:`` entries are relative paths or globs (``*``, ``?``, ``[..]``,
    ``**``); a glob's matches are taken in sorted order and never include the
    including file itself. A manifest reached twice (a diamond: the top
    includes ``teams/*/ops.yaml`` and ``vision`` includes ``../shared``) is
    loaded once, at its first place in depth-first order; it is an error if
    it would inherit different ``defaults:`` at its second place (its
    libraries are built once). Include cycles, missing files, globs that
    match nothing, absolute entries and an entry listed twice are errors at
    the include entry.

    ``defaults:`` (precedence: vector > op > library (``defaults:`` of the
    library for op/vector keys) > the declaring manifest's ``defaults:`` >
    the defaults of the manifests that include it, nearest first > built-in
    values) give ``cflags``, ``includes``, ``multicore``, ``stack_size``,
    ``rtol``, ``atol``; the nearest level that sets a key gives its whole
    value (lists are replaced, not appended).

    Every file is checked completely before the result is returned, and
    every problem of every file is reported (YAML, JSON Schema, semantic
    checks, cross-file rules: a library name used twice anywhere is reported
    at each place). Limits: build-front-end.txt §2-§4 (op schemas, 32-char
    op names) and device-api.md "Limits" (10 ops, ``builtin``, 8 dims of
    at most 65535).

    Raises :class:`ManifestError` with every problem found, sorted by file,
    line and column (never another exception for bad input: a missing file,
    a directory, undecodable bytes or a YAML list each give a
    ``FILE:1:1: $: ...`` diagnostic).
    """
    # The load builds many small objects that all stay alive: the cyclic
    # garbage collector would only rescan them (BENCHMARKS.md).
    gc_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_collection(path, root)
    finally:
        if gc_enabled:
            gc.enable()


def _load_collection(path, root) -> "Collection":
    loader = _CollectionLoader(os.fspath(root))
    top = loader.load(os.fspath(path), _Defaults(), None)
    loader.check_unique_library_names()
    if top is not None and not loader.diagnostics and not loader.libraries:
        loader.diagnostics.append(Diagnostic(
            top.display, 1, 1, (), "the collection has no library (its manifests "
            "give no 'libraries')"))
    if loader.diagnostics or top is None:
        raise ManifestError(loader.diagnostics or [
            Diagnostic(os.fspath(path), 1, 1, (), "the manifest could not be loaded")])
    return Collection(top.model_file,
                      tuple(lib for lib, _, _ in loader.libraries),  # type: ignore[misc]
                      tuple(f.model_file for f in loader.files))


# ---------------------------------------------------------------------------
# JSON Schema errors -> diagnostics
# ---------------------------------------------------------------------------

_TYPE_WORDS = {
    "object": "a mapping", "array": "a list", "string": "a string",
    "integer": "an integer", "number": "a number",
    "boolean": "a boolean (true or false)", "null": "null",
}

_PATTERN_WORDS = {
    "^[A-Za-z_][A-Za-z0-9_]*$":
        "is not a C identifier (letters, digits and '_', not starting with a digit)",
    "^[^:]+:[A-Za-z_][A-Za-z0-9_]*$":
        "is not a reference: write 'path/file.py:function' or 'dotted.module:function'",
    "^[A-Za-z0-9_][A-Za-z0-9_.-]*$":
        "is not a valid vector name (letters, digits, '_', '-' and '.')",
}

#: YAML 1.1 boolean words that YAML 1.2 (this loader) reads as strings.
_YAML11_BOOLS = frozenset(("y", "n", "yes", "no", "on", "off"))

#: Keys of a library that its ``defaults:`` cannot give (they belong to the library).
_LIBRARY_KEYS = frozenset(("name", "sources", "includes", "cflags", "multicore", "ops"))

_LIST_NOUNS = {
    "libraries": "the manifest needs at least one library",
    "sources": "a library needs at least one source file",
    "ops": "a library needs at least one op",
    "vectors": "an op needs at least one test vector",
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
        return f"a string ({value!r})"
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
        diags = []
        for name in extra:
            message = f"unknown key '{name}'"
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
            message = f"unknown {noun} {value!r} (did you mean {guess!r}?)"
        else:
            message = f"unknown {noun} {value!r} (expected one of: {', '.join(map(str, expect))})"
        return [doc.diagnostic(path, message)]
    if kind == "const":
        if path == ("version",):
            message = f"unsupported manifest version {value!r} (this build reads version {expect})"
        else:
            message = f"expected {expect!r}, got {value!r}"
        return [doc.diagnostic(path, message)]
    if kind == "maxItems":
        count = len(value) if isinstance(value, list) else 0
        if key == "shape":
            message = (f"a tensor has at most {expect} dimensions (device-api.md Limits); "
                       f"this shape has {count}")
        elif key == "ops":
            message = (f"a library has at most {expect} ops (device-api.md Limits); "
                       f"this one has {count}")
        else:
            message = f"at most {expect} items allowed, got {count}"
        return [doc.diagnostic(path + (expect,), message)]
    if kind == "minItems":
        message = _LIST_NOUNS.get(key or "", f"needs at least {expect} item(s)")
        return [doc.diagnostic(path, message)]
    if kind in ("maximum", "exclusiveMaximum"):
        if parent == "shape":
            message = (f"dimension {value} is larger than {expect}, the largest a tensor "
                       "dimension may be (device-api.md Limits)")
        elif key == "stack_size":
            message = (f"stack_size {value} is larger than {expect} bytes, the 400 KB "
                       "the device allows (device-api.md Limits)")
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
        else:
            message = f"{value!r} is longer than {expect} characters"
        return [doc.diagnostic(path, message)]
    if kind == "minLength":
        return [doc.diagnostic(path, "must not be empty")]
    if kind == "pattern":
        words = _PATTERN_WORDS.get(expect, f"does not match {expect!r}")
        return [doc.diagnostic(path, f"{value!r} {words}")]
    return [doc.diagnostic(path, error.message)]


def _name_too_long(name: str) -> str:
    return (f"op name '{name}' is too long ({len(name)} characters); CustomOp function "
            f"names must be less than {MAX_NAME_LENGTH} characters (build-front-end.txt §4)")


# ---------------------------------------------------------------------------
# .npy headers (stdlib only: the build side never imports numpy)
# ---------------------------------------------------------------------------

_NPY_DTYPES = {
    "<f4": "float32", "<f2": "float16",
    "|i1": "int8", "<i2": "int16", "<i4": "int32", "<i8": "int64",
    "|u1": "uint8", "<u2": "uint16", "<u4": "uint32", "<u8": "uint64",
}

#: Bytes per element of each dtype.
_ITEMSIZE = {d.name: d.itemsize for d in _dtypes.DTYPES.values()}


def _top_level_names(path: str):
    """The names a reference file binds at top level (def, class, assignment,
    import), read with ``ast`` without running it; None when the file can
    bind names the reading cannot see (``from x import *``, ``globals()``);
    a message string when it cannot be parsed. Cached per file version."""
    try:
        st = os.stat(path)
    except OSError as err:
        return f"cannot be read ({err})"
    return _parse_top_level_names(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _parse_top_level_names(path: str, mtime_ns: int, size: int):
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except SyntaxError as err:
        return f"does not parse: line {err.lineno}: {err.msg}"
    except (OSError, ValueError) as err:
        return f"cannot be read ({err})"
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        else:
            # conditional definitions (if/try at top level) or globals(): don't guess
            for n in ast.walk(node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                  ast.Assign, ast.Import, ast.ImportFrom)) or \
                        (isinstance(n, ast.Name) and n.id == "globals"):
                    return None
    return frozenset(names)


def _read_npy_header(path: str) -> Tuple[str, Tuple[int, ...]]:
    """(descr, shape) of a .npy file; raises ValueError (why) or OSError."""
    with open(path, "rb") as stream:
        head = stream.read(12)
        if len(head) < 10 or head[:6] != b"\x93NUMPY":
            raise ValueError("no .npy magic")
        major = head[6]
        if major == 1:
            (size,) = struct.unpack("<H", head[8:10])
            start = 10
        elif major in (2, 3):
            if len(head) < 12:
                raise ValueError("truncated header")
            (size,) = struct.unpack("<I", head[8:12])
            start = 12
        else:
            raise ValueError(f"unknown .npy format version {major}")
        stream.seek(start)
        raw = stream.read(size)
    if len(raw) != size:
        raise ValueError("truncated header")
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        raise ValueError("unreadable header") from None
    if not isinstance(header, dict) or not isinstance(header.get("shape"), tuple) \
            or not all(isinstance(d, int) and d >= 0 for d in header["shape"]):
        raise ValueError("unreadable header")
    descr = header.get("descr")
    return (descr if isinstance(descr, str) else repr(descr)), header["shape"]


# ---------------------------------------------------------------------------
# Values helpers
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# One manifest file: schema stage, semantic stage, model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Defaults:
    """The values one ``defaults:`` level gives the levels below it; ``None``
    means "not set here" (inherit). ``includes`` are root-relative."""

    cflags: Optional[Tuple[str, ...]] = None
    includes: Optional[Tuple[str, ...]] = None
    multicore: Optional[bool] = None
    stack_size: Optional[int] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None

    def over(self, base: "_Defaults") -> "_Defaults":
        """These values where set, else ``base``'s (the nearest level wins)."""
        return _Defaults(**{f.name: getattr(base, f.name) if getattr(self, f.name) is None
                            else getattr(self, f.name) for f in fields(self)})

    def differences(self, other: "_Defaults") -> List[str]:
        """``key A there, B here`` for every key whose value differs (``self``
        is "there", ``other`` "here")."""
        out = []
        for f in fields(self):
            there, here = getattr(self, f.name), getattr(other, f.name)
            if there != here:
                out.append(f"{f.name} {_show_default(there)} there, {_show_default(here)} here")
        return out


def _show_default(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return repr(value)


_GLOB_RE = re.compile(r"[*?\[]")


class _CollectionLoader:
    """Loads a top manifest and, depth first, every manifest it includes.

    Each file is loaded once (by its real path); ``files`` holds them in load
    order, ``libraries`` every library declared (model or None, its file, its
    document path) in collection order, ``diagnostics`` every problem.
    """

    def __init__(self, root: str):
        self.root = root
        self.diagnostics: List[Diagnostic] = []
        self.files: List["_ManifestFile"] = []
        self.libraries: List[Tuple[Optional[Library], "_ManifestFile", DocPath]] = []
        self._loaded: Dict[str, Tuple[Optional["_ManifestFile"], str]] = {}
        self._stack: List[Tuple[str, str]] = []

    def load(self, display: str, inherited: "_Defaults",
             via: Optional[Tuple["_ManifestFile", DocPath]]) -> Optional["_ManifestFile"]:
        """Load the manifest ``display`` (inheriting ``inherited``), then its
        includes. ``via`` is the including file and include entry (None for
        the top manifest). Returns the file, or None if it could not be read."""
        real = os.path.realpath(display)
        where = "the top manifest" if via is None else \
            f"included at {via[0].doc.location(via[1])}"
        self._loaded[real] = (None, where)
        try:
            doc = load_yaml_file(display)
        except YamlError as err:
            self.diagnostics.extend(err.diagnostics)
            return None
        manifest = _ManifestFile(doc, display, self.root, inherited)
        self._loaded[real] = (manifest, where)
        self.files.append(manifest)
        self._stack.append((real, display))
        try:
            if manifest.validate():
                for k, lib in enumerate(manifest.libraries()):
                    self.libraries.append((lib, manifest, ("libraries", k)))
                for entry_path, matches in manifest.include_entries():
                    for match in matches:
                        self.include(manifest, entry_path, match)
        finally:
            self._stack.pop()
            self.diagnostics.extend(manifest.diagnostics)
        return manifest

    def include(self, includer: "_ManifestFile", entry_path: DocPath, absolute: str) -> None:
        """Follow one include match of ``includer`` (its entry at ``entry_path``)."""
        real = os.path.realpath(absolute)
        display = os.path.normpath(os.path.join(
            os.path.dirname(includer.display), os.path.relpath(absolute, includer.folder_abs)))
        stack_reals = [r for r, _ in self._stack]
        if real in stack_reals:
            chain = [d for _, d in self._stack[stack_reals.index(real):]] + [display]
            self.diagnostics.append(includer.doc.diagnostic(
                entry_path, "include cycle: " + " -> ".join(chain)))
            return
        if len(self._stack) >= MAX_INCLUDE_DEPTH:
            self.diagnostics.append(includer.doc.diagnostic(
                entry_path, f"includes nested more than {MAX_INCLUDE_DEPTH} deep"))
            return
        if real in self._loaded:
            first, where = self._loaded[real]
            if first is None:
                return  # could not be read: reported once, where it was first included
            again = first.own_defaults.over(includer.defaults)
            if again != first.defaults:
                self.diagnostics.append(includer.doc.diagnostic(
                    entry_path,
                    f"'{display}' is already part of the collection ({where}) with other "
                    f"defaults ({'; '.join(first.defaults.differences(again))}); its "
                    "libraries are built once: set these keys in its own defaults"))
            return
        self.load(display, includer.defaults, (includer, entry_path))

    def check_unique_library_names(self) -> None:
        """Report every library name used twice or more in the collection, at
        each of its places (``line N`` in the same file, ``FILE:LINE:COL`` in
        another)."""
        seen: Dict[str, List[Tuple["_ManifestFile", DocPath]]] = {}
        for _, manifest, path in self.libraries:
            lib = manifest.doc.value["libraries"][path[1]]
            name_path = path + ("name",)
            if isinstance(lib, dict) and isinstance(lib.get("name"), str) \
                    and manifest.clean(name_path):
                seen.setdefault(lib["name"], []).append((manifest, name_path))
        for name, places in seen.items():
            if len(places) < 2:
                continue
            for k, (manifest, path) in enumerate(places):
                lines = [str(manifest.line(p)) for j, (f, p) in enumerate(places)
                         if j != k and f is manifest]
                others = [str(f.doc.location(p)) for j, (f, p) in enumerate(places)
                          if j != k and f is not manifest]
                if lines:
                    others.insert(0, ("line " if len(lines) == 1 else "lines ")
                                  + ", ".join(lines))
                self.diagnostics.append(manifest.doc.diagnostic(
                    path, f"duplicate library name '{name}' (also at {', '.join(others)})"))


def _op_with_defaults(op: dict, defaults: _Defaults) -> dict:
    """The op's mapping with inherited ``rtol``/``atol`` filled in where the
    op gives none (what its vectors fall back to before the dtype table)."""
    filled = dict(op)
    for key in ("rtol", "atol"):
        if key not in filled and getattr(defaults, key) is not None:
            filled[key] = getattr(defaults, key)
    return filled


class _ManifestFile:
    """Checks one manifest file and builds its part of the model.

    Owns the file's :class:`LocatedDocument` (diagnostics name this file),
    resolves the paths it contains against its own folder, and maps them to
    ``root``. ``inherited`` are the defaults of the manifests that include
    it; ``defaults`` adds its own ``defaults:``. ``diagnostics`` collects
    every problem.
    """

    def __init__(self, doc: LocatedDocument, display: str, root: str,
                 inherited: Optional[_Defaults] = None):
        self.doc = doc
        self.display = display
        self.root_abs = os.path.abspath(root)
        self.folder_abs = os.path.dirname(os.path.abspath(display))
        self.model_file = os.path.relpath(os.path.abspath(display),
                                          self.root_abs).replace(os.sep, "/")
        self.diagnostics: List[Diagnostic] = []
        self._schema_error_paths: List[DocPath] = []
        self.inherited = inherited or _Defaults()
        self.own_defaults = _Defaults()
        self.defaults = self.inherited

    # -- helpers ------------------------------------------------------------

    def error(self, path: DocPath, message: str, *, key: bool = False,
              offset: Optional[int] = None) -> None:
        """Record a diagnostic at ``path`` (its key, or a character offset of its scalar)."""
        self.diagnostics.append(self.doc.diagnostic(path, message, key=key, offset=offset))

    def line(self, path: DocPath) -> int:
        """The 1-based line of the node at ``path``."""
        return self.doc.span(path).line

    def location(self, path: DocPath, *, key: bool = False) -> Location:
        """A model location: the manifest's root-relative path, not the
        path as given, so the model does not depend on where it was loaded
        from."""
        where = self.doc.location(path, key=key)
        return Location(self.model_file, where.line, where.column)

    def resolve(self, written: str) -> Tuple[str, str]:
        """(absolute path, normalised POSIX path relative to the root) of a
        path written in this manifest (relative to its folder)."""
        absolute = os.path.normpath(os.path.join(self.folder_abs, written))
        relative = os.path.relpath(absolute, self.root_abs).replace(os.sep, "/")
        return absolute, relative

    def clean(self, prefix: DocPath, *, except_items_of: Optional[str] = None) -> bool:
        """No schema error at or under ``prefix`` (ignoring errors inside the
        items of the child list ``except_items_of``, checked separately)."""
        n = len(prefix)
        for p in self._schema_error_paths:
            if p[:n] != prefix:
                continue
            if except_items_of is not None and len(p) > n + 1 and p[n] == except_items_of:
                continue
            return False
        return True

    # -- stages -------------------------------------------------------------

    def validate(self) -> bool:
        """The JSON Schema stage and this file's ``defaults:``. False when the
        document is not a mapping (nothing more can be checked)."""
        value = self.doc.value
        if not isinstance(value, dict):
            self.error((), "a manifest is a mapping with the keys 'version' and 'libraries', "
                           f"got {_describe(value)}")
            return False
        for err in _validator().iter_errors(value):
            self._schema_error_paths.append(tuple(err.absolute_path))
            self.diagnostics.extend(_schema_diagnostics(self.doc, err))
        self.own_defaults = self.defaults_at(("defaults",), value.get("defaults"))
        self.defaults = self.own_defaults.over(self.inherited)
        return True

    def defaults_at(self, path: DocPath, given: Any) -> _Defaults:
        """The valid keys of a ``defaults:`` mapping (manifest or library level)."""
        if not isinstance(given, dict):
            return _Defaults()
        out: Dict[str, Any] = {}
        for key in ("cflags", "multicore", "stack_size", "rtol", "atol"):
            if key in given and self.clean(path + (key,)):
                value = given[key]
                out[key] = tuple(value) if key == "cflags" else \
                    float(value) if key in ("rtol", "atol") else value
        if "includes" in given and self.clean(path + ("includes",)):
            out["includes"] = tuple(self.existing_paths(
                path + ("includes",), given["includes"], "include directory", True))
        return _Defaults(**out)

    def libraries(self) -> List[Optional[Library]]:
        """Check every library of this file and its ops; one model (or None) each."""
        libraries = self.doc.value.get("libraries")
        if not isinstance(libraries, list):
            return []
        return [self.library(("libraries", i), lib) for i, lib in enumerate(libraries)]

    def include_entries(self) -> List[Tuple[DocPath, List[str]]]:
        """Each ``include:`` entry with the absolute paths of the files it
        names (a glob's matches sorted, without this file); reports absolute
        entries, missing files, directories, globs without a match and an
        entry listed twice."""
        entries = self.doc.value.get("include")
        if not isinstance(entries, list) or not self.clean(("include",)):
            return []
        out: List[Tuple[DocPath, List[str]]] = []
        first: Dict[str, int] = {}
        me = os.path.realpath(self.display)
        for k, written in enumerate(entries):
            path = ("include", k)
            if os.path.isabs(written) or written.startswith(("/", "\\")):
                self.error(path, f"include '{written}' is an absolute path; write it relative "
                                 "to this manifest's folder so the tree can move")
                continue
            absolute, relative = self.resolve(written)
            if _GLOB_RE.search(written):
                pattern = os.path.join(glob.escape(self.folder_abs), written)
                matches = [os.path.normpath(p) for p in glob.glob(pattern, recursive=True)
                           if os.path.isfile(p) and os.path.realpath(p) != me]
                matches.sort(key=lambda p: os.path.relpath(p, self.folder_abs)
                             .replace(os.sep, "/"))
                if not matches:
                    self.error(path, f"include pattern '{written}' matches no manifest "
                                     f"(resolved to {relative})")
                    continue
                out.append((path, matches))
                continue
            if relative in first:
                self.error(path, f"include '{written}' is listed twice (first at line "
                                 f"{first[relative]})")
                continue
            first[relative] = self.line(path)
            if os.path.isdir(absolute):
                self.error(path, f"include '{written}' is a directory (resolved to {relative}); "
                                 "name the manifest file")
                continue
            if not os.path.isfile(absolute):
                self.error(path, f"included manifest '{written}' not found "
                                 f"(resolved to {relative})")
                continue
            out.append((path, [absolute]))
        return out

    def library(self, path: DocPath, lib: Any) -> Optional[Library]:
        """Check one library and its ops; its model (every default applied), or None."""
        if not isinstance(lib, dict):
            return None
        name = lib.get("name") if isinstance(lib.get("name"), str) else "?"
        lib_ok = self.clean(path, except_items_of="ops")
        sources: List[str] = []
        includes: List[str] = []
        if lib_ok:
            if name in RESERVED_LIBRARY_NAMES:
                self.error(path + ("name",),
                           f"library name '{name}' is reserved (device-api.md Limits)")
            sources = self.existing_paths(path + ("sources",), lib["sources"], "source file", False)
            if "includes" in lib:
                includes = self.existing_paths(path + ("includes",), lib["includes"],
                                               "include directory", True)
            else:
                includes = list(self.defaults.includes or ())
        defaults = self.defaults_at(path + ("defaults",), lib.get("defaults")).over(self.defaults)
        ops_value = lib.get("ops")
        ops: List[Optional[Op]] = []
        if isinstance(ops_value, list):
            names: Dict[str, DocPath] = {}
            for j, op in enumerate(ops_value):
                ops.append(self.op(path + ("ops", j), op, name, names, defaults))
        if not lib_ok:
            return None
        multicore = lib.get("multicore", self.defaults.multicore)
        cflags = lib["cflags"] if "cflags" in lib else (self.defaults.cflags or ())
        return Library(
            name=name, multicore=bool(multicore),
            sources=tuple(sources), includes=tuple(includes),
            cflags=tuple(cflags), ops=tuple(ops),  # type: ignore[arg-type]
            location=self.location(path), manifest=self.model_file)

    def existing_paths(self, path: DocPath, written: list, what: str, directory: bool) -> List[str]:
        """Resolve each path of a list; report missing ones and duplicates."""
        out: List[str] = []
        first: Dict[str, int] = {}
        for k, item in enumerate(written):
            absolute, relative = self.resolve(item)
            if relative in first:
                self.error(path + (k,), f"{what} '{item}' is listed twice "
                                        f"(first at line {first[relative]})")
                continue
            first[relative] = self.line(path + (k,))
            exists = os.path.isdir(absolute) if directory else os.path.isfile(absolute)
            if not exists:
                if os.path.exists(absolute):
                    kind = "a file" if directory else "a directory"
                    self.error(path + (k,), f"{what} '{item}' is {kind} (resolved to {relative})")
                else:
                    self.error(path + (k,), f"{what} '{item}' not found (resolved to {relative})")
            out.append(relative)
        return out

    def reference(self, path: DocPath, text: str) -> Optional[Reference]:
        """Parse 'path/file.py:function' or 'dotted.module:function'."""
        target, _, function = text.rpartition(":")
        if target.endswith(".py") or "/" in target or "\\" in target:
            if not target.endswith(".py"):
                self.error(path, f"reference file '{target}' is not a .py file")
                return None
            absolute, relative = self.resolve(target)
            if not os.path.isfile(absolute):
                self.error(path, f"reference file '{target}' not found (resolved to {relative})")
                return None
            names = _top_level_names(absolute)
            if isinstance(names, str):
                self.error(path, f"reference file '{target}' {names}")
                return None
            if names is not None and function not in names:
                close = difflib.get_close_matches(function, sorted(names), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.error(path, f"reference file '{target}' defines no '{function}'{hint}")
                return None
            return Reference(file=relative, module=None, function=function)
        if not _MODULE_RE.fullmatch(target):
            self.error(path, f"'{target}' is neither a .py file nor a dotted module name")
            return None
        return Reference(file=None, module=target, function=function)

    def npy(self, path: DocPath, written: str,
            tensor: bool) -> Optional[Tuple[str, str, Tuple[int, ...]]]:
        """Check a .npy file: (root-relative path, numpy descr, shape), or
        None after reporting. A ``tensor`` input's array must also respect
        the device's shape limits."""
        absolute, relative = self.resolve(written)
        if not os.path.isfile(absolute):
            self.error(path, f".npy file '{written}' not found (resolved to {relative})")
            return None
        try:
            descr, shape = _read_npy_header(absolute)
        except (OSError, ValueError) as err:
            self.error(path, f"'{written}' is not a readable .npy file ({err})")
            return None
        if tensor and len(shape) > MAX_DIMS:
            self.error(path, f"the array in '{written}' has {len(shape)} dimensions; a tensor "
                             f"has at most {MAX_DIMS} (device-api.md Limits)")
            return None
        if tensor and any(d > MAX_DIM_SIZE for d in shape):
            self.error(path, f"the array in '{written}' has shape {list(shape)}; each dimension "
                             f"is at most {MAX_DIM_SIZE} (device-api.md Limits)")
            return None
        return relative, descr, shape

    def npy_dtype(self, path: DocPath, written: str, descr: str,
                  given: Optional[str]) -> Optional[str]:
        """The dtype of a tensor input read from .npy: the file's, checked
        against ``given`` (the input's ``dtype``) if both are known; the
        given one when the file holds raw bytes (``<V2``: how numpy saves
        ml_dtypes' bfloat16 and fp8). None after reporting."""
        known = _NPY_DTYPES.get(descr)
        raw = re.fullmatch(r"[<>|=]V([0-9]+)", descr)
        if known is not None:
            if given is not None and given != known:
                self.error(path + ("dtype",), f"dtype '{given}' does not match the .npy "
                                              f"file '{written}', which holds {known}")
                return None
            return known
        if raw is not None:
            size = int(raw.group(1))
            if given is None:
                self.error(path + ("npy",), f"'{written}' holds raw {size}-byte elements "
                                            f"({descr!r}, as numpy saves ml_dtypes types): "
                                            "give the input's dtype")
                return None
            if _ITEMSIZE[given] != size:
                self.error(path + ("dtype",), f"dtype '{given}' has {_ITEMSIZE[given]}-byte "
                                              f"elements but '{written}' holds {size}-byte ones")
                return None
            return given
        self.error(path + ("npy",), f"the array in '{written}' has numpy dtype {descr!r}, "
                                    f"which is not a device dtype ({', '.join(DTYPES)})")
        return None

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

