"""numpy reference of the audio team's op."""
import numpy as np


def mix(a, b):
    return (np.float32(0.5) * (a + b)).astype(np.float32)
