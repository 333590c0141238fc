"""Byte layout of descriptors, argument streams and binding structs (gpsimd_emu.abi)."""
import ctypes
import functools
import operator
import os
import struct
import subprocess

import pytest

from gpsimd_device import limits
from gpsimd_emu import abi
from gpsimd_emu.abi import Location, ShapeForm
import abi_decode as dec
from c_layout import CC, check_layouts, fields
from gpsimd_device.headers import enum_values
from gpsimd_emu.binding import header_struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(ROOT, "runtime_model", "include")


def test_float32_2x3_at_hbm_exact_bytes():
    d = abi.pack_descriptor(10, [2, 3], 0x1_0000_0040)
    assert len(d) == 48
    assert d[0] == 2            # location HBM
    assert d[1] == 2            # INLINE_SHAPE4D
    assert d[2] == 10           # FP32
    assert d[3:8] == bytes(5)
    assert struct.unpack_from("<4I", d, 8) == (2, 3, 0, 0)
    assert struct.unpack_from("<Q", d, 24) == (0x1_0000_0040,)
    assert d[24:32] == bytes.fromhex("4000000001000000")  # low word, then high word 1
    assert struct.unpack_from("<I", d, 32) == (6,)
    assert d[36:48] == bytes(12)


def test_inline_8d_form():
    shape = [2, 3, 4, 5, 6]
    d = abi.pack_descriptor(7, shape, 0x1_2345_6780)
    assert d[1] == ShapeForm.INLINE_8D == 0
    assert struct.unpack_from("<8H", d, 8) == (2, 3, 4, 5, 6, 0, 0, 0)
    assert struct.unpack_from("<QI", d, 24) == (0x1_2345_6780, 720)
    u = dec.unpack_descriptor(d)
    assert u.dims == (2, 3, 4, 5, 6) and u.shape_form == 0 and u.dtype == 7


def test_out_of_line_form_for_zero_dim_and_large_dims():
    d = abi.pack_descriptor(8, [4, 0], 0x1_0000_0000, shape_addr=0x1_0000_1000)
    assert d[1] == ShapeForm.OUT_OF_LINE == 1
    assert struct.unpack_from("<QII", d, 8) == (0x1_0000_1000, 2, 0)
    assert struct.unpack_from("<I", d, 32) == (0,)
    u = dec.unpack_descriptor(d)
    assert u.dims is None and (u.shape_addr, u.shape_ndim) == (0x1_0000_1000, 2)
    assert dec.pack_dims([4, 0]) == struct.pack("<2q", 4, 0)
    assert dec.unpack_dims(dec.pack_dims([70000, 2, 1, 1, 1]), 5) == (70000, 2, 1, 1, 1)


@pytest.mark.parametrize("shape,form", [
    ([], ShapeForm.INLINE_4D), ([7], ShapeForm.INLINE_4D), ([1, 2, 3, 4], ShapeForm.INLINE_4D),
    ([70000, 70000], ShapeForm.INLINE_4D), ([1, 2, 3, 4, 5], ShapeForm.INLINE_8D),
    ([65535] * 8, ShapeForm.INLINE_8D), ([65536, 1, 1, 1, 1], ShapeForm.OUT_OF_LINE),
    ([0], ShapeForm.OUT_OF_LINE), ([3, 0, 2], ShapeForm.OUT_OF_LINE),
])
def test_choose_shape_form(shape, form):
    assert abi.choose_shape_form(shape) == form


def test_zero_d_descriptor_is_all_zero_slots_one_element():
    d = abi.pack_descriptor(12, [], 0x1_0000_0080)
    assert d[1] == 2 and d[8:24] == bytes(16)
    u = dec.unpack_descriptor(d)
    assert u.dims == () and u.num_elem == 1


def test_forced_forms_and_their_limits():
    d = abi.pack_descriptor(10, [2, 3], 0x1000, form=ShapeForm.INLINE_8D)
    assert struct.unpack_from("<8H", d, 8) == (2, 3, 0, 0, 0, 0, 0, 0)
    d = abi.pack_descriptor(10, [2, 3], 0x1000, form=ShapeForm.OUT_OF_LINE, shape_addr=0x40)
    assert struct.unpack_from("<QI", d, 8) == (0x40, 2)
    with pytest.raises(ValueError, match="INLINE_4D"):
        abi.pack_descriptor(10, [1, 2, 3, 4, 5], 0, form=ShapeForm.INLINE_4D)
    with pytest.raises(ValueError, match="INLINE_8D"):
        abi.pack_descriptor(10, [65536], 0, form=ShapeForm.INLINE_8D)
    with pytest.raises(ValueError, match="INLINE_4D"):
        abi.pack_descriptor(10, [0], 0, form=ShapeForm.INLINE_4D)
    with pytest.raises(ValueError, match="shape_addr"):
        abi.pack_descriptor(10, [0], 0)
    with pytest.raises(ValueError, match="rank 9"):
        abi.pack_descriptor(10, [1] * 9, 0)


