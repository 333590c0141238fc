"""numpy reference of the shared team's op."""
import numpy as np


def scale(x, s):
    return (x * np.float32(s)).astype(np.float32)
