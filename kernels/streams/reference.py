"""numpy references of the streams library (ml_dtypes for float8_e4m3)."""
import ml_dtypes
import numpy as np


def stream_saxpy(x, y, a):
    return (np.float32(a) * x + y).astype(np.float32)


def tcm_to_fp8(x):
    return x.astype(ml_dtypes.float8_e4m3)


def u16_scale(x, k):
    # (int64 holds x * k for any int k; % with a positive modulus is never
    # negative, as the kernel's unsigned wrap-around)
    return ((x.astype(np.int64) * np.int64(k)) % 65536).astype(np.uint16)
