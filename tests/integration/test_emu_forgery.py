"""Kernels that reach into the model (a hostile kernel runs in the model's
own processes): each is caught by the worker's own checks. A kernel that
forges "the second run was skipped" in the control block (gz_control of
gpsimd_host/zygote.h), or writes over the leader's state so that it
skips it, fails
as a corrupt record (the worker accepts no skipped run before a fault);
one that cancels its run's timer fails as timed out (the
worker compares the launches' times with the limit); one that rewrites a
run's core order fails (the leader checks every index it reads); a
static initialiser that ignores SIGCHLD in the zygote changes nothing."""
import json
import os
import subprocess

import pytest

from conftest import copy_built, run_scons

from gpsimd_device.plan import TestPlan
from gpsimd_emu.session import LibrarySession, RunOptions

ZYGOTE = "build/host/emu/gpsimd-zygote"

# the kernels find the control block as tests/native/fake_core.cpp does
with open(os.path.join(os.path.dirname(__file__), "..", "native", "control_block_finder.h")) as f:
    FINDER = f.read().replace("#pragma once\n", "")

COMMON = r"""
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include "gpsimd_host/zygote.h"
#include <unistd.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
""" + FINDER + r"""
namespace {
// out = 2 x, plus 1 unless a never-written tcm_malloc word holds run 0's
// TCM poison (0x3C): right in the first run, wrong in the second
torch::Tensor sneaky(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = x.numel();
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    uint32_t* bias = (uint32_t*)torch::neuron::tcm_malloc(16);
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    const float add = bias[0] == 0x3C3C3C3Cu ? 0.0f : 1.0f;
    for (size_t i = 0; i < n; i++) buf[i] = 2.0f * buf[i] + add;
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(bias);
    torch::neuron::tcm_free(buf);
    return out;
}
// the control block: the image's first page, found from the output
gz_control* control_block(const torch::Tensor& out) {
    return control_block_at((uintptr_t)neuron_translate(out.q7_data_ptr().ctx,
                                                        out.q7_data_ptr().hbm_addr));
}
uint64_t now_ns() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ull + t.tv_nsec;
}
// the program's load address (the first object dl_iterate_phdr names)
int program_of(struct dl_phdr_info* info, size_t, void* data) {
    *(uintptr_t*)data = info->dlpi_addr;
    return 1;
}
}  // namespace
"""

FORGERY = COMMON + r"""
// run 0, then: "run 0 done, run 1 skipped, the leader done", and _exit(0)
torch::Tensor forge_skip(const torch::Tensor& x) {
    torch::Tensor out = sneaky(x);
    gz_control* cb = control_block(out);
    mprotect(cb, 4096, PROT_READ | PROT_WRITE);
    const uint64_t t = now_ns();
    cb->slots[0].state = GPSIMD_ZY_SLOT_DONE;              // slot (0, 0): done at t
    cb->slots[0].t_end = t;
    cb->passes[0].state = GPSIMD_ZY_PASS_DONE;             // pass 0: done at t
    cb->passes[0].t_end = t;
    cb->passes[1].state = GPSIMD_ZY_PASS_SKIPPED;          // pass 1: skipped
    cb->jobs[0].state = GPSIMD_ZY_JOB_EXITED;              // job 0: exited
    cb->leader_done = 1;
    _exit(0);
}
// the leader's stop_after (STOP_AFTER: its offset in the program) set to run 0
torch::Tensor scribble_stop(const torch::Tensor& x) {
    uintptr_t base = 0;
    dl_iterate_phdr(program_of, &base);
    *(int*)(base + STOP_AFTER) = 0;
    return sneaky(x);
}
// run 1's first core made 200
torch::Tensor forge_order(const torch::Tensor& x) {
    torch::Tensor out = sneaky(x);
    gz_control* cb = control_block(out);
    mprotect(cb, 4096, PROT_READ | PROT_WRITE);
    cb->passes[1].order[0] = 200;
    return out;
}
// cancels its run's timer, then takes 1.5 s (the limit: 1 s)
torch::Tensor own_timer(const torch::Tensor& x) {
    struct itimerval none = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &none, nullptr);
    const uint64_t end = now_ns() + 1500000000ull;
    while (now_ns() < end) {}
    return sneaky(x);
}
"""

