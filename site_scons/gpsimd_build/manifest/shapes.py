"""The shape sources of one library, as the manifest loader reads them
(``gpsimd_build.shapesrc``: text, not a compile): the ``NEURON_LIBRARY``
name, each op's ``m.def`` (its kernel name) and, for an op without
``schema:``, the schema derived from its shape function.

Every file is read through the load's
:class:`~gpsimd_build.manifest.reads.Recorder` (a ``source`` fact), so a
cached collection is used only while the shape sources are unchanged.
"""

from typing import Dict, List, Optional, Tuple

from gpsimd_device.shapes import DERIVED_TYPE, accepted_spellings

from ..diagnostics import shown
from ..shapesrc import FunctionDef, OpDef, SourceScan, scan


class LibraryShapes:
    """What the shape sources of a library say (module text).

    ``files`` are ``(root-relative path, absolute path)`` pairs; ``io`` the
    load's Recorder. A file that cannot be read is in ``unreadable``
    (path -> why); the manifest reports it at the shape source entry.
    """

    def __init__(self, files: List[Tuple[str, str]], io):
        self.scans: List[Tuple[str, SourceScan]] = []
        self.unreadable: Dict[str, str] = {}
        for relative, absolute in files:
            try:
                text = io.source_text(absolute)
            except OSError as err:
                self.unreadable[relative] = err.strerror or str(err)
                continue
            self.scans.append((relative, scan(text)))

    @property
    def namespace(self) -> Optional[Tuple[str, str]]:
        """(name, ``FILE:LINE``) of the first ``NEURON_LIBRARY`` read, or None."""
        for file, s in self.scans:
            for name, line in s.libraries:
                return name, f"{file}:{line}"
        return None

    def op_def(self, op: str) -> Optional[Tuple[OpDef, str]]:
        """The first ``m.def`` of ``op`` and its file, or None."""
        for file, s in self.scans:
            for d in s.defs:
                if d.op == op:
                    return d, file
        return None

    def functions(self, name: str) -> List[Tuple[FunctionDef, str]]:
        """Every definition of the function ``name``, with its file."""
        return [(f, file) for file, s in self.scans for f in s.functions.get(name, ())]

    def notes(self) -> str:
        """What the reading could not follow, as `` (FILE:LINE: note; ...)``, or ""."""
        notes = [f"{file}:{line}: {text}" for file, s in self.scans for line, text in s.notes]
        return f" (the reading could not follow: {'; '.join(notes[:3])})" if notes else ""

    def derive_schema(self, library: str, op: str) -> Tuple[Optional[str], str]:
        """(the schema of ``op`` derived from its shape function, "") or
        (None, why it cannot be derived). Types: ``DERIVED_TYPE`` of each
        parameter's kind; names: the parameter names; namespace: the
        ``NEURON_LIBRARY`` name (else the library's)."""
        found = self.op_def(op)
        sources = ", ".join(file for file, _ in self.scans) or "the shape sources"
        if found is None:
            return None, (f"op '{shown(op)}' has no schema and no m.def(\"{shown(op)}\", ...) "
                          f"was found in {sources}{self.notes()}: give schema: or register "
                          "the op")
        d, file = found
        definitions = self.functions(d.function)
        where = f"{file}:{d.line}"
        if not definitions:
            return None, (f"the shape function '{d.function}' of op '{shown(op)}' (m.def at "
                          f"{where}) is not defined in {sources}: give schema:")
        if len(definitions) > 1:
            places = ", ".join(f"{f}:{fd.line}" for fd, f in definitions)
            return None, (f"the shape function '{d.function}' of op '{shown(op)}' is defined "
                          f"more than once ({places}): give schema:")
        fdef, ffile = definitions[0]
        at = f"{ffile}:{fdef.line}"
        if fdef.problem is not None:
            return None, (f"the parameter list of '{d.function}' ({at}) cannot be read: "
                          f"{fdef.problem}; give schema:")
        args = []
        for k, p in enumerate(fdef.params):
            t = DERIVED_TYPE.get(p.kind)
            if t is None:
                wanted = "; ".join(f"{s}: {accepted_spellings(s)}"
                                   for s in ("Tensor", "Scalar", "float", "int", "long long"))
                return None, (f"parameter {k + 1} '{p.name}' of '{d.function}' ({at}) has type "
                              f"'{shown(p.type)}', which no schema type stands for ({wanted}): "
                              "give schema:")
            args.append(f"{t} {p.name}")
        namespace = self.namespace
        ns = namespace[0] if namespace else library
        return f"{ns}::{op}({', '.join(args)}) -> Tensor", ""
