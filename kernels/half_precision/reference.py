"""numpy references of the half_precision library (ml_dtypes for bfloat16)."""
import ml_dtypes
import numpy as np


def gelu_bf16(x):
    v = x.astype(np.float64)
    y = 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v ** 3)))
    return y.astype(ml_dtypes.bfloat16)


def mul_f16(a, b):
    return (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16)
