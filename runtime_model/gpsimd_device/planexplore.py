"""An op's explore block in the test plan (``ExploreSpec``: the manifest's
``explore:``, docs/explore.md), with its ``to_json``/``from_json`` as
``gpsimd_device.plan``'s other classes (which re-exports it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .planinputs import PlanError, need_object

__all__ = ["ExploreSpec"]


@dataclass(frozen=True)
class ExploreSpec:
    """What ``scons explore`` draws for an op (the manifest's ``explore:``
    block; every key optional): tensor values finite in ``[low, high]``;
    ``dtypes`` by tensor argument (``"*"``: every tensor), used where no
    vector gives one; at most ``max_elements`` elements per tensor;
    ``same_shape``: groups of tensor arguments that share one drawn shape;
    ``keep_shape``: tensor arguments that keep their vector's shape (the
    others draw their dimensions, tied where the vector's sizes are
    equal); ``shapes``: a tensor argument's dimensions by name (drawn, one
    size per name across tensors) or fixed size; ``scalars``: a scalar argument's ``(low, high)`` range (the
    others are drawn from their dtype's whole range);
    the output's shape ``output_like`` a tensor argument's, of dtype
    ``output_dtype`` (default that argument's), for an op with neither a
    shape function nor a reference."""

    low: Optional[float] = None
    high: Optional[float] = None
    dtypes: Mapping[str, str] = field(default_factory=dict)
    max_elements: Optional[int] = None
    same_shape: Tuple[Tuple[str, ...], ...] = ()
    scalars: Mapping[str, Tuple[float, float]] = field(default_factory=dict)
    output_like: Optional[str] = None
    output_dtype: Optional[str] = None
    keep_shape: Tuple[str, ...] = ()
    shapes: Mapping[str, Tuple[Union[str, int], ...]] = field(default_factory=dict)

    @property
    def bounds(self) -> Optional[Tuple[float, float]]:
        """``(low, high)``, or None: each dtype's whole range."""
        return None if self.low is None else (self.low, self.high)

    def dtype_of(self, arg: str) -> Optional[str]:
        """The dtype the block gives tensor argument ``arg``, or None."""
        return self.dtypes.get(arg, self.dtypes.get("*"))

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {}
        if self.low is not None:
            d.update(low=self.low, high=self.high)
        if self.dtypes:
            d["dtype"] = dict(self.dtypes)
        if self.max_elements is not None:
            d["max_elements"] = self.max_elements
        if self.same_shape:
            d["same_shape"] = [list(g) for g in self.same_shape]
        if self.scalars:
            d["scalars"] = {k: {"low": lo, "high": hi} for k, (lo, hi) in self.scalars.items()}
        if self.output_like is not None:
            d["output"] = {"like": self.output_like, "dtype": self.output_dtype}
        if self.keep_shape:
            d["keep_shape"] = list(self.keep_shape)
        if self.shapes:
            d["shapes"] = {k: list(v) for k, v in self.shapes.items()}
        return d

    @classmethod
    def from_json(cls, d: Any, where: str) -> "ExploreSpec":
        d = need_object(d, where)

        def finite_range(r: Any, at: str) -> Tuple[float, float]:
            low, high = r.get("low"), r.get("high")
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and
                       math.isfinite(x) for x in (low, high)) or low > high:
                raise PlanError(f"{at}: expected finite low <= high, got {r!r}")
            return float(low), float(high)
        low = high = None
        if "low" in d or "high" in d:
            low, high = finite_range(d, where)
        dtypes = need_object(d.get("dtype") or {}, f"{where}.dtype")
        max_elements = d.get("max_elements")
        if max_elements is not None and (isinstance(max_elements, bool) or
                                         not isinstance(max_elements, int) or max_elements < 1):
            raise PlanError(f"{where}.max_elements: expected a positive integer")
        groups = d.get("same_shape") or []
        if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
            raise PlanError(f"{where}.same_shape: expected a list of lists of names")
        scalars = need_object(d.get("scalars") or {}, f"{where}.scalars")
        output = need_object(d.get("output") or {}, f"{where}.output")
        keep = d.get("keep_shape") or []
        if not isinstance(keep, list):
            raise PlanError(f"{where}.keep_shape: expected a list of names")
        shapes = need_object(d.get("shapes") or {}, f"{where}.shapes")
        for k, v in shapes.items():
            if not isinstance(v, list) or not all(
                    isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool) and x > 0)
                    for x in v):
                raise PlanError(f"{where}.shapes.{k}: expected a list of names and sizes")
        return cls(low, high, {str(k): str(v) for k, v in dtypes.items()}, max_elements,
                   tuple(tuple(str(n) for n in g) for g in groups),
                   {str(k): finite_range(need_object(v, f"{where}.scalars.{k}"),
                                         f"{where}.scalars.{k}") for k, v in scalars.items()},
                   output.get("like"), output.get("dtype"), tuple(str(n) for n in keep),
                   {str(k): tuple(v) for k, v in shapes.items()})
