"""numpy references of the deliberately broken kernels (kernels/broken/):
what a correct kernel would return."""
import numpy as np


def double(x):
    return (x * np.float32(2)).astype(np.float32)


def with_165_at_500(x):
    y = np.array(x, copy=True)
    y[500] = 165
    return y


def double_plus(x, s):
    return (x * np.float32(2 + s)).astype(np.float32)


def triple(x):
    return (x * np.float32(3)).astype(np.float32)


def reduce_partials(x):
    """8 cores x 8 partial sums of 16 consecutive elements each (summed in
    order in float32, as the kernel does): out[8k:8k+8] the partials of core
    k, except out[0:8], the sums over the cores."""
    p = np.cumsum(x.reshape(8, 8, 16), axis=2, dtype=np.float32)[:, :, -1]
    out = p.reshape(64).copy()
    out[:8] = np.cumsum(p, axis=0, dtype=np.float32)[-1]
    return out


def neighbour_carry(x):
    """2x, plus at the first element of each core's slice the last element
    of the previous slice (cores in order)."""
    y = (x * np.float32(2)).astype(np.float32)
    n = x.size
    begins = [k * (n // 8) + min(k, n % 8) for k in range(8)]
    for b in begins[1:]:
        y[b] += y[b - 1]
    return y


def partial_sums(x):
    """8 cores x 4 partial sums: core k's out[4k + j] sums its elements
    32k + j, 32k + j + 4, ... (integer values: exact in any order)."""
    return x.reshape(8, 8, 4).sum(axis=1, dtype=np.float32).reshape(32)


def five_partial_sums(x):
    """partial_sums, kept in five memories that start at zero, added up."""
    return (partial_sums(x) * np.float32(5)).astype(np.float32)


def halve_off(x):
    """halve_int's result, 0.45 off: float64 (x + 0.9) / 2, no int32."""
    return (x + 0.9) / 2


def twice_minus_one(x):
    """2x - 1 (a two-pass kernel's result)."""
    return 2 * x - 1


def stencil(x):
    """2 x[i] + x[i - 1], x[-1] taken as 0 (the padding the kernel forgot)."""
    return (x * np.float32(2) + np.concatenate([np.zeros(1, x.dtype), x[:-1]])).astype(np.float32)


def stencil_pad0(x):
    """y[i] = x[i] + x[i + 1], x padded with a zero."""
    return (x + np.append(x[1:], np.float32(0))).astype(np.float32)
