"""The plugin's collectors and items: the manifest (``ManifestFile``), a
library (``Library``) and a vector (``Vector``: run by the library's
emulator client, its result kept on the item for its report, its failure
the emulator's own ``FAIL`` line)."""

import sys
from typing import Tuple

import pytest

from .failure import VectorFailed, _FailLine

__all__ = ["ManifestFile", "Library", "Vector"]


class ManifestFile(pytest.File):
    """The manifest: one collector per library."""

    def collect(self):
        from gpsimd_build.manifest import ManifestError
        vectors = self.config.pluginmanager.get_plugin("gpsimd-vectors")
        try:
            collection = vectors.load()
        except ManifestError as err:
            raise self.CollectError(str(err)) from None
        vectors.libraries = collection.libraries
        for index, lib in enumerate(collection.libraries):
            yield Library.from_parent(self, name=lib.name, library=lib, index=index)


class Library(pytest.Collector):
    """One library of the manifest: one item per vector of its ops."""

    def __init__(self, *, library, index: int, **kwargs):
        super().__init__(**kwargs)
        self.library = library
        self.index = index

    def collect(self):
        for i, op in enumerate(self.library.ops):
            for j, v in enumerate(op.vectors):
                # the node id given whole: pytest >= 9.2 compares ids as
                # (path, names, [params]), parsing the --lf cache's strings so,
                # and a name holding the brackets would never match them
                yield Vector.from_parent(self, name=f"{op.name}[{v.name}]", op=op.name,
                                         vector=v.name, where=str(v.location),
                                         order=(self.index, i, j),
                                         nodeid=f"{self.nodeid}::{op.name}[{v.name}]")
        if self.config.getoption("gpsimd_explore"):
            from .explore import ExploredOp
            for op in self.library.ops:
                yield ExploredOp.from_parent(self, name=f"explore({op.name})", op=op.name,
                                           nodeid=f"{self.nodeid}::explore({op.name})")


class Vector(_FailLine, pytest.Item):
    """One test vector, run and judged by the library's session."""

    def __init__(self, *, op: str, vector: str, where: str, order: Tuple[int, int, int],
                 **kwargs):
        super().__init__(**kwargs)
        self.op, self.vector, self.where, self.order = op, vector, where, order

    def runtest(self) -> None:
        from gpsimd_device.results import VectorResult, format_line
        lib = self.parent.library
        plugin = self.config.pluginmanager.get_plugin("gpsimd-vectors")
        client, problem = plugin.session_for(lib)
        doc = {"error": problem} if client is None else client.run(self.op, self.vector)
        if "error" in doc:
            result = VectorResult(self.op, self.vector, self.where, "fail", doc["error"])
        else:
            result = VectorResult.from_json(doc)
            result.where = self.where       # (the manifest's place of it as it is now)
            result.elements = int(doc.get("elements") or 0)
            result.printf = str(doc.get("printf") or "")
        self.gpsimd_row = [list(self.order), lib.name, lib.multicore, result.to_json()]
        line = format_line(lib.name, result)
        self.user_properties += [("where", result.where),
                                 ("max_abs_err", result.max_abs_err),
                                 ("mismatches", result.mismatches)]
        self.user_properties += [("warning", w) for w in result.warnings]
        if result.printf:       # (the kernel's text: its control characters made visible)
            from gpsimd_device.printable import prefixed
            for text in prefixed(f"[{lib.name}::{self.op}[{self.vector}] core 0] ",
                                 result.printf):
                print(text, file=sys.stderr)
        if not (result.passed or result.checked):   # (CHECKED: every check passed)
            raise VectorFailed(line)
        print(line)


    def reportinfo(self):
        line = self.where.rsplit(":", 2)
        lineno = int(line[1]) - 1 if len(line) == 3 and line[1].isdigit() else None
        return self.path, lineno, f"{self.parent.name}::{self.name}"