def test_sbuf_arm_offsets():
    d = abi.pack_descriptor(6, [128, 4], 0x1234, location=Location.SBUF,
                            num_partitions=128, num_elem_per_block=4)
    assert d[0] == 1
    assert struct.unpack_from("<I", d, 24) == (0x1234,)
    assert struct.unpack_from("<I", d, 28) == (512,)
    assert d[32] == 128 and d[33:36] == bytes(3)
    assert struct.unpack_from("<I", d, 36) == (4,)
    u = dec.unpack_descriptor(d)
    assert (u.location, u.addr, u.num_elem, u.num_partitions, u.num_elem_per_block) == (1, 0x1234, 512, 128, 4)
    with pytest.raises(ValueError, match="u32"):
        abi.pack_descriptor(6, [1], 1 << 32, location=Location.SBUF)


def test_argument_stream_layout():
    d0 = abi.pack_descriptor(10, [4], 0x1_0000_0000)
    d1 = abi.pack_descriptor(8, [], 0x1_0000_0040)
    s = abi.pack_arg_stream([d0, d1])
    assert len(s) == 40 + 2 * 48
    assert struct.unpack_from("<II", s, 0) == (2, 0)
    assert s[8:10] == bytes([1, 1]) and s[10:40] == bytes(30)
    assert s[40:88] == d0 and s[88:136] == d1
    types, descs = dec.unpack_arg_stream(s)
    assert types == [1, 1] and descs[1].addr == 0x1_0000_0040 and descs[1].dtype == 8
    assert abi.pack_arg_stream([]) == struct.pack("<II", 0, 0) + bytes(32)
    with pytest.raises(ValueError, match="33 arguments"):
        abi.pack_arg_stream([d0] * 33)


def test_struct_sizes_match_abi_h_numbers():
    assert ctypes.sizeof(abi.GpsimdRegion) == 32
    assert ctypes.sizeof(abi.GpsimdCoreReport) == 3136
    assert ctypes.sizeof(abi.GpsimdCoreBinding) == 2144   # ABI 2: + read map, item size
    assert ctypes.sizeof(abi.GpsimdLspInfo) == 56
    assert abi.GpsimdCoreBinding.report_host.offset == 2112


def test_scratch_origins_and_lsp_names():
    assert abi.scratch_origin(0) == 0x84000000
    assert abi.scratch_origin(7) == 0x84000000 + 7 * 0x200000
    assert abi.lsp_name(3) == "lsp_fll_load_cpu3"
    assert abi.lsp_name(None) == "lsp_fll_load_cpu_single"


#: Every structure of abi.h the model reads (``binding.header_struct``), by its C name.
_STRUCTS = {t: header_struct("abi.h", t) for t in ("NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR",
                                                  "gpsimd_arg_stream_header")}
_STRUCTS.update({"gpsimd_region": abi.GpsimdRegion, "gpsimd_core_report": abi.GpsimdCoreReport,
                 "gpsimd_core_binding": abi.GpsimdCoreBinding, "gpsimd_lsp_info": abi.GpsimdLspInfo})
#: abi.h's enums, read by abi.py: (enum, prefix of its members).
_ENUMS = [("NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION", "NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_"),
          ("NEURON_ISA_TPB_CUSTOM_OP_TENSOR_SHAPE_TYPE", "NEURON_ISA_TPB_CUSTOM_OP_"),
          ("NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE", "NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_"),
          ("gpsimd_status", "GPSIMD_STATUS_")]


@pytest.mark.slow
@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_python_and_c_agree_on_every_size_offset_and_enum_value(tmp_path):
    values = {"GPSIMD_ARG_STREAM_ARGS_OFFSET": abi.ARG_STREAM_ARGS_OFFSET,
              "GPSIMD_MAX_ARGS": abi.MAX_ARGS, "GPSIMD_MAX_REGIONS": limits.ABI["MAX_REGIONS"]}
    values.update({prefix + name: value for enum, prefix in _ENUMS
                   for name, value in enum_values("abi.h", enum, prefix).items()})
    checked = check_layouts(tmp_path, ["gpsimd_host/abi.h"], _STRUCTS, values)
    # (the descriptor's and the stream header's nested fields as well)
    assert list(checked.values()) == [8 + 6 + 10, 3, 5, 12, 19, 5]
    # The descriptor (the device ABI (gpsimd_host/abi.h)).
    t = _STRUCTS["NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR"]
    assert ctypes.sizeof(t) == abi.DESCRIPTOR_SIZE == 48
    offsets = {path: offset for path, offset, _ in fields(t)}
    spec = {"framework_shape": 8, "storage": 24, "reserved1": 40, "storage.hbm.num_elem": 32,
            "storage.tpb.num_elem": 28, "storage.tpb.num_partitions": 32,
            "storage.tpb.num_elem_per_block": 36, "framework_shape.out_of_line.ndim": 16}
    assert {p: offsets[p] for p in spec} == spec
    assert ctypes.sizeof(_STRUCTS["gpsimd_arg_stream_header"]) == abi.ARG_STREAM_ARGS_OFFSET
    assert (abi.Location.HBM, abi.Location.SBUF, abi.ShapeForm.INLINE_4D,
            abi.ShapeForm.OUT_OF_LINE, abi.ShapeForm.INLINE_8D, abi.ArgType.TENSOR,
            abi.STATUS_OK) == (values["NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM"],
                               values["NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_SBUF"],
                               values["NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE4D"],
                               values["NEURON_ISA_TPB_CUSTOM_OP_OUT_OF_LINE_SHAPE"],
                               values["NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE8D"],
                               values["NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR"],
                               values["GPSIMD_STATUS_OK"])


