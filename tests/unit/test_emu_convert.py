"""Converting a vector's numbers to a device dtype (gpsimd_emu.convert):
exact for integers or the vector fails naming the value, its index and its
source; floats rounded, a literal never made infinite."""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from gpsimd_device.plan import TensorSpec, VectorPlan
from gpsimd_emu import dtypes as dt
from gpsimd_emu import vectors
from gpsimd_emu.convert import to_dtype
from gpsimd_emu.vectors import Input, PlanError

I32 = dt.by_name("int32")
X = np.array([0, 2, 4], dtype=np.int32)
#: the reviewer's op: int32 x -> x / 2 (C++ integer division); a kernel returns [0, 1, 2]
INPUTS = [Input("x", "tensor", I32, X, X)]


def expected(exp, dtype="int32", root=".", shape=None):
    v = VectorPlan.from_json({"name": "v", "inputs": {}, "output": {"dtype": dtype, "shape": shape},
                              "expected": exp}, "v")
    return vectors.expected_output(v, INPUTS, dt.by_name(dtype), root, 60.0)


def tensor(spec, root="."):
    return vectors.make_tensor(TensorSpec.from_json("x", {"kind": "tensor", **spec}, "x"), root,
                               "input 'x'")


def failure(call, *args, **kw):
    with pytest.raises(PlanError) as e:
        call(*args, **kw)
    return str(e.value)


@pytest.fixture
def refs(tmp_path):
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def off(x): return (x + 0.9) / 2\n"          # float64 [0.45, 1.45, 2.45]
        "def exact(x): return x / 2\n"                 # float64 [0., 1., 2.]: integral, kept
        "def wide(x): return x.astype(np.int64) * 1000\n"
        "def neg(x): return x.astype(np.int64) - 1\n"
        "def gt(x): return x > 0\n"
        "def nan(x): return np.where(x > 0, x / 2, np.nan)\n"
        "def half(x): return 0.5\n"
        "def cplx(x): return x + 1j\n"
        "def big(x): return np.float64(x) * 1e6\n"
        "def tenth(x): return np.full(x.shape, 0.1)\n"
        "def ragged(x): return [[1, 2], [3]]\n"
        "def mixed(x): return [1, True, 2]\n"
        "def mixedf(x): return [0.5, np.True_, 2.0]\n")
    return str(tmp_path)


def test_the_reviewers_vectors_fail_naming_value_index_and_source(refs):
    assert failure(expected, {"values": [0.9, 1.9, 2.9]}) == (
        "expected value 0.9 at [0] is not an int32 (the output's dtype), from the vector's "
        "expected values (and 2 more)")
    assert failure(expected, {"reference": {"file": "ref.py", "function": "off"}}, root=refs) == (
        "expected value 0.45 at [0] is not an int32 (the output's dtype), from the reference "
        "ref.py:off (and 2 more)")
    # integral floats are exact: kept
    out = expected({"reference": {"file": "ref.py", "function": "exact"}}, root=refs)
    assert out.dtype == np.int32 and out.tolist() == [0, 1, 2]
    assert expected({"values": [0.0, 1.0, 2.0]}).tolist() == [0, 1, 2]


