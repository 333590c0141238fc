"""numpy references of the tcm_eltwise library."""
import numpy as np


def scale_shift(x, scale, shift):
    return x * np.float32(scale) + np.float32(shift)


def leaky_relu(x, slope):
    return np.where(x > 0, x, x * np.float32(slope)).astype(np.float32)