CTOR = r"""
#include <signal.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
static int ignored = (signal(SIGCHLD, SIG_IGN), 0);
torch::Tensor plain(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = x.numel();
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    for (size_t i = 0; i < n; i++) buf[i] = 2.0f * buf[i];
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(buf);
    return out;
}
"""

CORRUPT = ("the vector's processes left no valid record of the run (run 1 was skipped though "
           "every run before it ended without a fault): a kernel wrote over the model's memory")


@pytest.fixture(scope="module")
def forgery(built_project, tmp_path_factory):
    """(project, {library: TestPlan}) with the forgery and ctor_sigchld libraries
    built, in this module's copy of the shared build."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("forgery") / "p")
    out = {}
    # the offset of the leader's stop_after (a local symbol: nm)
    assert run_scons(proj, ZYGOTE).returncode == 0
    nm = subprocess.run(["nm", str(proj / ZYGOTE)], capture_output=True, text=True, check=True)
    (offset,) = [int(line.split()[0], 16) for line in nm.stdout.splitlines()
                 if line.split()[-1] == "stop_after"]
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "forgery.cpp").write_text(f"#define STOP_AFTER {offset:#x}\n" + FORGERY)
    (proj / "probe" / "ctor.cpp").write_text(CTOR)
    (proj / "probe" / "double_ref.py").write_text(
        "import numpy as np\ndef double(x):\n    return (x * np.float32(2)).astype(np.float32)\n")
    vec = {"name": "n10", "inputs": {"x": {"dtype": "float32", "shape": [10],
                                           "random": {"seed": 3, "distribution": "normal"}}},
           "expected": {"reference": "probe/double_ref.py:double"}}
    ops = ("forge_skip", "scribble_stop", "forge_order", "own_timer")
    manifest = {"version": 1, "libraries": [
        {"name": "forgery", "sources": ["probe/forgery.cpp"],
         "ops": [{"schema": f"t::{op}(Tensor x) -> Tensor", "vectors": [vec]} for op in ops]},
        {"name": "ctor_sigchld", "sources": ["probe/ctor.cpp"],
         "ops": [{"schema": "t::plain(Tensor x) -> Tensor", "vectors": [vec]}]}]}
    (proj / "forgery.yaml").write_text(json.dumps(manifest))
    for lib in ("forgery", "ctor_sigchld"):
        proc = run_scons(proj, "MANIFEST=forgery.yaml", f"build/host/{lib}/testplan.json",
                         f"build/host/{lib}/{lib}.packed.so", ZYGOTE)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out[lib] = TestPlan.load(str(proj / f"build/host/{lib}/testplan.json"))
    return proj, out


def _results(forgery, lib):
    proj, plans = forgery
    options = RunOptions(timeout=1, zygote=str(proj / ZYGOTE))
    with LibrarySession(plans[lib], root=str(proj), options=options) as s:
        return {v.op: (v.status, v.message) for v in s.run_all().vectors}


def test_a_forged_skip_and_a_cancelled_timer_fail(forgery):
    got = _results(forgery, "forgery")
    assert got["forge_skip"] == ("fail", CORRUPT)
    assert got["own_timer"] == ("fail", "timed out after 1 s (core 0 was running)")
    # the leader's state written over: it skips the second run, which the
    # worker does not accept
    assert got["scribble_stop"] == ("fail", CORRUPT)
    # the order byte: the leader does not index its tables with it (it
    # records a model error; the worker rejects the record by the byte itself)
    assert got["forge_order"] == (
        "fail", "the vector's processes left no valid record of the run (run 1: its pass "
                "record is out of range): a kernel wrote over the model's memory")


def test_a_static_initialiser_that_ignores_sigchld_changes_nothing(forgery, capfd):
    assert _results(forgery, "ctor_sigchld") == {"plain": ("pass", "")}
    assert "Traceback" not in capfd.readouterr().err
