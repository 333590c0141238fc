"""Run settings (gpsimd_emu.settings) and memory-limit messages
(gpsimd_emu.budget)."""
import sys

import pytest

from conftest import ROOT

from gpsimd_device.plan import VectorPlan
from gpsimd_emu import budget, settings
from gpsimd_emu.client.values import parse_size
from gpsimd_emu.settings import RunOptions, format_size


@pytest.mark.parametrize("text,value", [("4G", 4 << 30), ("512M", 512 << 20), ("512MiB", 512 << 20),
                                        ("1.5g", 3 << 29), ("1048576", 1 << 20), (" 64 kb ", 64 << 10)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "4Q", "-1G", "0", "G", "9" * 400, "16777216T",
                                  "1048576.5T"])
def test_parse_size_rejects(text):
    """(Past MAX_SIZE: the zygote's int64_t fields wrapped 16777216T to a
    limit of 0 bytes; 400 digits were an OverflowError's traceback.)"""
    with pytest.raises(ValueError):
        parse_size(text)


def test_the_largest_size_and_count_are_taken_exactly():
    from gpsimd_emu.client.values import MAX_COUNT, MAX_SIZE, parse_count
    assert parse_size("1048576T") == MAX_SIZE == 1 << 60
    assert parse_count(str(MAX_COUNT)) == MAX_COUNT
    for text in (str(MAX_COUNT + 1), "18446744073709551617"):
        with pytest.raises(ValueError, match=f"^{text}: must be a whole number >= 0 and at "
                                             f"most {MAX_COUNT}$"):
            parse_count(text)


def test_format_size():
    assert [format_size(n) for n in (4 << 30, 1 << 30, 512 << 20, 3 << 29, 1234567, 100)] == [
        "4 GiB", "1 GiB", "512 MiB", "1.5 GiB", "1.2 MiB", "100 bytes"]


def test_default_parallel_divides_the_cpus_by_the_build_jobs(monkeypatch):
    monkeypatch.setattr(settings.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setenv(settings.JOBS_ENV, "2")
    assert settings.default_parallel() == 4 and RunOptions().processes() == 4
    monkeypatch.setenv(settings.JOBS_ENV, "16")
    assert settings.default_parallel() == 1
    monkeypatch.setenv(settings.JOBS_ENV, "junk")
    assert settings.default_parallel() == 8
    assert RunOptions(parallel=0).processes() == 1 and RunOptions(parallel=3).processes() == 3


def test_one_blas_thread_unless_the_user_chose():
    env = {"PATH": "/bin"}
    assert settings.one_blas_thread(env) is True
    assert env == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                   "MKL_NUM_THREADS": "1"}
    for name in settings.BLAS_THREADS_ENV:
        env = {name: "4"}
        assert settings.one_blas_thread(env) is False and env == {name: "4"}


def test_memory_messages():
    assert budget.too_big("inputs", 6 << 30, 4 << 30) == (
        "the vector's inputs need 6 GiB, more than the 4 GiB memory limit (--memory, EMU_MEMORY)")
    assert budget.too_big("device image", 5 << 30, 4 << 30, "inputs 1 GiB") == (
        "the vector's device image needs 5 GiB (inputs 1 GiB), more than the 4 GiB memory limit "
        "(--memory, EMU_MEMORY)")
    assert budget.exceeded("core 3", 4 << 30) == "core 3 exceeded the 4 GiB memory limit"


def test_declared_input_bytes_reads_shapes_and_npy_headers(tmp_path):
    import numpy as np
    np.save(tmp_path / "a.npy", np.zeros((3, 5), np.float32))
    v = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "float32", "shape": [1000], "random": {"seed": 1}},
        "y": {"kind": "tensor", "dtype": "int64", "npy": "a.npy"},
        "s": {"kind": "scalar", "type": "float", "dtype": "float32", "value": 1.0},
        "z": {"kind": "tensor", "dtype": "no_such_dtype", "shape": [7]}},
        "output": {"dtype": "float32"}, "expected": {"values": [1]}}, "vector")
    assert budget.declared_input_bytes(v, str(tmp_path)) == 4000 + 15 * 8


def test_declared_input_bytes_of_an_npy_is_its_header_s_whatever_follows(tmp_path):
    """A .npy whose header declares 1 GiB and that holds 16 bytes (cut
    short, or of objects numpy cannot map) counts what its header says:
    the vector fails the memory check, before anything reads its data."""
    import io

    import numpy as np
    for descr in ("<f4", "|O"):
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(head, {"descr": descr, "fortran_order": False,
                                                    "shape": (1 << 28,)})
        (tmp_path / "x.npy").write_bytes(head.getvalue() + b"\0" * 16)
        v = VectorPlan.from_json({"name": "v", "inputs": {
            "x": {"kind": "tensor", "dtype": "float32", "npy": "x.npy"}},
            "output": {"dtype": "float32"}, "expected": {"values": [1]}}, "vector")
        assert budget.declared_input_bytes(v, str(tmp_path)) == 1 << 30, descr


