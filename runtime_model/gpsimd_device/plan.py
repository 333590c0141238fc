"""The test plan: what the emulated-runtime node runs for one library.

The build writes it (``gpsimd_build.testplan`` fills these classes from the
manifest model) and the device model reads it once (:meth:`TestPlan.load`);
it is the only thing the build hands the model. On disk it is JSON with
sorted keys (:meth:`TestPlan.dumps`), so that its bytes, and so the test
node's signature, change exactly when something the emulator would do
differently changes. The layout is ARCHITECTURE.md "The test plan".

Parsing (``from_json``) checks the structure (keys, JSON types) and raises
:class:`PlanError` naming the place (``ops[0].vectors[2].inputs.x:
...``); the values themselves (a dtype name, a shape, a reference) are
judged when a vector runs, so that a bad value fails that vector only.

One small class per JSON object of the plan, each with its
``to_json``/``from_json``; the inputs' classes are in
``gpsimd_device.planinputs``, an op's explore block in
``gpsimd_device.planexplore`` (both re-exported here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from .limits import DEFAULT_STACK_SIZE
from .planexplore import ExploreSpec
from .planinputs import (InputSpec, Number, PlanError, RandomSpec, ScalarSpec, TensorSpec,
                         input_from_json, need_object, opt_number, opt_paths, opt_shape)

__all__ = [
    "PLAN_FORMAT", "PlanError", "RandomSpec", "TensorSpec", "ScalarSpec", "InputSpec",
    "ReferenceSpec", "ExpectedSpec", "OutputSpec", "VectorPlan", "ExploreSpec", "ArgSpec",
    "OpPlan",
    "CorePlan", "TestPlan",
]

PLAN_FORMAT = 1


@dataclass(frozen=True)
class ReferenceSpec:
    """A numpy reference: ``function`` of the ``.py`` ``file`` (relative to
    the root) or of the importable ``module``; ``imports``, the project's
    module files the build counts as its dependencies (root-relative), the
    only ones it may load (None, a plan not the build's: not checked)."""

    file: Optional[str]
    module: Optional[str]
    function: str
    imports: Optional[Tuple[str, ...]] = None

    @property
    def label(self) -> str:
        """``file`` or ``module``, for messages."""
        return self.file or self.module or "?"

    def to_json(self) -> Dict[str, Any]:
        return {"file": self.file, "module": self.module, "function": self.function,
                **({} if self.imports is None else {"imports": list(self.imports)})}

    @classmethod
    def from_json(cls, d: Any, where: str) -> "ReferenceSpec":
        d = need_object(d, where)
        return cls(d.get("file"), d.get("module"), d.get("function") or "",
                   opt_paths(d, "imports", where))


@dataclass(frozen=True)
class ExpectedSpec:
    """A vector's expected output: a ``reference``, inline ``values`` or an
    ``npy`` path (at most one). None of them: a checks-only vector (every
    check runs, nothing is compared; the output descriptor then comes from
    ``output`` or the op's shape function)."""

    reference: Optional[ReferenceSpec] = None
    values: Optional[list] = None
    npy: Optional[str] = None

    @property
    def checks_only(self) -> bool:
        """True when there is nothing to compare with."""
        return self.reference is None and self.values is None and self.npy is None

    def to_json(self) -> Dict[str, Any]:
        if self.reference is not None:
            return {"reference": self.reference.to_json()}
        if self.values is not None:
            return {"values": self.values}
        if self.npy is not None:
            return {"npy": self.npy}
        return {}

    @property
    def source(self) -> str:
        """Where the expected output comes from, for messages: ``the
        reference FILE:FUNC``, ``the vector's expected values`` or ``the
        expected .npy PATH``."""
        if self.reference is not None:
            return f"the reference {self.reference.label}:{self.reference.function}"
        if self.values is not None:
            return "the vector's expected values"
        return f"the expected .npy {self.npy}"

    @classmethod
    def from_json(cls, d: Any, where: str) -> "ExpectedSpec":
        d = need_object(d or {}, where)
        ref = d.get("reference")
        return cls(ReferenceSpec.from_json(ref, f"{where}.reference") if ref is not None else None,
                   d.get("values"), d.get("npy"))


@dataclass(frozen=True)
class OutputSpec:
    """The output descriptor of a vector: ``dtype``, ``shape`` (None: the
    expected array's) and ``location`` ``"hbm"`` or ``"sbuf"``.

    ``source`` (optional) names where dtype and shape came from when the
    runtime would allocate the output from an op's shape function
    (``"the shape function relu_fwd_shape (kernels/relu/shape.cpp:14)"``):
    the expected result must then have exactly that shape and dtype.
    ``error`` (optional) says why the shape function gave no usable output
    for this vector: the vector fails with it and nothing runs. Both are
    written only when set (``gpsimd_emu.shapes`` fills them).
    ``defaulted``: the manifest gave no dtype, the first tensor input's
    is used (written only when true)."""

    dtype: Any = None
    shape: Optional[Tuple[Any, ...]] = None
    location: str = "hbm"
    source: Optional[str] = None
    error: Optional[str] = None
    defaulted: bool = False

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"dtype": self.dtype,
                             "shape": list(self.shape) if self.shape is not None else None}
        if self.location != "hbm":
            d["location"] = self.location
        if self.source is not None:
            d["source"] = self.source
        if self.error is not None:
            d["error"] = self.error
        if self.defaulted:
            d["defaulted"] = True
        return d

    @classmethod
    def from_json(cls, d: Any, where: str) -> "OutputSpec":
        d = need_object(d or {}, where)
        extra = {k: str(d[k]) for k in ("source", "error") if d.get(k) is not None}
        return cls(d.get("dtype"), opt_shape(d.get("shape")),
                   "hbm" if d.get("location") is None else d.get("location"), **extra,
                   defaulted=d.get("defaulted") is True)


