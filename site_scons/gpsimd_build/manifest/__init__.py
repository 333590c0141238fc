"""The manifest front door: load ``ops.yaml``, validate it, return a typed model.

``load_manifest(path, root=".")`` loads the top manifest and every manifest
it includes, runs three stages on each file and the cross-file rules on the
whole collection, and reports every problem of all of them at once, each
located at ``FILE:LINE:COL`` with its document path (see
:mod:`gpsimd_build.diagnostics`), sorted by file, line and column:

1. YAML (:mod:`gpsimd_build.yamlloc`): syntax, tab indentation, empty
   file, several documents, unreadable or undecodable file (these stop the
   file's checks); duplicate keys, tags, numbers too long (reported with
   the rest of the file).
2. JSON Schema (``schema/ops.schema.json``, draft 2020-12): shapes and types,
   unknown keys (with a "did you mean"), required keys, enums, the limits of
   ``docs/kernel-api.md`` "Limits" (at most 10 ops per library, at most 8
   dimensions of at most 65535 each). All errors are collected.
3. Semantic checks, each run when the nodes it reads passed the schema: op schemas parse (:func:`gpsimd_build.opschema.parse_schema`),
   op names are shorter than 32 characters (ARCHITECTURE.md "The generated wrapper") and
   unique in their library, library names are unique and not ``builtin``
   (docs/kernel-api.md, Limits), vector names are unique in their op, vector
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

Bounds and trust (docs/manifest.md "Trust model", "Limits of the manifest reader"):
reading is bounded whatever the file (size, depth, nodes, number length,
paths, globs, reference files, ``.npy`` headers, problems per file); every
path a manifest names must resolve inside the root or an allowed folder;
only regular files are read; no input gives another exception than
:class:`ManifestError`. Every filesystem fact the validation depended on is
in ``Collection.reads`` (:func:`reads_still_hold` checks them again).

Modules: ``model`` (the typed model), ``rules`` (what the language allows:
dtypes, limits, built-in defaults), ``schema`` (the JSON Schema and its
errors in words), ``collection`` (includes, cross-file rules,
``load_manifest``), ``document`` (one file: schema stage, defaults,
``allow_paths``, libraries, includes), ``files`` (the paths a file names:
trust rule and kind, reference and ``.npy`` files), ``vectors`` (ops and
test vectors), ``inputs`` (tensor and scalar inputs, literal values),
``defaults`` (the precedence of ``defaults:``), ``probes`` (``.npy``
headers and reference files, parsed without running them), ``imports``
(the local modules a reference imports), ``reads`` (the
one door to the filesystem, and what it saw), ``paths`` (the path policy,
file kinds, include globs), ``commandtext`` (the characters a string that
reaches a command may not hold), ``exploreblock`` (an op's ``explore:``).
"""

from ..diagnostics import Diagnostic, Location
from ..opschema import CPP_KEYWORDS, MAX_NAME_LENGTH, WRAPPER_RESERVED_NAMES  # noqa: F401
from .model import (Collection, Expected, Library, ManifestError, Op, Random, Reference,
                    ScalarInput, TensorInput, Vector, default_seed)
from .rules import (DEFAULT_STACK_SIZE, DEFAULT_TOLERANCES, DTYPES, FLOAT8_DTYPES, FLOAT_MAX,
                    INTEGER_DTYPES, MANIFEST_VERSION, MAX_DIM_SIZE, MAX_DIM_SIZE_4D, MAX_DIMS,
                    MAX_DIMS_4D, MAX_ELEMENTS,
                    MAX_INCLUDE_DEPTH, MAX_OPS_PER_LIBRARY, MAX_STACK_SIZE,
                    RESERVED_LIBRARY_NAMES, SCALAR_ARG_TYPES, SCALAR_DTYPES)

#: What the loader itself needs (YAML, jsonschema: a tenth of a second to
#: import) is imported when first used, so that a build whose validated
#: manifest is cached (the model and its reads) never imports it.
_LAZY = {"load_manifest": "collection", "Read": "reads", "reads_still_hold": "reads",
         "SCHEMA_PATH": "schema", "inline_refs": "schema", "load_schema": "schema"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DTYPES", "INTEGER_DTYPES", "FLOAT8_DTYPES", "SCALAR_DTYPES", "SCALAR_ARG_TYPES",
    "DEFAULT_TOLERANCES", "DEFAULT_STACK_SIZE", "MAX_STACK_SIZE", "MAX_OPS_PER_LIBRARY",
    "MAX_DIMS", "MAX_DIM_SIZE", "MAX_DIMS_4D", "MAX_DIM_SIZE_4D", "MAX_ELEMENTS", "MAX_INCLUDE_DEPTH", "RESERVED_LIBRARY_NAMES",
    "MANIFEST_VERSION", "SCHEMA_PATH", "FLOAT_MAX",
    "Location", "Diagnostic", "ManifestError", "Reference", "Random", "TensorInput", "ScalarInput",
    "Expected", "Vector", "Op", "Library", "Collection", "load_manifest", "load_schema",
    "inline_refs", "default_seed", "Read", "reads_still_hold",
]