def test_the_build_names_the_same_variables():
    """One fact, one place: the emulator's variables are named once, in its
    client (``gpsimd_emu.client.protocol``), and the build and the model
    take those names from there."""
    sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))
    from gpsimd_emu.client import protocol
    from gpsimd_tool import ninja_path, options
    for name in ("JOBS_ENV", "QUIET_ENV", "VERBOSE_ENV"):
        assert getattr(options, name) is getattr(settings, name) is getattr(protocol, name)
    assert ninja_path.JOBS_ENV is protocol.JOBS_ENV and ninja_path.SERVER_ENV is protocol.SERVER_ENV
    assert set(settings.BLAS_THREADS_ENV) <= set(options.PASSED_ENV)
    assert "GPSIMD_EMU" not in (ROOT / "SConstruct").read_text()

def test_the_time_limits_count_every_run_a_vector_makes():
    # (the whole run's and a vector service request's limits count
    # RUNS_PER_VECTOR time limits a vector: as many as runs_for makes at
    # the most, the second call included, or a slow vector is cut short)
    from gpsimd_emu.client.protocol import RUNS_PER_VECTOR
    from gpsimd_emu.runs import runs_for
    most = max(len(runs_for(cores, checks)) for cores in range(1, 9) for checks in (False, True))
    assert RUNS_PER_VECTOR == most == 6


def test_a_random_input_counts_what_making_it_takes():
    """A random input is drawn as 64-bit numbers and checked: the worker
    holds about 20 bytes an element more than it declares while it makes
    it (an int8 input of 500 MB took 8.8 GB with a 512 MiB limit, which
    held only for the declared bytes)."""
    v = VectorPlan.from_json({"name": "v", "inputs": {
        "x": {"kind": "tensor", "dtype": "int8", "shape": [1000], "random": {"seed": 1}},
        "y": {"kind": "tensor", "dtype": "float32", "shape": [10], "random": {"seed": 1}},
        "w": {"kind": "tensor", "dtype": "float32", "shape": [5], "values": [1, 2, 3, 4, 5]}},
        "output": {"dtype": "float32"}, "expected": {"values": [1]}}, "vector")
    assert budget.declared_input_bytes(v) == 1000 + 40 + 20
    assert budget.inputs_too_big(v, ".", 1060 + 1000 * budget.RANDOM_WORK_BYTES) is None
    assert budget.inputs_too_big(v, ".", 1060 + 1000 * budget.RANDOM_WORK_BYTES - 1)
    assert budget.inputs_too_big(v, ".", 1 << 10) == (
        "the vector's inputs need 20.6 KiB (while they are made: a random input is drawn as "
        "64-bit numbers first), more than the 1 KiB memory limit (--memory, EMU_MEMORY)")


def test_random_work_bytes_cover_what_the_worker_takes(tmp_path):
    """RANDOM_WORK_BYTES against the peak resident memory (VmHWM: the
    process's own, where ru_maxrss keeps the peak of the process that
    started it across exec) of a fresh process making the largest case (an
    int8 input from a normal draw)."""
    import subprocess
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "from gpsimd_device.plan import TensorSpec\n"
        "from gpsimd_emu import vectors\n"
        "def hwm():\n"
        "    with open('/proc/self/status') as f:\n"
        "        return next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))\n"
        "n = 8_000_000\n"
        "base = hwm()\n"
        "spec = TensorSpec.from_json('x', {'kind': 'tensor', 'dtype': 'int8', 'shape': [n], "
        "'random': {'distribution': 'normal', 'seed': 1}}, 'x')\n"
        "a = vectors.make_tensor(spec)\n"
        "print((hwm() - base) * 1024 / n)\n")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "runtime_model"),
                          str(ROOT / "site_scons")], capture_output=True, text=True, check=True)
    per_element = float(out.stdout)
    assert 1 + budget.RANDOM_WORK_BYTES / 2 < per_element <= 1 + budget.RANDOM_WORK_BYTES


@pytest.mark.parametrize("text", ["inf", "1e300", "nan", "-1", "0", "86400.5"])
def test_a_time_limit_is_a_finite_number_of_seconds_up_to_a_day(text, capsys):
    """EMU_TIMEOUT=inf (or 1e300) overflowed the supervisor's wait: a
    traceback in the test run, and every reference 'raised OverflowError'."""
    import argparse
    from gpsimd_emu.settings import add_run_options
    parser = argparse.ArgumentParser(prog="run")
    add_run_options(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--timeout", text])
    assert f"argument --timeout: {text}: must be > 0 and at most 86400 seconds" \
        in capsys.readouterr().err
    assert parser.parse_args(["--timeout", "86400"]).timeout == 86400.0