@dataclass(frozen=True)
class VectorPlan:
    """One test vector: its inputs by argument name (the op's ``args`` give
    the order), its output, expected result and tolerances (None: the
    output dtype's defaults). ``where`` (``FILE:LINE:COL`` of the vector in
    the manifest) is not part of the plan's JSON: it comes from the
    library's ``locations.json`` (:meth:`TestPlan.with_locations`)."""

    name: str
    inputs: Mapping[str, InputSpec]
    output: OutputSpec = field(default_factory=OutputSpec)
    expected: ExpectedSpec = field(default_factory=ExpectedSpec)
    rtol: Optional[Number] = None
    atol: Optional[Number] = None
    where: str = "?"

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name,
                "inputs": {k: v.to_json() for k, v in self.inputs.items()},
                "output": self.output.to_json(), "expected": self.expected.to_json(),
                "rtol": self.rtol, "atol": self.atol}

    @classmethod
    def from_json(cls, d: Any, where: str) -> "VectorPlan":
        d = need_object(d, where)
        inputs = need_object(d.get("inputs") or {}, f"{where}.inputs")
        return cls(str(d.get("name", "?")),
                   {k: input_from_json(k, v, f"{where}.inputs.{k}") for k, v in inputs.items()},
                   OutputSpec.from_json(d.get("output"), f"{where}.output"),
                   ExpectedSpec.from_json(d.get("expected"), f"{where}.expected"),
                   opt_number(d, "rtol", where), opt_number(d, "atol", where),
                   str(d.get("where", "?")))


@dataclass(frozen=True)
class ArgSpec:
    """One schema argument: ``name`` and ``type`` (``Tensor``, ``Scalar``,
    ``int``, ``float``, ``long long``)."""

    name: str
    type: str

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "type": self.type}


@dataclass(frozen=True)
class OpPlan:
    """One op: ``name`` (the op name: what torch calls and messages use),
    its ``schema`` text, ``args`` in schema order, launcher ``stack_size``
    in bytes, its vectors, and ``kernel``, the kernel function's name when
    it differs from the op name ("" otherwise; in the JSON only then), and
    ``explore``, what ``gpsimd_explore`` draws (:class:`ExploreSpec`;
    None: nothing set, in the JSON only when set), and ``reference``, the
    op's reference when it has no vectors (what explore compares with; in
    the JSON only when set). :attr:`function` is what ``get_func_name``
    registers."""

    name: str
    schema: str = ""
    args: Tuple[ArgSpec, ...] = ()
    stack_size: int = DEFAULT_STACK_SIZE
    vectors: Tuple[VectorPlan, ...] = ()
    kernel: str = ""
    explore: Optional[ExploreSpec] = None
    reference: Optional[ReferenceSpec] = None

    @property
    def function(self) -> str:
        """The kernel function's name: what the generated ``get_func_name``
        returns for this op (the Neuron SDK's build driver, build_custom_op.py)."""
        return self.kernel or self.name

    def to_json(self) -> Dict[str, Any]:
        d = {"name": self.name, "schema": self.schema,
             "args": [a.to_json() for a in self.args], "stack_size": self.stack_size,
             "vectors": [v.to_json() for v in self.vectors]}
        if self.kernel and self.kernel != self.name:
            d["kernel"] = self.kernel
        if self.explore is not None:
            d["explore"] = self.explore.to_json()
        if self.reference is not None:
            d["reference"] = self.reference.to_json()
        return d

    @classmethod
    def from_json(cls, d: Any, where: str) -> "OpPlan":
        d = need_object(d, where)
        args = d.get("args") or []
        if not isinstance(args, list):
            raise PlanError(f"{where}.args: expected a list")
        parsed = []
        for i, a in enumerate(args):
            a = need_object(a, f"{where}.args[{i}]")
            if not isinstance(a.get("name"), str):
                raise PlanError(f"{where}.args[{i}].name: expected a string")
            parsed.append(ArgSpec(a["name"], str(a.get("type", ""))))
        vectors = d.get("vectors") or []
        if not isinstance(vectors, list):
            raise PlanError(f"{where}.vectors: expected a list")
        stack = d.get("stack_size", DEFAULT_STACK_SIZE)
        if isinstance(stack, bool) or not isinstance(stack, int):
            raise PlanError(f"{where}.stack_size: expected an integer, got {stack!r}")
        kernel = d.get("kernel") or ""
        if not isinstance(kernel, str):
            raise PlanError(f"{where}.kernel: expected a string, got {kernel!r}")
        explore = d.get("explore")
        if explore is not None:
            explore = ExploreSpec.from_json(explore, f"{where}.explore")
        return cls(str(d.get("name", "?")), str(d.get("schema", "")), tuple(parsed), stack,
                   tuple(VectorPlan.from_json(v, f"{where}.vectors[{i}]")
                         for i, v in enumerate(vectors)), kernel, explore,
                   ReferenceSpec.from_json(d["reference"], f"{where}.reference")
                   if d.get("reference") is not None else None)