@pytest.mark.parametrize("exp,dtype,message", [
    ({"values": [1, 300]}, "uint8",
     "expected value 300 at [1] is out of range for uint8 (the output's dtype, 0..255), from the "
     "vector's expected values"),
    ({"values": [[1, 2], [-1, 4]]}, "uint32",
     "expected value -1 at [1, 0] is out of range for uint32 (the output's dtype, 0..4294967295), "
     "from the vector's expected values"),
    ({"values": [1, float("nan")]}, "int32",
     "expected value nan at [1] is not an int32 (the output's dtype), from the vector's expected values"),
    ({"values": [float("-inf")]}, "int8",
     "expected value -inf at [0] is not an int8 (the output's dtype), from the vector's expected values"),
    ({"values": [2 ** 64]}, "uint64",
     "expected value 18446744073709551616 at [0] is out of range for uint64 (the output's dtype, "
     "0..18446744073709551615), from the vector's expected values"),
    ({"reference": {"file": "ref.py", "function": "wide"}}, "int8",
     "expected value 2000 at [1] is out of range for int8 (the output's dtype, -128..127), from the "
     "reference ref.py:wide (and 1 more)"),
    ({"reference": {"file": "ref.py", "function": "neg"}}, "uint16",
     "expected value -1 at [0] is out of range for uint16 (the output's dtype, 0..65535), from the "
     "reference ref.py:neg"),
    ({"reference": {"file": "ref.py", "function": "gt"}}, "int32",
     "expected value False at [0] is a bool, not an int32 (the output's dtype), from the reference "
     "ref.py:gt (and 2 more)"),
    ({"reference": {"file": "ref.py", "function": "gt"}}, "float32",
     "expected value False at [0] is a bool, not a float32 (the output's dtype), from the reference "
     "ref.py:gt (and 2 more)"),
    # a bool among a list's numbers: numpy's own reading makes True 1
    ({"reference": {"file": "ref.py", "function": "mixed"}}, "int32",
     "expected value True at [1] is a bool, not an int32 (the output's dtype), from the reference "
     "ref.py:mixed"),
    ({"reference": {"file": "ref.py", "function": "mixedf"}}, "float32",
     "expected value True at [1] is a bool, not a float32 (the output's dtype), from the reference "
     "ref.py:mixedf"),
    ({"reference": {"file": "ref.py", "function": "nan"}}, "int32",
     "expected value nan at [0] is not an int32 (the output's dtype), from the reference ref.py:nan"),
    ({"reference": {"file": "ref.py", "function": "half"}}, "int32",
     "expected value 0.5 is not an int32 (the output's dtype), from the reference ref.py:half"),
    ({"reference": {"file": "ref.py", "function": "cplx"}}, "float32",
     "expected value 1j at [0] is complex, not a float32 (the output's dtype), from the reference "
     "ref.py:cplx (and 2 more)"),
    ({"reference": {"file": "ref.py", "function": "ragged"}}, "float32",
     "the reference ref.py:ragged returned no array: ValueError: setting an array element with a "
     "sequence. The requested array has an inhomogeneous shape after 1 dimensions. The detected "
     "shape was (2,) + inhomogeneous part."),
])
def test_a_value_the_output_dtype_cannot_hold_fails_the_vector(refs, exp, dtype, message):
    assert failure(expected, exp, dtype, root=refs) == message


def test_an_expected_npy_is_checked_too(tmp_path):
    np.save(tmp_path / "e.npy", np.array([1.0, 2.5]))
    assert failure(expected, {"npy": "e.npy"}, root=str(tmp_path)) == (
        "expected value 2.5 at [1] is not an int32 (the output's dtype), from the expected .npy e.npy")
    np.save(tmp_path / "e.npy", np.array([255, 256], dtype=np.int64))
    assert failure(expected, {"npy": "e.npy"}, "uint8", root=str(tmp_path)) == (
        "expected value 256 at [1] is out of range for uint8 (the output's dtype, 0..255), from the "
        "expected .npy e.npy")


def test_64_bit_integers_stay_exact():
    big = [2 ** 64 - 1, 2 ** 63 + 1, 1]
    assert expected({"values": big}, "uint64").tolist() == big
    # an integral float beside them does not round them (numpy's own list reading would)
    assert expected({"values": [2 ** 63 + 1, 2.0]}, "uint64").tolist() == [2 ** 63 + 1, 2]
    assert expected({"values": [-2 ** 63, 2 ** 63 - 1]}, "int64").tolist() == [-2 ** 63, 2 ** 63 - 1]
    # Python ints in an object array (a reference's) too, not through float64
    odd = np.array([2 ** 53 + 1, -3], dtype=object)
    assert to_dtype(odd, dt.by_name("int64"), "v").tolist() == [2 ** 53 + 1, -3]
    assert failure(to_dtype, np.array([1, None], dtype=object), I32, "v", "x") == (
        "vs, from x: None is not a number")


def test_64_bit_bounds_as_floats_are_out_of_range_not_saturated():
    i64, u64 = dt.by_name("int64"), dt.by_name("uint64")
    assert failure(to_dtype, np.array(2.0 ** 63), i64, "expected value") == (
        "expected value 9.223372036854776e+18 is out of range for int64 (its dtype, "
        "-9223372036854775808..9223372036854775807)")
    assert failure(to_dtype, np.array([2.0 ** 64]), u64, "v", "x") == (
        "v 1.8446744073709552e+19 at [0] is out of range for uint64 (its dtype, "
        "0..18446744073709551615), from x")
    assert failure(to_dtype, np.array([2 ** 64 - 1], dtype=np.uint64), i64, "v") == (
        "v 18446744073709551615 at [0] is out of range for int64 (its dtype, "
        "-9223372036854775808..9223372036854775807)")
    assert failure(to_dtype, np.array([1.5], dtype=ml_dtypes.bfloat16), I32, "v") == (
        "v 1.5 at [0] is not an int32 (its dtype)")


