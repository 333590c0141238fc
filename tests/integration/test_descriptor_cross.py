"""Descriptor round trip between the Python device model and the host C++
runtime, at the byte level (abi.h, ``arg_tensor_t``; ARCHITECTURE.md "The
device's marshalling").

For EVERY storage dtype of the ISA enum (14: FP32R has no storage type), both
storage arms (HBM: u64 address + count; SBUF: u32 offset from the
``_sbuf_window`` base + count, partitions, elements per block) and all three
shape forms (inline 4-D, inline 8-D, out-of-line):

* Python -> bytes: the 48-byte descriptors the model puts in the argument
  stream and the output descriptor are checked field by field at the spec's
  literal offsets with ``struct`` (independently of ``gpsimd_emu.abi``);
* bytes -> C++: a probe kernel (tests/probe/describe.cpp, built by scons)
  reports what the runtime decoded: ScalarType, rank, element count, sizes
  and the raw bits of the first and last element;
* C++ -> Python: an ``echo`` op returns its input, so the runtime's staged
  writeback (UTensor::copy with the utypes.hpp:65 gate) writes the bytes
  into the output descriptor's storage (HBM or SBUF), and the model reads
  them back bit-exactly.
"""
import json
import struct

import ml_dtypes
import numpy as np
import pytest

from conftest import ROOT, copy_built, run_scons
from gpsimd_emu import abi
from gpsimd_emu.memory import SBUF_WINDOW_BASE
from gpsimd_device.plan import VectorPlan
from emu_run import load_plan, prepare_cores, run_vector


def V(vec):
    """A plan vector from its JSON form."""
    return VectorPlan.from_json(vec, "vector")

# name: (ISA enum value, c10::ScalarType value, numpy type)  -- abi.h enum,
# PyTorch's ScalarType numbers (ours for the two IEEE-style fp8 formats).
DTYPES = {
    "uint64": (1, 29, np.uint64), "int8": (2, 1, np.int8), "uint8": (3, 0, np.uint8),
    "int16": (4, 2, np.int16), "uint16": (5, 27, np.uint16),
    "bfloat16": (6, 15, ml_dtypes.bfloat16), "float16": (7, 5, np.float16),
    "int32": (8, 3, np.int32), "uint32": (9, 28, np.uint32), "float32": (10, 6, np.float32),
    "int64": (12, 4, np.int64), "float8_e3m4": (13, 41, ml_dtypes.float8_e3m4),
    "float8_e4m3": (14, 40, ml_dtypes.float8_e4m3), "float8_e5m2": (15, 23, ml_dtypes.float8_e5m2),
}
# shape form name: (enum value at +1, shape)
FORMS = {
    "inline4d": (2, [3, 5]),
    "inline8d": (0, [2, 1, 3, 1, 1, 2, 1, 2]),
    "out_of_line": (1, [1, 1, 1, 1, 65536]),   # a dim > 65535 at rank 5
}
LOCATIONS = {"hbm": 2, "sbuf": 1}


def _data(name, shape, seed):
    """Values of every bit pattern class (NaN/inf excluded: plan values are
    JSON), exactly representable in the dtype."""
    npt = DTYPES[name][2]
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    itemsize = np.dtype(npt).itemsize
    if np.dtype(npt).kind in "iu":
        info = np.iinfo(npt)
        raw = rng.integers(info.min, info.max, size=n, dtype=np.int64 if info.min < 0 else np.uint64,
                           endpoint=True)
        return raw.astype(npt).reshape(shape)
    bits = rng.integers(0, 1 << (8 * itemsize), size=n, dtype=np.uint64).astype(f"u{itemsize}")
    arr = bits.view(npt)
    finite = np.isfinite(arr.astype(np.float32))
    arr = np.where(finite, arr, np.asarray(1.5, dtype=npt)).astype(npt)
    return arr.reshape(shape)


def _plain(arr):
    """The array as JSON-able nested Python numbers (exact for every dtype)."""
    if arr.dtype.kind in "iu":
        return arr.tolist()
    return arr.astype(np.float64).tolist()


def _bits(arr, i):
    flat = arr.reshape(-1)
    return int(flat[i:i + 1].view(f"u{arr.dtype.itemsize}")[0])


def _describe_expected(name, shape, arr):
    sizes = list(shape) + [0] * (8 - len(shape))
    n = int(np.prod(shape))
    first = _bits(arr, 0) if n else 0
    last = _bits(arr, n - 1) if n else 0
    vals = [DTYPES[name][1], len(shape), n] + sizes + [first, last]
    return np.array([v & ((1 << 64) - 1) for v in vals], dtype=np.uint64).view(np.int64).tolist()


