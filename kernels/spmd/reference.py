"""numpy references of the spmd library."""
import numpy as np


def spmd_relu(x):
    return np.maximum(x, np.float32(0))


def spmd_axpy(x, y, alpha):
    return (x + np.float32(alpha) * y).astype(np.float32)
