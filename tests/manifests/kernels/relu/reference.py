"""A reference module for the manifest tests (never run by them)."""
import numpy as np


def relu(x):
    return np.maximum(x, 0)
