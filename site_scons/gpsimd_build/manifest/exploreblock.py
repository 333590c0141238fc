"""An op's ``explore:`` block (docs/explore.md), checked against the op's
arguments: the names it gives, its groups, and its ranges against the
dtypes they are drawn in (a range a dtype cannot hold made the search fail
without a location, or report a failure the kernel does not have). A part
of :class:`~.vectors._OpChecks`.
"""

import math
from typing import Any, Callable, Dict, Optional, Sequence

from gpsimd_device.plan import ExploreSpec

from ..diagnostics import DocPath, shown
from .model import TensorInput
from .rules import FLOAT_MAX, INTEGER_DTYPES, SCALAR_ARG_TYPES

#: The dtype a tensor is checked in when neither a vector nor the block
#: gives one: the widest range of any dtype.
_WIDEST = "float32"


def _range(dtype: str):
    if dtype in INTEGER_DTYPES:
        return INTEGER_DTYPES[dtype]
    return -FLOAT_MAX[dtype], FLOAT_MAX[dtype]


def _num(value: Any) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


class _ExploreChecks:
    """The explore-block checks of a manifest file."""

    def explore_block(self, path: DocPath, op: dict, inherited: Optional[dict],
                      schema: Any, vectors: Sequence[Any] = ()) -> Optional[ExploreSpec]:
        """The op's ``explore:`` keys over the inherited block (defaults),
        checked against the op's arguments (``vectors``: the op's vector
        models, which give its tensors' dtypes): an ``ExploreSpec`` or None
        (none given, or errors reported)."""
        own = op.get("explore")
        if own is not None and not (isinstance(own, dict) and self.clean(path + ("explore",))):
            return None
        block = {**(inherited or {}), **(own or {})}
        if not block:
            return None
        at = path + ("explore",)

        def where(key: str) -> DocPath:     # (the op's key, else the op's block or the op)
            return at + (key,) if own and key in own else at if own else path
        ok = True
        ranges = [((k,), block[k]) for k in ("low", "high") if k in block]
        ranges += [(("scalars", n, k), r[k]) for n, r in block.get("scalars", {}).items()
                   for k in ("low", "high")]
        for keys, value in ranges:
            if not math.isfinite(value):
                self.error(where(keys[0]), f"explore: {'.'.join(keys)} must be a finite number, "
                                           f"got {value}")
                ok = False
        if not ok:
            return None
        if ("low" in block) != ("high" in block):
            self.error(where("low" if "low" in block else "high"),
                       "explore: low and high go together (give both)")
            ok = False
        elif "low" in block and block["low"] > block["high"]:
            self.error(where("high"), f"explore: high ({block['high']:g}) is below low "
                                      f"({block['low']:g})")
            ok = False
        args = {a.name: a.type for a in schema.arguments} if schema is not None else None
        if args is not None:
            tensors = {n for n, t in args.items() if t == "Tensor"}
            dtypes = block.get("dtype")
            named = [("dtype", n, tensors) for n in dtypes] if isinstance(dtypes, dict) else []
            named += [("same_shape", n, tensors) for g in block.get("same_shape", []) for n in g]
            named += [("keep_shape", n, tensors) for n in block.get("keep_shape", [])]
            named += [("shapes", n, tensors) for n in block.get("shapes", {})]
            named += [("scalars", n, set(args) - tensors) for n in block.get("scalars", {})]
            if "output" in block:
                named.append(("output", block["output"]["like"], tensors))
            for key, n, allowed in named:
                if n not in allowed:
                    kind = "tensor" if allowed is tensors else "scalar"
                    have = ", ".join(sorted(allowed)) or "none"
                    self.error(where(key), f"explore: {key} names '{shown(n)}', which is not a "
                                           f"{kind} argument of the op (its {kind}s: {have})")
                    ok = False
            grouped = [n for g in block.get("same_shape", []) for n in g]
            for n in sorted({n for n in grouped if grouped.count(n) > 1}):
                self.error(where("same_shape"), f"explore: same_shape names '{shown(n)}' in "
                                                "more than one group")
                ok = False
            for n in sorted(set(grouped) & set(block.get("keep_shape", []))):
                self.error(where("keep_shape"), f"explore: keep_shape names '{shown(n)}', which "
                                                "same_shape also names")
                ok = False
            for n in sorted((set(grouped) | set(block.get("keep_shape", [])))
                            & set(block.get("shapes", {}))):
                self.error(where("shapes"), f"explore: shapes names '{shown(n)}', which "
                                            "same_shape or keep_shape also names")
                ok = False
        for n, r in block.get("scalars", {}).items():
            if r["low"] > r["high"]:
                self.error(where("scalars"), f"explore: scalars: {shown(n)}: high "
                                             f"({r['high']:g}) is below low ({r['low']:g})")
                ok = False
        if ok and args is not None:
            ok = self.explore_ranges(where, block, own, args, vectors)
        if not ok:
            return None
        dtypes = block.get("dtype") or {}
        output = block.get("output") or {}
        return ExploreSpec(
            block.get("low"), block.get("high"),
            {"*": dtypes} if isinstance(dtypes, str) else dict(dtypes), block.get("max_elements"),
            tuple(tuple(g) for g in block.get("same_shape", [])),
            {n: (float(r["low"]), float(r["high"])) for n, r in block.get("scalars", {}).items()},
            output.get("like"), output.get("dtype"), tuple(block.get("keep_shape", [])),
            {n: tuple(dims) for n, dims in block.get("shapes", {}).items()})

    def explore_ranges(self, where: Callable[[str], DocPath], block: dict, own: Optional[dict],
                       args: Dict[str, str], vectors: Sequence[Any]) -> bool:
        """``low``/``high`` within the range of every tensor argument's dtype
        (each its vectors give, else the block's ``dtype``, else float32's,
        the widest),
        each ``scalars`` range within its argument's dtype (int: int32, long
        long: int64, float and Scalar: float32), an integer one written
        exactly. Reports each that is not; False then."""
        ok = True
        if "low" in block:
            given = block.get("dtype")
            for name in sorted(n for n, t in args.items() if t == "Tensor"):
                # (every dtype the vectors give it: each is searched)
                drawn = sorted({i.dtype for v in vectors if v is not None for i in v.inputs
                                if isinstance(i, TensorInput) and i.name == name and i.dtype}) \
                    or [given if isinstance(given, str) else (given or {}).get(name)]
                for dtype in drawn:
                    lo, hi = _range(dtype or _WIDEST)
                    if block["low"] < lo or block["high"] > hi:
                        break
                else:
                    continue
                self.error(where("low" if block["low"] < lo else "high"),
                           f"explore: [low, high] = [{_num(block['low'])}, "
                           f"{_num(block['high'])}] is not within the values of "
                           f"{dtype or 'any dtype'} ({_num(lo)}..{_num(hi)}), which tensor "
                           f"argument '{shown(name)}' is drawn in")
                ok = False
                break
        for name, r in block.get("scalars", {}).items():
            if name not in args:
                continue
            dtype = SCALAR_ARG_TYPES.get(args[name]) or _WIDEST
            lo, hi = _range(dtype)
            written = own is not None and name in own.get("scalars", {})
            at = where("scalars") + ((name,) if written else ())
            if r["low"] < lo or r["high"] > hi or (dtype in INTEGER_DTYPES and not all(
                    float(v).is_integer() for v in (r["low"], r["high"]))):
                kind = ", integers" if dtype in INTEGER_DTYPES else ""
                self.error(at, f"explore: scalars: {shown(name)}: [{_num(r['low'])}, "
                               f"{_num(r['high'])}] is not a range of {dtype} ({_num(lo)}.."
                               f"{_num(hi)}{kind}), the dtype of argument '{shown(name)}' "
                               f"({args[name]})")
                ok = False
            elif written and dtype in INTEGER_DTYPES and \
                    not self.exact_literals(at, dtype, "explore: "):
                ok = False
        return ok
