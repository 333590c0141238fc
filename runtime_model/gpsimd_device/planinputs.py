"""The inputs of a test plan's vectors: a tensor (:class:`TensorSpec`, its
data drawn by :class:`RandomSpec`, given as values or read from ``.npy``)
or a scalar (:class:`ScalarSpec`), and :class:`PlanError` with the small
structure checks every part of the plan shares.

Part of the plan's contract (``gpsimd_device.plan``, which re-exports
everything here); kept apart so that each module reads in one sitting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

__all__ = ["Number", "PlanError", "RandomSpec", "TensorSpec", "ScalarSpec", "InputSpec",
           "SCALAR_DTYPES", "SCALAR_ARG_TYPES", "input_from_json", "need_object", "opt_number",
           "opt_paths", "opt_shape"]

Number = Union[int, float]

#: Dtypes a scalar argument may travel as (its 1-element HBM payload).
SCALAR_DTYPES: Tuple[str, ...] = ("float32", "int32", "int64")

#: Scalar argument types and their default dtype (None: by the value, float32
#: for a float, int64 for an integer). ``Tensor`` is the only other type.
SCALAR_ARG_TYPES: Dict[str, Optional[str]] = {
    "int": "int32", "long long": "int64", "float": "float32", "Scalar": None,
}


class PlanError(Exception):
    """A problem with the test plan itself (not with the kernel)."""


def need_object(d: Any, where: str) -> Mapping[str, Any]:
    """``d`` if it is a JSON object; else :class:`PlanError` naming ``where``."""
    if not isinstance(d, dict):
        raise PlanError(f"{where}: expected a JSON object, got {type(d).__name__}")
    return d


def opt_number(d: Mapping[str, Any], key: str, where: str) -> Optional[Number]:
    """``d[key]``: a number (not a bool) or None; else :class:`PlanError`."""
    v = d.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise PlanError(f"{where}.{key}: expected a number, got {v!r}")
    return v


def opt_paths(d: Mapping[str, Any], key: str, where: str) -> Optional[Tuple[str, ...]]:
    """``d[key]``: a list of strings, as a tuple, or None; else :class:`PlanError`."""
    v = d.get(key)
    if v is not None and not (isinstance(v, list) and all(isinstance(p, str) for p in v)):
        raise PlanError(f"{where}.{key}: expected a list of paths, got {v!r}")
    return None if v is None else tuple(v)


def opt_shape(v: Any) -> Optional[Tuple[Any, ...]]:
    """A JSON shape as a tuple; anything else as it is."""
    # kept as given (judged when the vector runs: "bad shape ...")
    return tuple(v) if isinstance(v, list) else v


@dataclass(frozen=True)
class RandomSpec:
    """A random tensor's data: drawn with ``numpy.random.default_rng(seed)``
    from ``distribution`` (``uniform`` on [low, high), ``normal`` with
    ``mean``/``std``, ``integers`` on [low, high)), then cast to the dtype.
    Parameters not set are None (the emulator's defaults apply)."""

    distribution: str = "uniform"
    seed: int = 0
    low: Optional[Number] = None
    high: Optional[Number] = None
    mean: Optional[Number] = None
    std: Optional[Number] = None

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"distribution": self.distribution, "seed": self.seed}
        for key in ("low", "high", "mean", "std"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_json(cls, d: Any, where: str = "random") -> "RandomSpec":
        d = need_object(d, where)
        seed = d.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise PlanError(f"{where}.seed: expected an integer, got {seed!r}")
        return cls(str(d.get("distribution", "uniform")), seed,
                   *(opt_number(d, k, where) for k in ("low", "high", "mean", "std")))


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument's input: ``dtype`` (a dtype name), ``shape`` (dims
    in elements, or None for the shape of ``values``/``npy``), exactly one
    of ``random``, ``values`` (nested list) or ``npy`` (a path relative to
    the root), and ``location`` ``"hbm"`` or ``"sbuf"`` (the descriptor's
    storage arm, the device ABI (gpsimd_host/abi.h))."""

    name: str
    dtype: Any
    shape: Optional[Tuple[Any, ...]] = None
    random: Optional[RandomSpec] = None
    values: Optional[list] = None
    npy: Optional[str] = None
    location: str = "hbm"
    kind = "tensor"

    def sources(self) -> List[str]:
        """Which of random / values / npy are given."""
        return [k for k in ("random", "values", "npy") if getattr(self, k) is not None]

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"kind": "tensor", "dtype": self.dtype,
                             "shape": list(self.shape) if self.shape is not None else None}
        if self.random is not None:
            d["random"] = self.random.to_json()
        if self.values is not None:
            d["values"] = self.values
        if self.npy is not None:
            d["npy"] = self.npy
        if self.location != "hbm":
            d["location"] = self.location
        return d

    @classmethod
    def from_json(cls, name: str, d: Any, where: str) -> "TensorSpec":
        d = need_object(d, where)
        rnd = d.get("random")
        return cls(name, d.get("dtype"), opt_shape(d.get("shape")),
                   RandomSpec.from_json(rnd, f"{where}.random") if rnd is not None else None,
                   d.get("values"), d.get("npy"),
                   "hbm" if d.get("location") is None else d.get("location"))


@dataclass(frozen=True)
class ScalarSpec:
    """A scalar argument's input: its schema ``type`` (``Scalar``, ``int``,
    ``float``, ``long long``), the ``dtype`` of its 1-element HBM payload
    (``int32``, ``int64``, ``float32``) and its ``value``."""

    name: str
    type: str
    dtype: Any
    value: Any
    kind = "scalar"

    def to_json(self) -> Dict[str, Any]:
        return {"kind": "scalar", "type": self.type, "dtype": self.dtype, "value": self.value}

    @classmethod
    def from_json(cls, name: str, d: Any, where: str) -> "ScalarSpec":
        d = need_object(d, where)
        return cls(name, str(d.get("type", "")), d.get("dtype"), d.get("value"))


InputSpec = Union[TensorSpec, ScalarSpec]


def input_from_json(name: str, d: Any, where: str) -> InputSpec:
    """A vector input from its JSON object (``kind`` ``tensor`` or ``scalar``)."""
    d = need_object(d, where)
    if d.get("kind", "tensor") == "scalar":
        return ScalarSpec.from_json(name, d, where)
    return TensorSpec.from_json(name, d, where)
