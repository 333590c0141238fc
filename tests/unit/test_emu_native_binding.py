"""The native leader's binding (``gpsimd_emu.native``): the layout the C
library reports is this package's, a library built for another layout or
one that does not load is refused with a message, and a request that does
not fit the structure is refused before any fork. (That its vectors give
the results and records of the Python leader is
tests/integration/test_emu_native.py.)"""
import ctypes
import os
import subprocess

import pytest

import gpsimd_emu
from gpsimd_device import leader as native_leader
from gpsimd_device.headers import INCLUDE_DIR
from gpsimd_emu import abi, control, native

pytestmark = pytest.mark.slow      # (each test compiles)

EMULATOR_DIR = os.path.dirname(os.path.abspath(gpsimd_emu.__file__))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("leader") / native_leader.LIBRARY_NAME)
    cmd = native_leader.compile_command("g++", native_leader.source_paths(EMULATOR_DIR),
                                        INCLUDE_DIR, path)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""            # -Wall: no warning
    return path


def test_the_library_reports_this_layout(library):
    leader = native.NativeLeader(library)
    got = (ctypes.c_int64 * 64)()
    n = leader._lib.gl_layout(got, 64)
    values = list(got[:n])
    assert values == native.expected_layout()
    # the facts it encodes, one by one, against where they are defined
    assert values[0] == native.VERSION
    assert values[1] == ctypes.sizeof(native.Request)
    assert values[8] == ctypes.sizeof(abi.GpsimdCoreBinding)
    assert values[9:22] == [4096, 28, 40, 64, 1024, 1088, 80, 40, 1408, 32, 2432, 16, 64]
    assert (values[9], values[14], values[17], values[19]) == (
        control.SIZE, control._PASSES, control._SLOTS, control._JOBS)
    assert values[22:26] == [control.MAX_PASSES, control.MAX_CORES, 70, -2]
    # the native zygote's message: struct gl_zygote_run (leader.h)
    assert values[27:] == [int.from_bytes(b"GLZYRUN1", "little"), 256,
                           ctypes.sizeof(native.ZygoteRun), 32, 32 + 256]
    assert leader.runs_as_zygote


def test_a_run_message_is_the_worker_s_part_of_the_request():
    req = {"size": 1 << 20, "ncores": 8, "runs": [
        {"index": 0, "second": False, "ordered": False, "poison": 0xA5},
        {"index": 3, "second": True, "ordered": True, "poison": 0x5A}],
        "parallel": 2, "spread_now": True, "spread_after": 0.25, "timeout": 9.5,
        "binding_size": ctypes.sizeof(abi.GpsimdCoreBinding), "bindings_at": 8192,
        "args_at": 12288, "arg_len": 96, "page": 4096, "desc_len": 48,
        "scan": [65536, 4000, 4], "op": "spmd_relu", "memory": 1 << 30,
        "image_total": 3 << 20, "prefilled": 1 << 20}
    data = native.run_message(req)
    assert len(data) == ctypes.sizeof(native.ZygoteRun)
    m = native.read_run(data)
    assert (m.magic, m.memory, m.image_total, m.prefilled, m.op) == (
        native.RUN_MAGIC, 1 << 30, 3 << 20, 1 << 20, b"spmd_relu")
    r = m.request
    assert (r.version, r.image_fd, r.size, r.ncores, r.nruns, r.parallel, r.spread_now,
            r.spread_after, r.timeout) == (native.VERSION, -1, 1 << 20, 8, 2, 2, 1, 0.25, 9.5)
    assert (r.bindings_at, r.args_at, r.arg_len, r.page, r.desc_len) == (8192, 12288, 96,
                                                                        4096, 48)
    assert (r.scan_at, r.scan_nbytes, r.scan_itemsize) == (65536, 4000, 4)
    assert [(x.index, x.second, x.ordered, x.poison) for x in r.runs[:2]] == [
        (0, 0, 0, 0xA5), (3, 1, 1, 0x5A)]
    # the zygote's own part is left to it
    assert (r.data_limit, r.zygote, r.oom_first, r.join_path) == (0, 0, 0, b"")
    assert native.read_run(data[:-1]) is None and native.read_run(b"{}") is None
    with pytest.raises(ValueError):
        native.run_message(dict(req, op="x" * 256))


def test_the_dynamic_loader_is_the_interpreter_s_program_interpreter(tmp_path):
    import sys
    loader = native.dynamic_loader(sys.executable)
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if "/" in line}
    assert loader is not None and os.path.realpath(loader) in {os.path.realpath(m)
                                                               for m in mapped}
    text = tmp_path / "text"
    text.write_text("not an ELF file")
    assert native.dynamic_loader(str(text)) is None
    assert native.dynamic_loader(str(tmp_path / "none")) is None


def test_a_library_of_another_layout_is_refused(tmp_path):
    src = tmp_path / "other.c"
    src.write_text("#include <stdint.h>\n"
                   "long gl_fork_leader(const void *r) { (void)r; return -1; }\n"
                   "int gl_layout(int64_t *out, int n) { if (n > 1) { out[0] = %d; out[1] = 8; }"
                   " return 2; }\n" % native.VERSION)
    lib = tmp_path / "other.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    with pytest.raises(native.NativeError) as err:
        native.NativeLeader(str(lib))
    assert str(err.value) == (f"{lib}: the native leader was built for another layout "
                              f"(entry 1 of gl_layout differs); rebuild it")


def test_a_missing_library_is_refused(tmp_path):
    with pytest.raises(native.NativeError) as err:
        native.NativeLeader(str(tmp_path / "none.so"))
    assert str(err.value) == (f"{tmp_path / 'none.so'}: cannot read the native leader: "
                              "No such file or directory")


@pytest.mark.parametrize("keep", [40, 4096, -1])
def test_a_truncated_library_is_refused_before_it_is_mapped(library, tmp_path, keep):
    # (dlopen would map it and fault with SIGBUS on the first page past the
    # end: in the zygote, that reads as "the core objects could not be loaded")
    data = open(library, "rb").read()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:keep])
    with pytest.raises(native.NativeError) as err:
        native.NativeLeader(str(cut))
    n = len(data[:keep])
    assert str(err.value).startswith(f"{cut}: not a usable native leader: truncated: {n} bytes")


def test_a_request_that_does_not_fit_is_refused_before_any_fork(library):
    leader = native.NativeLeader(library)
    runs = [{"index": i, "second": False, "ordered": False, "poison": 0} for i in range(5)]
    req = {"size": 4096, "ncores": 8, "runs": runs, "timeout": 1.0, "binding_size": 0,
           "bindings_at": 0, "args_at": 0, "arg_len": 0, "page": 4096, "desc_len": 0}
    with pytest.raises(ValueError, match="5 runs of 8 cores do not fit the native leader"):
        native.request_struct(req)
    # and the C side checks what it is given too: a bad version forks nothing
    r = native.Request(version=99, nruns=1, ncores=1)
    assert leader._fork(ctypes.byref(r)) == -22          # -EINVAL
