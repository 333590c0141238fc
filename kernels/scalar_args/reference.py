"""numpy references of the scalar_args library."""
import numpy as np


def add_scalar(x, alpha):
    return x + np.float32(alpha)


def clamp_int(x, lo, hi):
    return np.clip(x, lo, hi).astype(np.int32)


def offset_long(x, offset):
    return x + np.int64(offset)