@pytest.fixture(scope="module")
def probe(built_project, tmp_path_factory):
    """The probe library built by scons in this module's copy of the shared
    build: (project dir, plan, cores)."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("descriptor") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "describe.cpp").write_text((ROOT / "tests/probe/describe.cpp").read_text())
    one = {"name": "one", "inputs": {"x": {"dtype": "int64", "shape": [1], "values": [5]}},
           "output": {"dtype": "int64", "shape": [13]},
           "expected": {"values": [4, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 5, 5]}}
    echo = {"name": "one", "inputs": {"x": {"dtype": "int64", "shape": [1], "values": [5]}},
            "expected": {"values": [5]}}
    manifest = {"version": 1, "libraries": [{
        "name": "probe", "sources": ["probe/describe.cpp"],
        "ops": [{"schema": "test::describe(Tensor x) -> Tensor", "vectors": [one]},
                {"schema": "test::echo(Tensor x) -> Tensor", "vectors": [echo]}]}]}
    (proj / "probe.yaml").write_text(json.dumps(manifest, indent=1))
    proc = run_scons(proj, "MANIFEST=probe.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "probe: 2 passed, 0 failed" in out
    plan = load_plan(str(proj / "build/host/probe/testplan.json"))
    cores, error = prepare_cores(plan, str(proj))
    assert error is None
    yield proj, plan, cores
    for c in cores:
        c.close()


def _check_descriptor(desc, name, form, shape, location, arg_addr_ok):
    """Field-by-field check of 48 descriptor bytes at the spec's offsets."""
    assert len(desc) == 48
    loc, shape_type, isa, reserved0 = struct.unpack_from("<BBBB", desc, 0)
    assert (loc, shape_type, isa, reserved0) == (LOCATIONS[location], FORMS[form][0], DTYPES[name][0], 0)
    n = int(np.prod(shape))
    if form == "inline4d":
        assert list(struct.unpack_from("<4I", desc, 8)) == shape + [0] * (4 - len(shape))
    elif form == "inline8d":
        assert list(struct.unpack_from("<8H", desc, 8)) == shape + [0] * (8 - len(shape))
    else:
        dims_addr, ndim, zero = struct.unpack_from("<QII", desc, 8)
        assert (ndim, zero) == (len(shape), 0) and dims_addr >= 0x1_0000_0000
    if location == "hbm":
        addr, count, reserved = struct.unpack_from("<QII", desc, 24)
        assert (count, reserved) == (n, 0)
        assert arg_addr_ok(addr)
    else:
        off, count, parts, pad, per_block = struct.unpack_from("<II B3s I", desc, 24)
        assert (count, parts, pad, per_block) == (n, 1, b"\0\0\0", n)
        assert arg_addr_ok(SBUF_WINDOW_BASE + off)
    assert desc[40:48] == bytes(8)


CASES = [(name, form, loc) for name in DTYPES for form in FORMS for loc in LOCATIONS]


@pytest.mark.parametrize("name,form,location", CASES, ids=["-".join(c) for c in CASES])
def test_round_trip(probe, name, form, location):
    proj, plan, cores = probe
    shape = FORMS[form][1]
    arr = _data(name, shape, seed=len(CASES) * 0 + list(DTYPES).index(name))
    x = {"kind": "tensor", "dtype": name, "shape": shape, "values": _plain(arr), "location": location}
    describe_op, echo_op = plan.ops
    seen = {}

    def capture(image):
        seen["stream"] = image.arg_stream
        seen["out"] = image.out_desc

    # bytes -> C++: what the runtime decoded
    vec = {"name": f"{name}-{form}-{location}", "where": "test", "inputs": {"x": x},
           "output": {"dtype": "int64", "shape": [13], "location": location},
           "expected": {"values": _describe_expected(name, shape, arr)}, "rtol": 0, "atol": 0}
    r = run_vector("probe", describe_op, V(vec), cores, root=str(proj), zygote=str(proj / "build/host/emu/gpsimd-zygote"), patch_image=capture)
    assert (r.status, r.message) == ("pass", "")

    # Python -> bytes: the argument stream header and both descriptors
    stream = seen["stream"]
    assert struct.unpack_from("<II", stream, 0) == (1, 0)
    assert stream[8:40] == bytes([1]) + bytes(31)       # one TENSOR argument
    in_range = (SBUF_WINDOW_BASE if location == "sbuf" else 0x1_0000_0000)
    _check_descriptor(stream[40:88], name, form, shape, location,
                      lambda a: in_range <= a < in_range + (1 << 32))
    out = seen["out"]
    assert struct.unpack_from("<BBB", out, 0) == (LOCATIONS[location], 2, 12)   # int64 [13]
    assert struct.unpack_from("<4I", out, 8) == (13, 0, 0, 0)

    # C++ -> Python: the runtime's writeback of the same bytes
    vec = {"name": f"echo-{name}-{form}-{location}", "where": "test", "inputs": {"x": x},
           "output": {"dtype": name, "shape": shape, "location": location},
           "expected": {"values": _plain(arr)}, "rtol": 0, "atol": 0}
    r = run_vector("probe", echo_op, V(vec), cores, root=str(proj), zygote=str(proj / "build/host/emu/gpsimd-zygote"), patch_image=capture)
    assert (r.status, r.message, r.mismatches) == ("pass", "", 0)
    _check_descriptor(seen["out"], name, form, shape, location,
                      lambda a: in_range <= a < in_range + (1 << 32))


def test_zero_sized_dimension_is_out_of_line(probe):
    proj, plan, cores = probe
    x = {"kind": "tensor", "dtype": "uint16", "shape": [0, 4], "values": [], "location": "sbuf"}
    vec = {"name": "empty", "where": "test", "inputs": {"x": x},
           "output": {"dtype": "int64", "shape": [13]},
           "expected": {"values": [27, 2, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]}, "rtol": 0, "atol": 0}
    r = run_vector("probe", plan.ops[0], V(vec), cores, root=str(proj), zygote=str(proj / "build/host/emu/gpsimd-zygote"))
    assert (r.status, r.message) == ("pass", "")


def test_every_storage_dtype_and_form_is_covered():
    assert sorted(v[0] for v in DTYPES.values()) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15]
    assert {abi.choose_shape_form(s) for _, s in FORMS.values()} == {0, 1, 2}
    for value, shape in FORMS.values():
        assert abi.choose_shape_form(shape) == value