def test_floats_round_and_overflow_to_inf_except_written_values(refs):
    f16 = dt.by_name("float16")
    # rounding a float64 reference is what tolerances are for
    out = expected({"reference": {"file": "ref.py", "function": "tenth"}}, "float16", root=refs)
    assert out.dtype == np.float16 and out.tolist() == [float(np.float16(0.1))] * 3
    # a computed value past the largest finite one is the dtype's infinity, as its arithmetic makes
    out = expected({"reference": {"file": "ref.py", "function": "big"}}, "float16", root=refs)
    assert out.tolist() == [0.0, float("inf"), float("inf")]
    # a written one is refused: write .inf
    assert failure(expected, {"values": [1.0, 1e6]}, "float16") == (
        "expected value 1000000.0 at [1] is out of range for float16 (the output's dtype, largest "
        "finite 65504; write .inf for an infinity), from the vector's expected values")
    assert expected({"values": [float("inf"), 65519.0, float("nan")]}, "float16").tolist()[:2] == [
        float("inf"), 65504.0]
    assert to_dtype(np.array([1e6]), f16, "v").tolist() == [float("inf")]
    assert failure(to_dtype, np.array([300.0]), dt.by_name("float8_e4m3"), "v", literal=True) == (
        "v 300.0 at [0] is out of range for float8_e4m3 (its dtype, largest finite 240; write .inf "
        "for an infinity)")


def test_inputs_follow_the_same_rule(tmp_path):
    assert failure(tensor, {"dtype": "int32", "shape": [2], "values": [1, 0.5]}) == (
        "input 'x' value 0.5 at [1] is not an int32 (its dtype), from its values")
    assert failure(tensor, {"dtype": "float16", "shape": [1], "values": [7e4]}) == (
        "input 'x' value 70000.0 at [0] is out of range for float16 (its dtype, largest finite "
        "65504; write .inf for an infinity), from its values")
    np.save(tmp_path / "x.npy", np.array([255, 300], dtype=np.int16))
    assert failure(tensor, {"dtype": "uint8", "npy": "x.npy"}, root=str(tmp_path)) == (
        "input 'x' value 300 at [1] is out of range for uint8 (its dtype, 0..255), from its .npy x.npy")
    # a random draw is not wrapped either ...
    assert failure(tensor, {"dtype": "int8", "shape": [64], "random": {
        "seed": 1, "distribution": "integers", "low": 0, "high": 1000}}).startswith(
        "input 'x' value ")
    assert "is out of range for int8 (its dtype, -128..127), from its random draw (integers)" in \
        failure(tensor, {"dtype": "int8", "shape": [64], "random": {
            "seed": 1, "distribution": "integers", "low": 0, "high": 1000}})
    # ... but a float draw for an integer dtype is rounded toward zero, as documented
    drawn = tensor({"dtype": "int32", "shape": [50], "random": {
        "seed": 2, "distribution": "uniform", "low": -5.0, "high": 5.0}})
    ref = np.trunc(np.random.default_rng(2).uniform(-5.0, 5.0, size=50)).astype(np.int32)
    assert drawn.dtype == np.int32 and drawn.tolist() == ref.tolist()
    # raw bytes of the dtype's size (numpy's .npy of an ml_dtypes array) are read bit for bit
    bf = np.array([1.5, -2.0, 3.0e38], dtype=ml_dtypes.bfloat16)
    np.save(tmp_path / "b.npy", bf)
    assert np.load(tmp_path / "b.npy").dtype.kind == "V"
    got = tensor({"dtype": "bfloat16", "npy": "b.npy"}, root=str(tmp_path))
    assert got.dtype == ml_dtypes.bfloat16 and got.tobytes() == bf.tobytes()
    assert failure(tensor, {"dtype": "float32", "npy": "b.npy"}, root=str(tmp_path)) == (
        "input 'x' values, from its .npy b.npy: cannot convert |V2 to float32 (save the array as "
        "float32 or an integer dtype)")


