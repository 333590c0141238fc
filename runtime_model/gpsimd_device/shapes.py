"""Shape functions and their registration: the facts both sides share.

A library with shape sources (the torch-neuronx flow, docs/shape-functions.md)
registers each op with ``m.def("<op>", &<shape_fn>, "<kernel>")`` inside
``NEURON_LIBRARY(<lib>, m)``. The build reads the registration of the
compiled shape library (``python -m gpsimd_emu.shapes registration``, which
writes a :class:`Registration` as JSON) and checks it against the manifest
(``python -m gpsimd_build.steps check-registration``); the manifest loader
reads the same facts from the source text to derive schemas.

What lives here:

* :data:`PARAM_KINDS`: the kinds of a shape-function parameter, read from
  the X-macro ``GPSIMD_SHAPE_PARAM_KINDS`` of ``gpsimd_host/shape_abi.h``;
* :data:`SCHEMA_TYPES`: which schema argument types each kind may stand
  for. The public developer guide gives shape and kernel functions the
  Python-level types ``torch::Tensor``, ``torch::Scalar``, ``double`` and
  ``int64_t``; the shipped code generator (the Neuron SDK's build driver, build_custom_op.py) hands a
  kernel ``float`` for ``float``, ``int`` for ``int`` and ``long long`` for
  ``long long``. Both spellings are accepted; :data:`TYPE_NOTES` says where
  they disagree, for messages;
* :data:`SPELLINGS`: how a parameter type is written in a source, for the
  manifest loader's reading of a shape function's parameter list;
* :class:`Registration`: the JSON the registration reader writes.

Stdlib only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .headers import xmacro_rows

__all__ = ["PARAM_KINDS", "KIND_VALUES", "SCHEMA_TYPES", "DERIVED_TYPE", "TYPE_NOTES",
           "SPELLINGS", "accepted_spellings", "kind_of_spelling", "RegisteredLibrary",
           "RegisteredOp", "Registration", "REGISTRATION_FORMAT", "spelling_of_pretty"]

#: value -> name of every parameter kind ("OTHER", "TENSOR", ...).
PARAM_KINDS: Dict[int, str] = {int(v): n for n, v in
                               xmacro_rows("shape_abi.h", "GPSIMD_SHAPE_PARAM_KINDS")}
#: name -> value.
KIND_VALUES: Dict[str, int] = {n: v for v, n in PARAM_KINDS.items()}

#: Kind -> the schema argument types a parameter of that kind may stand for
#: (the first is the one a derived schema uses). int64_t is 64 bits, so a
#: derived schema says ``long long`` (the shipped codegen's 64-bit type);
#: an explicit ``int`` schema argument (32 bits in the shipped codegen)
#: also accepts it, as the public guide writes every integer as int64_t.
SCHEMA_TYPES: Dict[str, Tuple[str, ...]] = {
    "TENSOR": ("Tensor",),
    "SCALAR": ("Scalar",),
    "DOUBLE": ("float",),
    "FLOAT": ("float",),
    "INT": ("int",),
    "INT64": ("long long", "int"),
    "LONG_LONG": ("long long",),
    "OTHER": (),
}

#: Kind -> the schema type of a derived schema (None: cannot be derived).
DERIVED_TYPE: Dict[str, Optional[str]] = {k: (v[0] if v else None)
                                          for k, v in SCHEMA_TYPES.items()}

#: Schema type -> how a shape function writes it, and where the public
#: guide and the shipped code generator disagree (for messages).
TYPE_NOTES: Dict[str, str] = {
    "Tensor": "torch::Tensor (by value, const&, &)",
    "Scalar": "torch::Scalar (by value or const&)",
    "float": "double (the public guide's type) or float (the shipped codegen's, which hands "
             "the kernel a 32-bit float)",
    "int": "int (the shipped codegen's 32-bit int) or int64_t (the public guide writes every "
           "integer as int64_t)",
    "long long": "long long (the shipped codegen's) or int64_t (the public guide's)",
}

#: How a parameter type may be spelled in a source (after removing
#: ``const``, ``&``, ``&&`` and spaces around ``::``) -> its kind.
SPELLINGS: Dict[str, str] = {
    "torch::Tensor": "TENSOR", "at::Tensor": "TENSOR", "Tensor": "TENSOR",
    "torch::Scalar": "SCALAR", "at::Scalar": "SCALAR", "c10::Scalar": "SCALAR",
    "Scalar": "SCALAR",
    "double": "DOUBLE", "float": "FLOAT",
    "int": "INT", "int32_t": "INT", "std::int32_t": "INT", "signed int": "INT",
    "signed": "INT",
    "int64_t": "INT64", "std::int64_t": "INT64", "long": "INT64", "long int": "INT64",
    "signed long": "INT64", "signed long int": "INT64",
    "long long": "LONG_LONG", "long long int": "LONG_LONG", "signed long long": "LONG_LONG",
    "signed long long int": "LONG_LONG",
}


def kind_of_spelling(text: str) -> str:
    """The kind of a parameter type as written (``const torch::Tensor &``,
    ``int64_t``, ``long  long``): one of :data:`PARAM_KINDS`' names;
    ``OTHER`` when it is none of :data:`SPELLINGS` (a pointer, a typedef, a
    template...)."""
    t = re.sub(r"\s+", " ", text.replace("&", " ").replace("*", " * ")).strip()
    if "*" in t or "[" in t:
        return "OTHER"
    words = [w for w in t.split(" ") if w and w not in ("const", "volatile")]
    key = re.sub(r"\s*::\s*", "::", " ".join(words))
    return SPELLINGS.get(key, "OTHER")


def accepted_spellings(schema_type: str) -> str:
    """How a shape-function parameter of ``schema_type`` is written (one
    phrase, naming where the guide and the codegen disagree)."""
    return TYPE_NOTES.get(schema_type, schema_type)


_PRETTY = re.compile(r"\[with T = (.*)\]\s*$")


def spelling_of_pretty(text: str) -> str:
    """The type in a ``__PRETTY_FUNCTION__`` text (``... [with T =
    std::vector<long int>]``), or the text itself."""
    m = _PRETTY.search(text)
    return m.group(1) if m else text


REGISTRATION_FORMAT = 1


@dataclass(frozen=True)
class RegisteredLibrary:
    """A ``NEURON_LIBRARY(<name>, m)`` block that ran: its ``name`` and the
    ``file``:``line`` it is written at."""

    name: str
    file: str
    line: int

    @property
    def where(self) -> str:
        """``FILE:LINE``."""
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class RegisteredOp:
    """One ``m.def`` that ran.

    Attributes:
        op: the op name (first argument); kernel: the kernel function's name
            (third); library: the ``NEURON_LIBRARY`` it ran in.
        file, line: where the ``m.def`` call is written.
        function: the shape function, demangled (``relu_fwd_shape(at::Tensor)``),
            or "" when the symbol could not be found (a ``static`` function).
        params: ``(kind name, C++ spelling)`` per parameter.
        returns: the return type's spelling (``torch::Tensor`` when it is one).
        returns_tensor: whether the return type is ``torch::Tensor``.
        callable: every parameter is of a kind a call can make.
    """

    op: str
    kernel: str
    library: str
    file: str
    line: int
    function: str
    params: Tuple[Tuple[str, str], ...]
    returns: str
    returns_tensor: bool
    callable: bool

    @property
    def where(self) -> str:
        """``FILE:LINE`` of the ``m.def``."""
        return f"{self.file}:{self.line}"

    @property
    def function_name(self) -> str:
        """The shape function's name without its parameters, or ``"the shape
        function"`` when unknown."""
        return self.function.split("(", 1)[0] if self.function else "the shape function"

    def to_json(self) -> Dict[str, Any]:
        return {"op": self.op, "kernel": self.kernel, "library": self.library,
                "file": self.file, "line": self.line, "function": self.function,
                "params": [{"kind": k, "spelling": s} for k, s in self.params],
                "returns": self.returns, "returns_tensor": self.returns_tensor,
                "callable": self.callable}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "RegisteredOp":
        return cls(str(d["op"]), str(d["kernel"]), str(d.get("library") or ""), str(d["file"]),
                   int(d["line"]), str(d.get("function") or ""),
                   tuple((str(p["kind"]), str(p["spelling"])) for p in d.get("params") or ()),
                   str(d.get("returns") or ""), bool(d.get("returns_tensor")),
                   bool(d.get("callable")))


