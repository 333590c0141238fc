"""numpy references of the elementwise library.

Each device operation rounds its result to the tensor's dtype once, so the
references compute each step in float64 and round it to float32 (``_f``),
independently of the kernel code.
"""
import numpy as np


def _f(v):
    return np.asarray(v, dtype=np.float64).astype(np.float32)


def ew_trig(x):
    x = x.astype(np.float64)
    t = _f(np.tan(_f(x / 4)).astype(np.float64))
    return _f(_f(np.sin(x)).astype(np.float64) + _f(_f(np.cos(x)).astype(np.float64) * t).astype(np.float64))


def ew_logexp(x):
    a = _f(np.abs(x.astype(np.float64)) + 1).astype(np.float64)
    out = _f(np.log(a))
    out = _f(out.astype(np.float64) + _f(np.log2(a)).astype(np.float64))
    out = _f(out.astype(np.float64) + _f(np.log10(a)).astype(np.float64))
    e = _f(np.exp(_f(-a).astype(np.float64)))
    return _f(out.astype(np.float64) + e.astype(np.float64))


def ew_round_clamp(x, lo, hi):
    s = np.floor(x.astype(np.float64)) + np.ceil(x.astype(np.float64))
    return _f(np.clip(s, lo, hi))


def ew_pow(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    base = _f(np.abs(x) + 0.5).astype(np.float64)
    out = _f(np.power(base, y)).astype(np.float64)
    out = _f(out + _f(x * x).astype(np.float64)).astype(np.float64)
    return _f(out + _f(np.power(2.0, y)).astype(np.float64))


def ew_axpby(x, y, alpha):
    x, y = x.astype(np.float64), y.astype(np.float64)
    # (the device's add and sub round alpha * y to float32, then the sum)
    s = _f(x + _f(alpha * y).astype(np.float64)).astype(np.float64)
    p = _f(_f(x * y).astype(np.float64) / 4).astype(np.float64)
    out = _f(s - p).astype(np.float64)
    return _f(out - _f(2 * y).astype(np.float64))


def ew_bits(a, b, mask):
    return ((a & np.int32(mask)) | ~b).astype(np.int32)
