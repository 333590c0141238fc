"""numpy references of the deliberately broken kernels (kernels/broken/):
what a correct kernel would return."""
import numpy as np


def double(x):
    return (x * np.float32(2)).astype(np.float32)


def double_plus(x, s):
    return (x * np.float32(2 + s)).astype(np.float32)
