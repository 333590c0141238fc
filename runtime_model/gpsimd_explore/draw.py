"""What explore draws: the Hypothesis strategies of an op's inputs
(:func:`inputs_strategy`: tensors' shapes and values, scalars) from a
vector of the op and its ``explore:`` block, and the dimension sizes that
catch partition bugs (:data:`PARTITION_SIZES`). Needs Hypothesis (the
``[explore]`` extra), imported when a strategy is made."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from gpsimd_device.limits import MAX_DIMS, STREAM_TCM_BYTES, TCM_POOL_SIZE
from gpsimd_device.plan import ExploreSpec, VectorPlan

from gpsimd_emu.dtypes import by_name

__all__ = ["inputs_strategy", "sweep_inputs", "sweep_all", "spread_values", "PARTITION_SIZES",
           "PAST_LIMITS"]


#: Dimension sizes that catch partition bugs: 1, primes, counts that do
#: not divide by 8 cores, and their neighbours, first (Hypothesis shrinks
#: towards the front of this list); then the float32 counts around one
#: stream's TCM buffer and around the TCM pool (``gpsimd_device.limits``),
#: and a prime past the pool over 4 cores.
PARTITION_SIZES = (1, 2, 3, 7, 8, 9, 13, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 1001,
                   1009) + tuple(n + d for n in (STREAM_TCM_BYTES // 4, TCM_POOL_SIZE // 4)
                                 for d in (-1, 0, 1)) + (16411,)


def _elements(dtype_name: str, bounds: Optional[Tuple[float, float]] = None):
    """The Hypothesis strategy of one element of ``dtype_name`` (numpy
    values of the dtype's whole range, special values included; with
    ``bounds``, finite values in ``[low, high]``, the op's ``explore:``),
    and the numpy dtype it draws in (cast to the device dtype afterwards)."""
    from hypothesis import strategies as st
    dt = by_name(dtype_name).numpy
    if dt.kind in "iu":
        info = np.iinfo(dt)
        low, high = int(info.min), int(info.max)
        if bounds is not None:
            low, high = max(low, math.ceil(bounds[0])), min(high, math.floor(bounds[1]))
        return st.integers(low, max(low, high)), dt
    if dt.kind == "b":
        return st.booleans(), np.dtype(bool)
    width = 16 if dt == np.float16 else 64 if dt == np.float64 else 32
    drawn = np.dtype(f"float{width}")
    if bounds is None:      # (bfloat16 and the float8 types are drawn as float32)
        return st.floats(width=width), drawn
    # (the bounds as floats of that width, rounded inwards)
    low, high = drawn.type(bounds[0]), drawn.type(bounds[1])
    if low < bounds[0]:
        low = np.nextafter(low, drawn.type(np.inf))
    if high > bounds[1]:
        high = np.nextafter(high, drawn.type(-np.inf))
    return st.floats(float(low), float(max(low, high)), allow_nan=False, allow_infinity=False,
                     width=width), drawn


def _scalar(dtype_name: str, bounds: Optional[Tuple[float, float]]):
    """The strategy of one scalar argument of payload dtype ``dtype_name``
    (``gpsimd_device.planinputs.SCALAR_DTYPES``), a Python number exact in
    it: its whole range (``bounds`` None) or ``bounds``, with the edge
    values (±0, ±1, the bounds, and for float32 NaN, ±inf, the largest
    finite and the smallest subnormal) half of the time: a scalar is one
    draw, where a tensor's many elements meet them anyway."""
    from hypothesis import strategies as st
    elements, drawn_in = _elements(dtype_name, bounds)
    if drawn_in.kind in "iu":
        info = np.iinfo(by_name(dtype_name).numpy)
        low, high = (int(info.min), int(info.max)) if bounds is None else (
            max(int(info.min), math.ceil(bounds[0])), min(int(info.max), math.floor(bounds[1])))
        edges = [v for v in (0, 1, -1, low, high) if low <= v <= high]
        return st.one_of(st.sampled_from(edges or [low]), elements.map(int))
    f32 = np.finfo(np.float32)
    edges = [0.0, -0.0, 1.0, -1.0] + ([math.nan, math.inf, -math.inf, float(f32.max),
                                       -float(f32.max), float(f32.smallest_subnormal)]
                                      if bounds is None else list(bounds))
    edges = [float(np.float32(v)) for v in edges]
    if bounds is not None:      # (a bound float32 cannot hold exactly is left out)
        edges = [v for v in edges if bounds[0] <= v <= bounds[1]]
    drawn = elements.map(lambda x: float(np.float32(x)))
    return st.one_of(st.sampled_from(edges), drawn) if edges else drawn


#: Element counts past the device's buffers (one stream's TCM buffer, the
#: TCM pool, a prime past it, the default cap): :func:`sweep_inputs` tries
#: each within the cap after the search, so that no seed misses them.
PAST_LIMITS = tuple(n for n in PARTITION_SIZES if n > STREAM_TCM_BYTES // 4
                    and n % 2 == 1) + (1 << 15,)


#: Arrays of more elements than this may be drawn as :func:`spread_values`.
SPREAD_FROM = 64


def spread_values(dtype_name: str, shape: Tuple[int, ...],
                  bounds: Optional[Tuple[float, float]], seed: int) -> np.ndarray:
    """An array of ``shape`` whose neighbouring elements differ (drawn with
    numpy's generator from ``seed``: a data-movement bug, an element
    shifted or dropped, shows in its values): floats normal at a drawn
    scale (1, 1e3 or 1e30) with a few of the special values (NaN, ±inf,
    ±0, the largest finite, a subnormal) at random places, or uniform in
    ``bounds``; integers over the dtype's range (or ``bounds``); booleans
    at random. Of ``dtype_name``'s numpy dtype (float32 for bfloat16 and
    the float8 types, as :func:`_elements` draws them)."""
    rng = np.random.default_rng(seed)
    target = by_name(dtype_name).numpy
    if target.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if target.kind in "iu":
        info = np.iinfo(target)
        low, high = (int(info.min), int(info.max)) if bounds is None else (
            max(int(info.min), math.ceil(bounds[0])), min(int(info.max), math.floor(bounds[1])))
        return rng.integers(low, max(low, high), size=shape, dtype=target, endpoint=True)
    width = np.float16 if target == np.float16 else np.float64 if target == np.float64 \
        else np.float32
    if bounds is not None:
        return rng.uniform(bounds[0], bounds[1], size=shape).clip(*bounds).astype(width)
    with np.errstate(over="ignore"):
        arr = (rng.standard_normal(size=shape) * (1.0, 1e3, 1e30)[seed % 3]).astype(width)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.finfo(width).max,
                         np.finfo(width).smallest_subnormal], dtype=width)
    if arr.size and seed % 2:
        flat = arr.reshape(-1)
        where = rng.integers(0, flat.size, size=min(3, flat.size))
        flat[where] = specials[rng.integers(0, len(specials), size=len(where))]
    return arr