@dataclass(frozen=True)
class Registration:
    """What a shape library registered when it was loaded: every
    ``NEURON_LIBRARY`` block and every ``m.def``, in the order they ran."""

    libraries: Tuple[RegisteredLibrary, ...] = ()
    ops: Tuple[RegisteredOp, ...] = field(default_factory=tuple)

    def dumps(self) -> str:
        """JSON text, sorted keys, one trailing newline."""
        return json.dumps({"format": REGISTRATION_FORMAT,
                           "libraries": [{"name": x.name, "file": x.file, "line": x.line}
                                         for x in self.libraries],
                           "ops": [o.to_json() for o in self.ops]},
                          sort_keys=True, indent=1) + "\n"

    @classmethod
    def loads(cls, text: str) -> "Registration":
        """Raises ValueError for anything but a registration document."""
        try:
            d = json.loads(text)
            if d.get("format") != REGISTRATION_FORMAT:
                raise ValueError(f"format {d.get('format')!r}, expected {REGISTRATION_FORMAT}")
            return cls(tuple(RegisteredLibrary(str(x["name"]), str(x["file"]), int(x["line"]))
                             for x in d["libraries"]),
                       tuple(RegisteredOp.from_json(o) for o in d["ops"]))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a registration document ({type(e).__name__}: {e})") from None

    def by_op(self) -> Dict[str, List[RegisteredOp]]:
        """op name -> its registrations (more than one is an error the check reports)."""
        out: Dict[str, List[RegisteredOp]] = {}
        for o in self.ops:
            out.setdefault(o.op, []).append(o)
        return out