def test_an_ml_dtypes_type_outside_the_table_is_read_as_its_numbers_not_its_bits(tmp_path):
    # ml_dtypes' own types (int4, float8_e4m3fn, ...) have numpy kind "V" as raw bytes
    # have; read bit for bit, int4 -1 (its byte 0x0F) was an int8 15, so a quantizing
    # kernel that forgot to sign-extend passed
    int4 = np.array([-1, 3], dtype=ml_dtypes.int4)
    assert to_dtype(int4, dt.by_name("int8"), "v").tolist() == [-1, 3]
    assert failure(to_dtype, int4, dt.by_name("uint8"), "v") == (
        "v -1 at [0] is out of range for uint8 (its dtype, 0..255)")
    fnuz = np.array([1.0, 3.0], dtype=ml_dtypes.float8_e5m2fnuz)     # (another bias: 2 and 6)
    assert to_dtype(fnuz, dt.by_name("float8_e5m2"), "v").tolist() == [1.0, 3.0]
    fn = np.array([1.0, 320.0], dtype=ml_dtypes.float8_e4m3fn)       # (320: e4m3's NaN bits)
    assert to_dtype(fn, dt.by_name("float8_e4m3"), "v").tolist() == [1.0, float("inf")]
    assert failure(to_dtype, np.array([1.5], dtype=ml_dtypes.float8_e4m3fn), dt.by_name("int8"),
                   "v") == "v 1.5 at [0] is not an int8 (its dtype)"
    # raw bytes (a .npy of an ml_dtypes array) are still read bit for bit
    assert to_dtype(fn.view("V1"), dt.by_name("float8_e4m3"), "v").view(np.uint8).tolist() == \
        fn.view(np.uint8).tolist()
    (tmp_path / "ref.py").write_text(
        "import ml_dtypes\nimport numpy as np\n"
        "def quant4(x): return (np.clip(x, -8, 7) - 1).astype(ml_dtypes.int4)\n")
    ref = {"reference": {"file": "ref.py", "function": "quant4"}}
    assert expected(ref, "int8", root=str(tmp_path)).tolist() == [-1, 1, 3]
    # integers for a float output whose dtype was only the first input's: refused as int8 is
    v = VectorPlan.from_json({"name": "v", "inputs": {}, "output": {
        "dtype": "float32", "shape": None, "defaulted": True},
                              "expected": ref}, "v")
    f32 = dt.by_name("float32")
    xs = [Input("x", "tensor", f32, X.astype(np.float32), X.astype(np.float32))]
    assert "gives int4 values, but the output's dtype is float32 only as the first tensor " \
        "input's" in failure(vectors.expected_output, v, xs, f32, str(tmp_path), 60.0)


def test_a_reference_s_list_keeps_its_integers_exact(tmp_path):
    # numpy reads a list of ints beside floats (or numpy's uint64 beside Python ints) as
    # float64: 2**53 + 1 became 2**53, and a kernel returning 2**53 passed
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def mixed(x): return [2**53 + 1, 1.0, np.float32(2.0)]\n"
        "def unsigned(x): return [np.uint64(2**63 + 1), 1, 2]\n"
        "def signed(x): return [np.int64(2**53 + 1), np.float32(4.0), -1]\n"
        "def frac(x): return [2**53 + 1, 0.5, 1]\n"
        "def floats(x): return [2**53 + 1, 0.5, 1]\n")
    root = str(tmp_path)

    def ref(function, dtype):
        return expected({"reference": {"file": "ref.py", "function": function}}, dtype, root=root)

    assert ref("mixed", "int64").tolist() == [2 ** 53 + 1, 1, 2]
    assert ref("unsigned", "uint64").tolist() == [2 ** 63 + 1, 1, 2]
    assert ref("signed", "int64").tolist() == [2 ** 53 + 1, 4, -1]
    assert failure(ref, "frac", "int64") == (
        "expected value 0.5 at [1] is not an int64 (the output's dtype), from the reference "
        "ref.py:frac")
    assert ref("floats", "float32").tolist() == [2.0 ** 53, 0.5, 1.0]


