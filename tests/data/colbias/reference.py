"""numpy reference of tests/data/colbias: what a correct kernel returns."""
import numpy as np


def colbias(x, b):
    return (x + b[None, :]).astype(np.float32)
