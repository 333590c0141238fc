"""The dtype table (gpsimd_emu.dtypes): names, ISA values, numpy types, tolerances."""
import ml_dtypes
import numpy as np
import pytest

from gpsimd_emu import dtypes as dt

# the device ABI (gpsimd_host/abi.h) / abi.h enum NEURON_ISA_TPB_DTYPE
EXPECTED = {
    "float32": (10, np.float32, 4), "float16": (7, np.float16, 2),
    "bfloat16": (6, ml_dtypes.bfloat16, 2), "int8": (2, np.int8, 1),
    "uint8": (3, np.uint8, 1), "int16": (4, np.int16, 2), "uint16": (5, np.uint16, 2),
    "int32": (8, np.int32, 4), "uint32": (9, np.uint32, 4), "int64": (12, np.int64, 8),
    "uint64": (1, np.uint64, 8), "float8_e3m4": (13, ml_dtypes.float8_e3m4, 1),
    "float8_e4m3": (14, ml_dtypes.float8_e4m3, 1), "float8_e5m2": (15, ml_dtypes.float8_e5m2, 1),
}


def test_table_has_exactly_the_fourteen_names():
    assert set(dt.DTYPES) == set(EXPECTED)
    assert len(dt.DTYPES) == 14


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_name_isa_numpy_round_trip(name):
    isa, npt, size = EXPECTED[name]
    d = dt.by_name(name)
    assert d.isa == isa
    assert d.numpy == np.dtype(npt)
    assert d.itemsize == size
    assert dt.by_numpy(npt) is d
    assert dt.by_numpy(np.zeros(3, dtype=npt).dtype) is d


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_values_round_trip_through_bytes(name):
    d = dt.by_name(name)
    vals = np.array([0, 1, 2, 3], dtype=np.float64).astype(d.numpy)
    back = np.frombuffer(vals.tobytes(), dtype=d.numpy)
    assert back.tobytes() == vals.tobytes()
    assert [float(v) for v in back] == [0.0, 1.0, 2.0, 3.0]


def test_default_tolerances():
    assert (dt.by_name("float32").rtol, dt.by_name("float32").atol) == (1.3e-6, 1e-5)
    assert (dt.by_name("float16").rtol, dt.by_name("float16").atol) == (1e-3, 1e-5)
    assert (dt.by_name("bfloat16").rtol, dt.by_name("bfloat16").atol) == (1.6e-2, 1e-5)
    for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        d = dt.by_name(n)
        assert (d.rtol, d.atol, d.is_float, d.is_integer) == (0.0, 0.0, False, True)


def test_fp8_tolerances_are_eps_and_smallest_subnormal():
    assert (dt.by_name("float8_e3m4").rtol, dt.by_name("float8_e3m4").atol) == (0.0625, 0.015625)
    assert (dt.by_name("float8_e4m3").rtol, dt.by_name("float8_e4m3").atol) == (0.125, 2.0 ** -9)
    assert (dt.by_name("float8_e5m2").rtol, dt.by_name("float8_e5m2").atol) == (0.25, 2.0 ** -16)


def test_fp8_tolerance_covers_one_rounding():
    # Any float64 value rounded to the format is within the tolerance of itself.
    rng = np.random.default_rng(1)
    for n in ("float8_e3m4", "float8_e4m3", "float8_e5m2", "bfloat16", "float16"):
        d = dt.by_name(n)
        x = rng.uniform(-4, 4, 1000)
        y = x.astype(d.numpy).astype(np.float64)
        assert np.all(np.abs(y - x) <= d.atol + d.rtol * np.abs(x)), n


def test_unknown_lookups_raise_key_error_with_names():
    with pytest.raises(KeyError, match="unknown dtype 'float64'.*float32"):
        dt.by_name("float64")
    with pytest.raises(KeyError, match="float64"):
        dt.by_numpy(np.float64)