@pytest.mark.parametrize("name,value,nearest", [
    ("bfloat16", 1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -7),      # (just past the halfway point)
    ("bfloat16", -(1 + 2 ** -8 + 2 ** -30), -(1 + 2 ** -7)),
    ("bfloat16", 1 + 2 ** -8, 1.0),                         # (the tie itself: to even)
    ("float8_e4m3", 1 + 2 ** -4 + 2 ** -30, 1.125),
    ("float8_e3m4", 1 + 2 ** -5 + 2 ** -40, 1.0625),
    ("float8_e5m2", 1 + 2 ** -3 + 2 ** -40, 1.25),
    ("bfloat16", 2.0 ** -149 / 4, 0.0),                     # (below every float32: still 0)
    ("bfloat16", 1e39, float("inf")),
])
def test_a_float_rounds_once_to_the_nearest_value_of_a_narrow_dtype(name, value, nearest):
    # ml_dtypes casts a float64 through float32: rounded twice, 1 + 2**-8 + 2**-30
    # became the bfloat16 1.0, so with rtol: 0 a kernel rounding the same wrong way passed
    got = to_dtype(np.array([value, float("nan")]), dt.by_name(name), "v").astype(np.float64)
    assert got[0] == nearest and np.isnan(got[1])


def test_a_32_bit_integer_rounds_once_to_the_nearest_bfloat16():
    # (an int32 goes through float32 in ml_dtypes' cast: 2**24 + 2**16 + 1 became 2**24)
    for kind in (np.int32, np.uint32, np.int64):
        got = to_dtype(np.array([2 ** 24 + 2 ** 16 + 1], dtype=kind), dt.by_name("bfloat16"), "v")
        assert got.astype(np.float64).tolist() == [2 ** 24 + 2 ** 17]


def test_an_exact_value_wider_than_float64_rounds_once_too(tmp_path):
    # a reference's value went to float64 first (nearest), then to the output's dtype:
    # 2**53 + 2**29 + 1 beside a float became 2**53 + 2**29, a tie, then float32 2**53
    # (even) where the nearest is 2**53 + 2**30; a Fraction, a longdouble, an int64 for
    # bfloat16, a Python int past 64 bits: the same, so with rtol: 0 a kernel rounding
    # the same wrong way passed
    (tmp_path / "ref.py").write_text(
        "from fractions import Fraction\nimport numpy as np\n"
        "def mixed(x): return [2**53 + 2**29 + 1, 0.5, 1.0]\n"
        "def frac(x): return [Fraction(2**24 + 1, 2**24) + Fraction(1, 2**60), 0.5, 1]\n"
        "def longdouble(x): return np.full(3, np.longdouble(1) + np.longdouble(2.0**-11) "
        "+ np.longdouble(2.0**-60))\n"
        "def int64(x): return np.full(3, 2**60 + 2**52 + 1, dtype=np.int64)\n"
        "def huge(x): return [2**70 + 2**46 + 1, 2**70 + 2**62 + 1, -(2**70 + 2**46 + 1)]\n")
    root = str(tmp_path)

    def ref(function, dtype):
        out = expected({"reference": {"file": "ref.py", "function": function}}, dtype, root=root)
        return out.astype(np.float64).tolist()

    assert ref("mixed", "float32") == [2.0 ** 53 + 2 ** 30, 0.5, 1.0]
    assert ref("frac", "float32") == [1 + 2.0 ** -23, 0.5, 1.0]
    if np.finfo(np.longdouble).nmant >= 60:     # (x86's 80-bit long double)
        assert ref("longdouble", "float16") == [1 + 2.0 ** -10] * 3
    assert ref("int64", "bfloat16") == [2.0 ** 60 + 2 ** 53] * 3
    assert ref("huge", "float32")[0] == 2.0 ** 70 + 2 ** 47
    assert ref("huge", "bfloat16")[1] == 2.0 ** 70 + 2 ** 63
    assert ref("huge", "float32")[2] == -(2.0 ** 70 + 2 ** 47)
    # an int past float64's range is past every float dtype's: its infinity
    assert to_dtype(np.array([10 ** 400, -10 ** 400], dtype=object), dt.by_name("float32"),
                    "v").tolist() == [float("inf"), float("-inf")]
    # a fraction is no integer, however near float64 makes it one
    assert failure(to_dtype, np.array([Fraction(2 ** 62 + 1, 2)], dtype=object),
                   dt.by_name("int64"), "v") == "v 4611686018427387905/2 at [0] is not an int64 (its dtype)"