def inputs_strategy(template: VectorPlan, max_elements: int,
                    explore: Optional[ExploreSpec] = None):
    """A strategy of ``{arg: value}`` for ``template``'s tensor inputs (numpy
    arrays of its dtypes and ranks) and its scalars (Python numbers of the
    scalar's payload dtype: its whole range, NaN and infinities included
    for float32, or the range ``explore`` gives it) (module text;
    ``explore``: the op's block, ``ExploreSpec``).
    Tensors of one ``same_shape`` group (default: all, when the template's
    tensors share a shape) share one drawn shape of at most
    ``max_elements`` elements (or the block's ``max_elements``), of the
    template's rank or any rank from 1 to the device's
    (``gpsimd_device.limits.MAX_DIMS``); tensors in ``keep_shape`` keep
    the template's shape; tensors in ``shapes`` have the dimensions it
    names (one drawn size per name, shared, each at most the cap's root by
    the largest such rank; a number fixed); every other tensor keeps its
    rank and draws its dimensions, one size per distinct size of the
    template's (so that dimensions equal in the vector stay equal:
    ``x[m,k]`` and ``w[k,n]`` keep one ``k``; a square vector ties its two
    sizes too, which ``shapes`` undoes), each at most the cap's root by
    the largest such rank."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
    explore = explore or ExploreSpec()
    cap = explore.max_elements or max_elements
    tensors = {k: v for k, v in template.inputs.items() if getattr(v, "kind", None) == "tensor"}
    shapes = {k: tuple(_shape_of(v)) for k, v in tensors.items()}
    named = {n: dims for n, dims in explore.shapes.items() if n in tensors}
    groups = shape_groups(shapes, explore)
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    tied = [n for n in tensors if n not in group_of and n not in explore.keep_shape
            and n not in named]
    symbols = sorted({d for dims in named.values() for d in dims if isinstance(d, str)})
    named_top = max((len(dims) for dims in named.values()), default=1)
    named_bound = max(1, int(cap ** (1.0 / named_top) + 1e-9))
    symbol_st = st.one_of(st.sampled_from([p for p in PARTITION_SIZES if p <= named_bound]),
                          st.integers(1, named_bound))
    sizes = sorted({d for n in tied for d in shapes[n]})
    top = max((len(shapes[n]) for n in tied), default=1)
    bound = max(1, int(cap ** (1.0 / max(1, top)) + 1e-9))
    # (the template's own size first: an example shrinks back to it)
    size_st = {d: st.one_of(st.sampled_from([d] + [p for p in PARTITION_SIZES if p <= bound]),
                            st.integers(1, bound)) for d in sizes if d <= bound}
    def dims(rank: int, bound: int):
        dim = st.one_of(st.sampled_from([d for d in PARTITION_SIZES if d <= bound] or [1]),
                        st.integers(1, bound))
        return st.lists(dim, min_size=rank, max_size=rank).map(tuple).filter(
            lambda s: math.prod(s) <= cap)

    def shape_st(rank: int):
        """The group's rank first (it shrinks there), or any rank up to the
        device's, each dimension then at most the rank-th root of the cap
        (a rank the kernel refuses is rejected: ``explore_op``)."""
        other = st.integers(1, MAX_DIMS).flatmap(
            lambda r: dims(r, max(1, int(cap ** (1.0 / r) + 1e-9))))
        # (rank 0 too: its one shape first, then the other ranks as any)
        return st.one_of(st.just(()) if rank == 0 else dims(rank, cap), other)
    scalars = {}
    for name, spec in template.inputs.items():
        if getattr(spec, "kind", None) != "scalar":
            continue
        dtype = spec.dtype or ("float32" if isinstance(spec.value, float) else "int64")
        scalars[name] = _scalar(dtype, explore.scalars.get(name))

    @st.composite
    def draw(draw_):
        drawn = [draw_(shape_st(len(shapes[g[0]]))) for g in groups]
        size = {d: draw_(size_st[d]) if d in size_st else d for d in sizes}
        symbol = {name: draw_(symbol_st) for name in symbols}
        out = {}
        for name, spec in tensors.items():
            elements, drawn_in = _elements(spec.dtype, explore.bounds)
            if name in named:
                s = tuple(symbol[d] if isinstance(d, str) else d for d in named[name])
            else:
                s = drawn[group_of[name]] if name in group_of else tuple(
                    size[d] for d in shapes[name]) if name in tied else shapes[name]
            # (Hypothesis's arrays, which shrink well but fill most of a
            # large array with one value; or, past SPREAD_FROM elements,
            # values that differ from element to element, from a drawn
            # seed: fewer choices, so a failing example shrinks to them
            # only where its size, not its values, makes it fail)
            arrays_st = hnp.arrays(drawn_in, s, elements=elements, fill=elements)
            if math.prod(s) > SPREAD_FROM:
                arrays_st = st.one_of(arrays_st, st.integers(0, 2 ** 32 - 1).map(
                    lambda seed, s=s, dt=spec.dtype: spread_values(dt, s, explore.bounds, seed)))
            arr = draw_(arrays_st)
            # (a dtype numpy's .npy cannot hold, bfloat16 or float8, stays
            # float32: the vector casts it as it casts any input)
            target = by_name(spec.dtype).numpy
            out[name] = arr.astype(target) if target.kind in "biuf" else arr
        for name, strategy in scalars.items():
            out[name] = draw_(strategy)
        return out
    return draw()


def shape_groups(shapes: Dict[str, Tuple[int, ...]],
                 explore: ExploreSpec) -> List[Tuple[str, ...]]:
    """The groups of tensors that share one drawn shape, in the search and
    in the sweep alike (``shapes``: each tensor argument's shape in the
    template): the op's ``same_shape`` groups, else every tensor that
    ``explore.shapes`` does not name, when they share the template's shape."""
    if explore.same_shape:
        groups = [tuple(n for n in g if n in shapes) for g in explore.same_shape]
    else:
        rest = [n for n in shapes if n not in explore.shapes]
        groups = [tuple(rest)] if rest and len({shapes[n] for n in rest}) == 1 else []
    return [g for g in groups if g]


