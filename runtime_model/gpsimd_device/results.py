"""Emulator results: what the device model writes for one library and the
build reads back (summary, reports). JSON layout: ARCHITECTURE.md
"Emulator results"::

    {"format": 1, "library": "relu", "passed": 3, "failed": 1,
     "vectors": [{"op": ..., "vector": ..., "where": "ops.yaml:21:11",
                  "status": "pass", "message": "", "max_abs_err": 0.0,
                  "mismatches": 0, "warnings": [], "layout": {...}}]}

``layout`` (optional; present when the checks ran): which core wrote what,
as element ranges ``[a, b)`` (never per element)::

    {"elements": N, "itemsize": 4,
     "cores": [{"core": 0, "written": [[0, 125]], "read_before_write": [],
                "past_end": [], "uninit": [], "fault": null}, ...],
     "holes": [[875, 882]], "overlaps": [{"range": [125, 126], "cores": [0, 1]}],
     "order_dependent": [], "truncated": false}

``fault`` is ``{"kind": "OUT_OF_RANGE", "range": [946, 1008] or null}`` for a
core whose first run faulted (the range its fault message names); each list
keeps at most 256 ranges, ``truncated`` says when one was cut.

A checks-only vector (no expected result) whose checks pass has status
``"checked"``: it is printed and summed as ``CHECKED (no reference)``,
never as passed; the document then has ``"checked": K``.

Ops that have no vectors are listed in ``"no_vectors": ["op", ...]`` (only
when there are some): they are summed as ``K ops without vectors``, never
as passed or failed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .atomic import write_atomically
from .printable import visible

__all__ = ["RESULTS_FORMAT", "CHECKED", "CHECKED_WORDS", "ResultsError", "VectorResult",
           "LibraryResults", "counts_text", "format_line"]

RESULTS_FORMAT = 1


#: The status of a checks-only vector whose checks passed, and its words.
CHECKED = "checked"
CHECKED_WORDS = "CHECKED (no reference)"


class ResultsError(ValueError):
    """A results file cannot be read or is not one."""


@dataclass
class VectorResult:
    """The outcome of one vector.

    Attributes:
        op, vector, where: names and the manifest location (``ops.yaml:L:C``).
        status: ``"pass"``, ``"fail"`` or ``"checked"`` (a checks-only
            vector, without an expected result: every check passed and
            nothing was compared; never counted as passed).
        message: "" on pass, else why it failed (several reasons joined
            with ``"; "``).
        max_abs_err: largest absolute error of the comparison (float), or
            None when no comparison happened or it was not finite.
        mismatches: elements out of tolerance, or None when no comparison
            happened.
        elements: elements compared (for the PASS line; not in the JSON).
        printf: what core 0 printed (not in the JSON).
        warnings: what the checks found that does not fail the vector,
            each ``"core K: text"``; in the JSON and appended to the line.
        layout: the write-set layout as ranges (module text), or None
            (no checks, or the run could not be judged); in the JSON only
            when present.
        kernel_seconds: seconds the cores' launchers took in all runs (not
            in the JSON; benchmarks).
        output: what the cores wrote to stdout and stderr, each ``{"core",
            "stream" ("stdout"/"stderr"), "bytes" (written), "text" (kept:
            the first and last 32 KiB)}``; in the JSON when not empty.
        second_call_only: it failed on its second call alone (its first
            call was right: the next vector's second call may take its
            arguments, as a passed one's); in the JSON only when true.
    """

    op: str
    vector: str
    where: str
    status: str
    message: str = ""
    max_abs_err: Optional[float] = None
    mismatches: Optional[int] = None
    elements: int = 0
    printf: str = ""
    warnings: List[str] = field(default_factory=list)
    layout: Optional[Dict[str, Any]] = None
    kernel_seconds: float = 0.0
    output: List[Dict[str, Any]] = field(default_factory=list)
    second_call_only: bool = False

    @property
    def passed(self) -> bool:
        """True when the status is ``"pass"``."""
        return self.status == "pass"

    @property
    def checked(self) -> bool:
        """True for a checks-only vector whose checks all passed."""
        return self.status == CHECKED

    def to_json(self) -> Dict[str, Any]:
        """The results-JSON entry."""
        err = self.max_abs_err
        if err is not None and not math.isfinite(err):
            err = None
        doc = {"op": self.op, "vector": self.vector, "where": self.where,
               "status": self.status, "message": self.message,
               "max_abs_err": err, "mismatches": self.mismatches,
               "warnings": list(self.warnings)}
        if self.layout is not None:
            doc["layout"] = self.layout
        if self.output:
            doc["output"] = [dict(o) for o in self.output]
        if self.second_call_only:
            doc["second_call_only"] = True
        return doc

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "VectorResult":
        """The inverse of ``to_json`` (``elements`` and ``printf`` are not kept)."""
        layout, output = d.get("layout"), d.get("output")
        return cls(str(d.get("op", "?")), str(d.get("vector", "?")), str(d.get("where", "?")),
                   str(d.get("status", "fail")), str(d.get("message", "")), d.get("max_abs_err"),
                   d.get("mismatches"), warnings=[str(w) for w in d.get("warnings") or []],
                   layout=layout if isinstance(layout, dict) else None,
                   output=[o for o in output if isinstance(o, dict)]
                   if isinstance(output, list) else [],
                   second_call_only=d.get("second_call_only") is True)


@dataclass
class LibraryResults:
    """Every vector result of one library's plan."""

    library: str
    vectors: List[VectorResult] = field(default_factory=list)
    #: the plan's ops that have no vectors (nothing ran for them)
    no_vectors: List[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """Number of vectors that passed."""
        return sum(1 for v in self.vectors if v.passed)

    @property
    def checked(self) -> int:
        """Number of checks-only vectors whose checks passed (not compared
        with anything: neither passed nor failed)."""
        return sum(1 for v in self.vectors if v.checked)

    @property
    def failed(self) -> int:
        """Number of vectors that failed."""
        return len(self.vectors) - self.passed - self.checked

    @property
    def ok(self) -> bool:
        """True when every vector passed."""
        return self.failed == 0

    def to_json(self) -> Dict[str, Any]:
        """The results document."""
        doc = {"format": RESULTS_FORMAT, "library": self.library,
               "passed": self.passed, "failed": self.failed,
               "vectors": [v.to_json() for v in self.vectors]}
        if self.checked:
            doc["checked"] = self.checked
        if self.no_vectors:
            doc["no_vectors"] = list(self.no_vectors)
        return doc

    def counts(self) -> str:
        """The numbers of this library's summary line (:func:`counts_text`)."""
        return counts_text(self.passed, self.failed, self.checked, len(self.no_vectors))

    def summary_line(self) -> str:
        """``"<lib>: N passed, M failed"`` and the other counts."""
        return f"{self.library}: {self.counts()}"

    def dumps(self) -> str:
        """The file text: 2-space indent, one trailing newline."""
        return json.dumps(self.to_json(), indent=2) + "\n"

    def write(self, path: str) -> None:
        """Write the results to ``path`` atomically (a temporary file in the
        same folder, renamed over it; removed again if writing fails).

        Raises:
            OSError: the file cannot be written (the message names the path).
        """
        write_atomically(path, self.dumps(), make_folder=True)

    @classmethod
    def from_json(cls, d: Any) -> "LibraryResults":
        """Raises ResultsError for anything but a results document."""
        if not isinstance(d, dict) or d.get("format") != RESULTS_FORMAT \
                or not isinstance(d.get("vectors"), list):
            raise ResultsError("not a results document of format 1")
        no_vectors = d.get("no_vectors") or []
        return cls(str(d.get("library") or "?"),
                   [VectorResult.from_json(v) for v in d["vectors"] if isinstance(v, dict)],
                   [str(o) for o in no_vectors] if isinstance(no_vectors, list) else [])

    @classmethod
    def load(cls, path: str) -> "LibraryResults":
        """Read a results file.

        Raises:
            ResultsError: unreadable, not JSON or not a results document.
        """
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise ResultsError(f"{path}: {e}") from None
        try:
            return cls.from_json(doc)
        except ResultsError as e:
            raise ResultsError(f"{path}: {e}") from None


def counts_text(passed: int, failed: int, checked: int = 0, no_vectors: int = 0) -> str:
    """``"N passed, M failed"``, then ``", K CHECKED (no reference)"`` when
    ``checked`` and ``", J op(s) without vectors"`` when ``no_vectors``:
    the numbers of a summary line."""
    text = f"{passed} passed, {failed} failed"
    text += f", {checked} {CHECKED_WORDS}" if checked else ""
    if no_vectors:
        text += f", {no_vectors} op{'' if no_vectors == 1 else 's'} without vectors"
    return text


def format_line(library: str, r: VectorResult) -> str:
    """The printed line of one vector: ``PASS lib::op[vector] (where):
    max_abs_err E over N elements`` or ``FAIL lib::op[vector] (where):
    message``, followed by ``; warning: W`` for each warning. One line,
    safe to print: a message or warning copies a kernel's text (an
    exception's), so its control characters and newlines are made visible
    (``gpsimd_device.printable.visible``)."""
    head = f"{library}::{r.op}[{r.vector}] ({r.where})"
    tail = "".join(f"; warning: {w}" for w in r.warnings)
    if r.checked:
        line = f"{CHECKED_WORDS} {head}: every check passed, nothing compared{tail}"
    elif r.passed:
        err = 0.0 if r.max_abs_err is None else r.max_abs_err
        noun = "element" if r.elements == 1 else "elements"
        line = f"PASS {head}: max_abs_err {err:.3g} over {r.elements} {noun}{tail}"
    else:
        line = f"FAIL {head}: {r.message}{tail}"
    return visible(line, newlines=False)