def test_constants_match_abi_h_text():
    text = open(os.path.join(INCLUDE, "gpsimd_host", "abi.h")).read()
    import re
    defines = dict(re.findall(r"#define\s+(GPSIMD_\w+)\s+(0x[0-9A-Fa-f]+|\d+)u", text))
    expect = {
        "GPSIMD_HOST_ABI_VERSION": abi.ABI_VERSION, "GPSIMD_MAX_ARGS": abi.MAX_ARGS,
        "GPSIMD_ARG_STREAM_ARGS_OFFSET": abi.ARG_STREAM_ARGS_OFFSET,
        "GPSIMD_DATARAM_BASE": limits.DATARAM_BASE, "GPSIMD_DATARAM_SIZE": abi.DATARAM_SIZE,
        "GPSIMD_TCM_POOL_SIZE": abi.TCM_POOL_SIZE,
        "GPSIMD_STREAM_TCM_BYTES": limits.STREAM_TCM_BYTES,
        "GPSIMD_SCRATCH_BASE": abi.SCRATCH_BASE, "GPSIMD_SCRATCH_CORE_SIZE": abi.SCRATCH_CORE_SIZE,
        "GPSIMD_SCRATCH_SINGLE_SIZE": abi.SCRATCH_SINGLE_SIZE,
        "GPSIMD_PRINTF_CAPACITY": abi.PRINTF_CAPACITY, "GPSIMD_NUM_CORES": abi.NUM_CORES,
        "GPSIMD_DEFAULT_STACK_SIZE": limits.DEFAULT_STACK_SIZE, "GPSIMD_LSP_SINGLE": abi.LSP_SINGLE,
        "GPSIMD_REGION_READONLY": abi.REGION_READONLY, "GPSIMD_CHECK_ALL": abi.CHECK_ALL,
        "GPSIMD_REPORT_COPY_PATH": abi.REPORT_COPY_PATH,
    }
    # (the ones the model does not use, read as gpsimd_device.limits reads every define)
    expect.update({f"GPSIMD_{name}": limits.ABI[name] for name in (
        "MAX_REGIONS", "MESSAGE_CAPACITY", "WARNINGS_CAPACITY", "REPORT_GET_DST", "REPORT_TCM_NULL",
        "CHECK_POISON_EMPTY", "CHECK_MULTICORE", "CHECK_COHERENCE", "CHECK_ARG_DTYPE")})
    for name, value in expect.items():
        assert int(defines[name], 0) == value, name
    # GPSIMD_CHECK_ALL is every GPSIMD_CHECK_* bit, each bit one check's
    checks = [v for k, v in limits.ABI.items() if k.startswith("CHECK_") and k != "CHECK_ALL"]
    assert abi.CHECK_ALL == sum(checks) == functools.reduce(operator.or_, checks)
    assert all(v & (v - 1) == 0 for v in checks)


# ---- properties -----------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from gpsimd_emu import dtypes as dtypes_mod  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(shape=st.lists(st.integers(0, 70000), max_size=8),
       isa=st.sampled_from([d.isa for d in dtypes_mod.DTYPES.values()]),
       addr=st.integers(0, 2 ** 64 - 1))
def test_descriptor_round_trip(shape, isa, addr):
    form = abi.choose_shape_form(shape)
    n = 1
    for d in shape:
        n *= d
    if n > 0xFFFFFFFF:
        return
    d = abi.pack_descriptor(isa, shape, addr, shape_addr=0x1_0000_0000)
    u = dec.unpack_descriptor(d)
    assert (u.location, u.shape_form, u.dtype, u.addr, u.num_elem) == (2, form, isa, addr, n)
    if form == ShapeForm.OUT_OF_LINE:
        assert u.dims is None and u.shape_ndim == len(shape) and u.shape_addr == 0x1_0000_0000
        assert 0 in shape or len(shape) > 4
    else:
        assert u.dims == tuple(shape)


def test_model_never_imports_the_build_side():
    code = ("import sys, gpsimd_emu, gpsimd_emu.cli\n"
            "from gpsimd_emu import abi, compare, dtypes, loader, memory, merge, session, vectors\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('SCons', 'gpsimd_build', 'site_tools', 'yaml', 'jsonschema')]\n"
            "print(bad)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime_model"))
    out = subprocess.run([__import__("sys").executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[]"
