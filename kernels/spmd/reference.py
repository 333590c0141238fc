"""numpy references of the spmd library."""
import numpy as np


def spmd_relu(x):
    return np.maximum(x, np.float32(0))


def spmd_axpy(x, y, alpha):
    return (x + np.float32(alpha) * y).astype(np.float32)


def spmd_owner(x):
    # the fair split: the first numel % 8 cores own one extra element each,
    # as numpy's array_split divides
    owner = np.concatenate([np.full(len(part), core, dtype=np.float32)
                            for core, part in enumerate(np.array_split(np.arange(x.size), 8))])
    return (x.reshape(-1) * np.float32(8) + owner).reshape(x.shape).astype(np.float32)
