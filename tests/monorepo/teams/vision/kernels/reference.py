"""numpy reference of the vision team's op."""
import numpy as np


def clamp01(x):
    return np.clip(x, np.float32(0), np.float32(1)).astype(np.float32)
