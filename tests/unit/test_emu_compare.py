"""Comparison and tolerance logic (gpsimd_emu.compare)."""
import math
import warnings

import ml_dtypes
import numpy as np

from gpsimd_device.plan import VectorPlan
from gpsimd_emu import compare as cmp
from gpsimd_emu import dtypes as dt
from gpsimd_emu.vectors import tolerances

F32 = dt.by_name("float32")


def compare(actual, expected, dtype, rtol=None, atol=None):
    """``compare`` with a vector's tolerances (None: the dtype's default)."""
    vector = VectorPlan("v", {}, rtol=rtol, atol=atol)
    return cmp.compare(actual, expected, dtype, *tolerances(vector, dtype))


def test_within_tolerance_passes_and_reports_max_error():
    e = np.array([1.0, 2.0, 100.0], np.float32)
    a = e + np.array([1e-6, 0.0, 1e-4], np.float32)
    c = compare(a, e, F32)
    assert c.ok and c.mismatches == 0 and c.total == 3 and c.message == ""
    assert math.isclose(c.max_abs_err, float(np.float32(100.0001) - 100.0), rel_tol=1e-6)


def test_tolerance_is_atol_plus_rtol_times_expected():
    e = np.array([1000.0], np.float64)
    # bound = 1e-5 + 1.3e-6 * 1000 = 1.31e-3
    assert compare(np.array([1000.0013]), e, F32).ok
    assert not compare(np.array([1000.0014]), e, F32).ok
    assert compare(np.array([1000.5]), e, F32, rtol=1e-3, atol=0).ok


def test_message_lists_first_mismatches_with_flat_indices():
    e = np.zeros((3, 4), np.float32)
    a = e.copy()
    a[0, 1], a[2, 3] = 0.5, -2.0
    c = compare(a, e, F32)
    assert not c.ok and c.mismatches == 2 and c.max_abs_err == 2.0
    assert c.message == ("2 of 12 elements differ (rtol=1.3e-06, atol=1e-05): "
                         "[1] actual 0.5 expected 0, [11] actual -2 expected 0; max_abs_err 2")


def test_many_mismatches_are_summarised():
    c = compare(np.ones(100, np.float32), np.zeros(100, np.float32), F32)
    assert c.mismatches == 100
    assert "[4] actual 1 expected 0, ... (95 more)" in c.message


def test_nan_equals_nan_and_infinities():
    e = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert compare(e.copy(), e, F32).ok
    c = compare(np.array([1.0, np.inf, np.inf, np.nan], np.float32), e, F32)
    assert c.mismatches == 3 and math.isinf(c.max_abs_err)
    assert "[0] actual 1 expected nan" in c.message



def test_an_infinite_tolerance_passes_equal_values_as_numpy_does():
    # (rtol: .inf in the manifest: inf * |0| is NaN, which must not make 0 against 0 a mismatch;
    # numpy.isclose(0, 0, rtol=inf) is True)
    e = np.array([0.0, -0.0, 2.0, 0.0], np.float32)
    a = np.array([0.0, 0.0, 7.0, 1.0], np.float32)
    c = compare(a, e, F32, rtol=math.inf, atol=0.0)
    assert c.mismatches == 1 and "[3] actual 1 expected 0" in c.message
    with warnings.catch_warnings():     # (numpy 2 warns of the infinite rtol)
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isclose(a, e, rtol=math.inf, atol=0.0).tolist() == [True, True, True, False]

def test_integers_are_exact_without_overflow():
    i64 = dt.by_name("int64")
    e = np.array([np.iinfo(np.int64).min, 5], np.int64)
    a = np.array([np.iinfo(np.int64).max, 5], np.int64)
    c = compare(a, e, i64, rtol=0.5, atol=10)      # tolerances ignored for ints
    assert c.mismatches == 1 and c.max_abs_err == float(2 ** 64 - 1)
    assert "(exact)" in c.message and "[0] actual 9223372036854775807" in c.message
    u8 = dt.by_name("uint8")
    c = compare(np.array([0, 255], np.uint8), np.array([255, 255], np.uint8), u8)
    assert c.mismatches == 1 and c.max_abs_err == 255.0


def test_bfloat16_and_fp8_use_their_defaults():
    bf = dt.by_name("bfloat16")
    e = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    a = np.array([1.0078125, 2.0], ml_dtypes.bfloat16)    # one bf16 ulp at 1.0
    assert compare(a, e, bf).ok
    assert not compare(a, e, bf, rtol=0, atol=0).ok
    f8 = dt.by_name("float8_e4m3")
    assert compare(np.array([1.125], ml_dtypes.float8_e4m3),
                   np.array([1.0], ml_dtypes.float8_e4m3), f8).ok


def test_shape_mismatch_and_empty():
    c = compare(np.zeros(3), np.zeros(4), F32)
    assert not c.ok and "output shape [3] != expected shape [4]" in c.message
    assert compare(np.zeros(0), np.zeros(0), F32).ok