def _shape_of(spec) -> List[int]:
    if spec.shape is not None:
        return list(spec.shape)
    if spec.values is not None:
        return list(np.shape(spec.values))
    return []


def sweep_inputs(template: VectorPlan, max_elements: int, explore: Optional[ExploreSpec],
                 seed: int) -> List[Dict[str, object]]:
    """Inputs past the device's buffers, tried after the search (so that no
    seed misses them): for each count ``n`` of :data:`PAST_LIMITS` within
    the cap, smallest first, every tensor of a shared shape
    (:func:`shape_groups`) of ``n`` elements (``(n, 1, ...)`` at the
    template's rank, ``(n,)`` for rank 0); then, for each dimension size
    the other tensors draw (one per distinct size of the template's, as
    in the search, or per name of ``explore: shapes:``), that size grown
    so that the largest tensor it is in has ``n`` elements (the ``e``-th
    root, rounded up, or down past the cap, for a tensor it is in ``e``
    times) and every other
    drawn size 1, when every tensor stays within the cap: ``a[m,k]`` and
    ``v[k]`` as ``a[n,1], v[1]`` and ``a[1,n], v[n]``. Tensors in
    ``keep_shape``, and the scalars, as the template's; values
    :func:`spread_values`."""
    explore = explore or ExploreSpec()
    cap = explore.max_elements or max_elements
    tensors = {k: v for k, v in template.inputs.items() if getattr(v, "kind", None) == "tensor"}
    shapes = {k: tuple(_shape_of(v)) for k, v in tensors.items()}
    grouped = {n for g in shape_groups(shapes, explore) for n in g if n not in explore.shapes}
    # (each other tensor's dimensions as symbols: ("size", d) tied by the
    # template's size, ("name", s) by explore: shapes:, or a fixed number)
    dims: Dict[str, tuple] = {}
    for name in tensors:
        if name in grouped or name in explore.keep_shape:
            continue
        if name in explore.shapes:
            dims[name] = tuple(("name", d) if isinstance(d, str) else d
                               for d in explore.shapes[name])
        else:
            dims[name] = tuple(("size", d) for d in shapes[name])
    symbols = list(dict.fromkeys(d for ds in dims.values() for d in ds if isinstance(d, tuple)))

    def arrays(shape_of: Dict[str, Tuple[int, ...]], i: int) -> Dict[str, object]:
        out: Dict[str, object] = {}
        for k, (name, spec) in enumerate(tensors.items()):
            if name in shape_of:
                arr = spread_values(spec.dtype, shape_of[name], explore.bounds,
                                    seed * 1000 + i * 10 + k)
                target = by_name(spec.dtype).numpy
                out[name] = arr.astype(target) if target.kind in "biuf" else arr
        return out

    out: List[Dict[str, object]] = []
    for n in (c for c in PAST_LIMITS if c <= cap):
        if grouped:
            out.append(arrays({name: (n,) + (1,) * (len(shapes[name]) - 1)
                               for name in grouped}, len(out)))
        for symbol in symbols:
            top = max(ds.count(symbol) for ds in dims.values())
            root = round(n ** (1.0 / top), 9)
            for size in dict.fromkeys((max(1, math.ceil(root)), max(1, math.floor(root)))):
                grown = {name: tuple(size if d == symbol else 1 if isinstance(d, tuple) else d
                                     for d in ds) for name, ds in dims.items()}
                if all(math.prod(s) <= cap for s in grown.values()):
                    out.append(arrays(grown, len(out)))
                    break
    return out


def sweep_all(templates: List[VectorPlan], max_elements: int, explore: Optional[ExploreSpec],
              seed: int) -> List[Tuple[int, Dict[str, object]]]:
    """:func:`sweep_inputs` of every template, ``(template index, inputs)``,
    by turns (the first of each, then the second of each, ...): a sweep
    cut short still reaches every template, a dtype whose bug only a large
    tensor shows included."""
    each = [sweep_inputs(t, max_elements, explore, seed + i) for i, t in enumerate(templates)]
    return [(i, each[i][j]) for j in range(max((len(e) for e in each), default=0))
            for i in range(len(each)) if j < len(each[i])]
