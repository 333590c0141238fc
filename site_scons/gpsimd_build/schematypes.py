"""The types of PyTorch's op-schema language that the device ABI has
(``SUPPORTED_TYPES``), those it does not, with what to use instead, and
the error that the schema's parser (``gpsimd_build.schemagrammar``) and
its validation (``gpsimd_build.opschema``) raise. Stdlib only."""

from __future__ import annotations

from typing import Tuple

__all__ = ["SUPPORTED_TYPES", "SUPPORTED_TEXT", "PYTORCH_TYPES", "FOREIGN_TYPES", "SYNTAX",
           "UNSUPPORTED", "OpSchemaError"]

#: The argument types of the device ABI, in the order of the Neuron SDK's
#: build driver's map (Tensor -> const at::Tensor&, Scalar -> const
#: at::Scalar&, int, float, long long; docs/kernel-api.md "The kernel's signature").
SUPPORTED_TYPES: Tuple[str, ...] = ("Tensor", "Scalar", "int", "float", "long long")

#: ``OpSchemaError.kind`` of a text that is not a well-formed schema.
SYNTAX = "syntax"
#: ``OpSchemaError.kind`` of a well-formed PyTorch schema the device ABI
#: cannot express.
UNSUPPORTED = "unsupported"

SUPPORTED_TEXT = ", ".join(SUPPORTED_TYPES)

# Types of PyTorch's schema language that the device ABI does not have,
# with what to use instead (None: there is no device equivalent).
PYTORCH_TYPES = {
    "bool": "use 'int' (0 or 1) instead",
    "SymInt": "use 'int' or 'long long' instead",
    "SymFloat": "use 'float' instead",
    "SymBool": "use 'int' (0 or 1) instead",
    "number": "use 'Scalar' instead",
    "complex": None,
    "str": None,
    "ScalarType": None,
    "Layout": None,
    "Device": None,
    "DeviceIndex": "use 'int' instead",
    "MemoryFormat": None,
    "Generator": None,
    "Dimname": None,
    "Storage": None,
    "Stream": None,
    "QScheme": None,
    "ConstQuantizerPtr": None,
    "Any": None,
    "AnyClassType": None,
    "AnyEnumType": None,
    "NoneType": None,
    "Capsule": None,
    "Dict": None,
    "Future": None,
    "RRef": None,
    "Await": None,
    "Union": None,
    "Tuple": None,
}

# C/C++/numpy spellings people write in a schema (the public docs describe
# double/int64_t at the Python level; docs/kernel-api.md "The kernel's signature").
FOREIGN_TYPES = {
    "double": "float",
    "int64_t": "long long",
    "int32_t": "int",
    "long": "long long",
    "float32": "float",
    "float64": "float",
    "int32": "int",
    "int64": "long long",
}



class OpSchemaError(ValueError):
    """A schema the device build cannot use.

    Attributes:
        message: what is wrong, without the position.
        column: 1-based character index into the original schema text (a
            newline counts as one character); ``len(text) + 1`` means "at
            the end of the schema".
        kind: ``"syntax"`` (not a well-formed schema) or ``"unsupported"``
            (well-formed PyTorch, but the device ABI cannot express it).

    ``str(err)`` is ``"column N: message"``.
    """

    def __init__(self, message: str, column: int, kind: str = SYNTAX) -> None:
        if kind not in (SYNTAX, UNSUPPORTED):
            raise ValueError(f"OpSchemaError kind must be {SYNTAX!r} or {UNSUPPORTED!r}, not {kind!r}")
        super().__init__(message, column, kind)
        self.message = message
        self.column = column
        self.kind = kind

    def __str__(self) -> str:
        return f"column {self.column}: {self.message}"