@dataclass(frozen=True)
class CorePlan:
    """One loaded object: ``core`` 0..7 (None single-core), the linker
    spec it must carry, and its path relative to the root."""

    core: Optional[int]
    lsp: str
    object: str

    def to_json(self) -> Dict[str, Any]:
        return {"core": self.core, "lsp": self.lsp, "object": self.object}

    @classmethod
    def from_json(cls, d: Any, where: str) -> "CorePlan":
        d = need_object(d, where)
        core = d.get("core")
        if core is not None and (isinstance(core, bool) or not isinstance(core, int)):
            raise PlanError(f"{where}.core: expected an integer or null, got {core!r}")
        return cls(core, str(d.get("lsp") or ""), str(d.get("object") or ""))


@dataclass(frozen=True)
class TestPlan:
    """The whole plan of one library."""

    __test__ = False  # not a pytest test class

    library: str
    multicore: bool
    cores: Tuple[CorePlan, ...]
    ops: Tuple[OpPlan, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"format": PLAN_FORMAT, "library": self.library, "multicore": self.multicore,
                "cores": [c.to_json() for c in self.cores], "ops": [o.to_json() for o in self.ops]}

    def dumps(self) -> str:
        """The file text: compact JSON with sorted keys and one trailing
        newline (compact, so that the C encoder writes it: an indented dump
        of a 1,000-op collection's plans costs a null build 0.1 s)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")) + "\n"

    def vector_count(self) -> int:
        """Number of vectors of every op."""
        return sum(len(o.vectors) for o in self.ops)

    def with_locations(self, where: Mapping[str, Mapping[str, str]]) -> "TestPlan":
        """A copy whose vectors' ``where`` come from ``{op: {vector:
        "FILE:LINE:COL"}}`` (``locations.json``), where given."""
        ops = []
        for op in self.ops:
            places = where.get(op.name) or {}
            ops.append(replace(op, vectors=tuple(
                replace(v, where=places[v.name]) if places.get(v.name) else v for v in op.vectors)))
        return replace(self, ops=tuple(ops))

    @classmethod
    def from_json(cls, d: Any) -> "TestPlan":
        """Raises PlanError (not an object, an unknown ``format``, a key of the
        wrong JSON type)."""
        if not isinstance(d, dict):
            raise PlanError("not a JSON object")
        if d.get("format") != PLAN_FORMAT:
            raise PlanError(f"plan format {d.get('format')!r}, this model reads {PLAN_FORMAT}")
        cores = d.get("cores") or []
        ops = d.get("ops") or []
        if not isinstance(cores, list) or not isinstance(ops, list):
            raise PlanError("'cores' and 'ops' must be lists")
        return cls(str(d.get("library") or "?"), bool(d.get("multicore")),
                   tuple(CorePlan.from_json(c, f"cores[{i}]") for i, c in enumerate(cores)),
                   tuple(OpPlan.from_json(o, f"ops[{i}]") for i, o in enumerate(ops)))

    @classmethod
    def load(cls, path: str) -> "TestPlan":
        """Read a plan file.

        Raises:
            PlanError: ``"<path>: ..."``: unreadable, not JSON, or a bad structure.
        """
        try:
            with open(path, "r", encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise PlanError(f"{path}: cannot read: {e.strerror or e}") from None
        except (ValueError, RecursionError) as e:
            raise PlanError(f"{path}: not JSON: {e}") from None
        try:
            return cls.from_json(doc)
        except PlanError as e:
            raise PlanError(f"{path}: {e}") from None
