"""Kernels whose result depends on memory nobody wrote, where the value
that memory holds in the first run happens to give the right answer
(float32's first-run poison, 0xA5A5A5A5, is -2.9e-16, within any
tolerance of zero): each fails, because every vector's cores run twice
with different poison and an element written in either run whose value
changes between them depends on never-written memory. Neither the
kernel's report flags, which a kernel can write, nor the first run's
output decide whether the second run is made.

- a single-core kernel adds into its output without initialising it
  (through an accessor, which the runtime does not follow);
- a multicore kernel does the same through a raw pointer, each core on
  its own slice (the runs against one zero-filled output agree with each
  other: no race, but the output itself is the source);
- whether a kernel writes an element depends on a never-written TCM flag
  (the element is written in one run only);
- a kernel clears the report flags that say it used TCM;
- a kernel writes past its output, or over its input, only when a stack
  variable nobody set holds the second run's poison (every run's guard
  zones and inputs are checked, not the first run's alone);
- a kernel reads one element past its input (the bytes after each input
  hold the run's poison: a fresh arena's zeros could be the padding its
  reference expects), or writes one there;
- kernels that read back what they wrote themselves pass.
"""
import json

import pytest

from conftest import copy_built, run_scons

from gpsimd_device.plan import TestPlan
from gpsimd_emu.session import LibrarySession, RunOptions

ZYGOTE = "build/host/emu/gpsimd-zygote"

SINGLE = r"""
#include <stdint.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
#include "runtime.h"

// out += 2x into an output nobody initialised
torch::Tensor add_into(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    auto xa = x.accessor<float, 1>();
    auto oa = out.accessor<float, 1>();
    for (int64_t i = 0; i < x.numel(); i++) oa[i] = oa[i] + 2.0f * xa[i];
    return out;
}

// relu, but the negatives are zeroed only when a TCM flag nobody set says so
torch::Tensor relu_flag(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = size_t(x.numel());
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    unsigned char* flag = (unsigned char*)torch::neuron::tcm_malloc(16);
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] > 0.0f) out.tcm_accessor().tcm_to_tensor<float>(&buf[i], i, 1);
        else if (flag[0] & 0x80) { float z = 0.0f; out.tcm_accessor().tcm_to_tensor<float>(&z, i, 1); }
    }
    torch::neuron::tcm_free(flag);
    torch::neuron::tcm_free(buf);
    return out;
}

// 2x plus a never-written TCM word unless it holds run 0's TCM poison; then
// the report flags that say TCM was used are cleared
torch::Tensor hide_tcm(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const size_t n = x.numel();
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * n);
    uint32_t* bias = (uint32_t*)torch::neuron::tcm_malloc(16);
    x.tcm_accessor().tensor_to_tcm<float>(buf, 0, n);
    const float add = bias[0] == 0x3C3C3C3Cu ? 0.0f : (float)bias[0];
    for (size_t i = 0; i < n; i++) buf[i] = 2.0f * buf[i] + add;
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, n);
    torch::neuron::tcm_free(bias);
    torch::neuron::tcm_free(buf);
    gpsimd_rt::core().report->flags &= ~(uint32_t)(GPSIMD_REPORT_TCM_USED
        | GPSIMD_REPORT_OUTPUT_READ | GPSIMD_REPORT_EMPTY_USED);
    return out;
}

namespace {
__attribute__((noinline, noipa)) void maybe_set(int* v, bool set) { if (set) *v = 0; }
float* raw(const torch::Tensor& t) {
    return (float*)neuron_translate(t.q7_data_ptr().ctx, t.q7_data_ptr().hbm_addr);
}
}  // namespace

// 2x, and 4 elements past the output when a stack int nobody set is
// negative: false with run 0's poison (0x3C3C3C3C), true with run 1's
torch::Tensor past_end_sometimes(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    int tail;
    maybe_set(&tail, false);
    const int64_t n = x.numel();
    float* o = raw(out);
    const float* xi = raw(x);
    for (int64_t i = 0; i < n; i++) o[i] = 2.0f * xi[i];
    if (tail < 0)
        for (int64_t i = n; i < n + 4; i++) o[i] = 123.0f;
    return out;
}

// the same, but it zeroes its input
torch::Tensor input_sometimes(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    int tail;
    maybe_set(&tail, false);
    const int64_t n = x.numel();
    float* o = raw(out);
    float* xi = raw(x);
    for (int64_t i = 0; i < n; i++) o[i] = 2.0f * xi[i];
    if (tail < 0)
        for (int64_t i = 0; i < n; i++) xi[i] = 0.0f;
    return out;
}

// a 3-point mean padded with zeros that reads x[n], one past the input
torch::Tensor smooth3(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const int64_t n = x.numel();
    const float* p = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < n; i++)
        o[i] = ((i > 0 ? p[i - 1] : 0.0f) + p[i] + p[i + 1]) / 3.0f;
    return out;
}

// x plus, as zero padding, x[i + 32]: 64 bytes and more past the input,
// beyond the poisoned bytes that follow it, on the rest of the arena
torch::Tensor far_pad(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const int64_t n = x.numel();
    const float* p = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < n; i++) o[i] = p[i] + p[i + 32];
    return out;
}

// writes one element past its input
torch::Tensor input_past_end(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const int64_t n = x.numel();
    float* xi = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < n; i++) o[i] = 2.0f * xi[i];
    xi[n] = 1.0f;
    return out;
}

// writes x, then doubles what it wrote, reading it back through the accessor
torch::Tensor read_back(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    auto xa = x.accessor<float, 1>();
    auto oa = out.accessor<float, 1>();
    for (int64_t i = 0; i < x.numel(); i++) oa[i] = xa[i];
    for (int64_t i = 0; i < x.numel(); i++) oa[i] = 2.0f * oa[i];
    return out;
}
"""

MULTI = r"""
#include <stdint.h>
#include <torch/torch.h>
#include <custom_op.h>
#include <neuron/neuron-utils.hpp>

namespace {
// each core's slice of n elements, and its output through a raw pointer
void slice(size_t n, size_t* b, size_t* c) {
    const size_t id = get_cpu_id(), cnt = get_cpu_count(), base = n / cnt, rem = n % cnt;
    *b = id * base + (id < rem ? id : rem);
    *c = base + (id < rem ? 1 : 0);
}
float* raw(const torch::Tensor& out) {
    return (float*)neuron_translate(out.q7_data_ptr().ctx, out.q7_data_ptr().hbm_addr);
}
}  // namespace

// each core adds 2x into its own slice, never initialised
torch::Tensor mc_add_into(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    size_t b, c;
    slice(x.numel(), &b, &c);
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * (c ? c : 1));
    x.tcm_accessor().tensor_to_tcm<float>(buf, b, c);
    float* o = raw(out);
    for (size_t i = 0; i < c; i++) o[b + i] += 2.0f * buf[i];
    torch::neuron::tcm_free(buf);
    return out;
}

// each core writes its slice, then doubles it in place through the pointer
torch::Tensor mc_read_back(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    size_t b, c;
    slice(x.numel(), &b, &c);
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * (c ? c : 1));
    x.tcm_accessor().tensor_to_tcm<float>(buf, b, c);
    float* o = raw(out);
    for (size_t i = 0; i < c; i++) o[b + i] = buf[i];
    for (size_t i = 0; i < c; i++) o[b + i] *= 2.0f;
    torch::neuron::tcm_free(buf);
    return out;
}
"""

REFERENCE = """\
import numpy as np
def double(x):
    return (x * np.float32(2)).astype(np.float32)
def relu(x):
    return np.maximum(x, np.float32(0)).astype(np.float32)
def same(x):
    return x.astype(np.float32)
def smooth3(x):
    p = np.concatenate(([0], x, [0])).astype(np.float32)
    return ((p[:-2] + p[1:-1] + p[2:]) / np.float32(3)).astype(np.float32)
"""

#: 16 elements: positives and negatives alternate in pairs
X = [1.5, 2.0, -1.0, -3.0] * 4

NEVER_WRITTEN = ("depend on never-written memory (their values change with the poison of "
                 "local variables, malloc / new blocks and output elements the kernel read "
                 "before writing them through a standard or stream accessor or a raw pointer)")


def _vector(reference, location="hbm"):
    return {"name": "v", "inputs": {"x": {"dtype": "float32", "shape": [len(X)], "values": X,
                                          "location": location}},
            "expected": {"reference": f"probe/uninit_ref.py:{reference}"}}


@pytest.fixture(scope="module")
def results(built_project, tmp_path_factory):
    """{library: {op: (status, message)}} of both libraries, in this
    module's copy of the shared build."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("uninit") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "single.cpp").write_text(SINGLE)
    (proj / "probe" / "multi.cpp").write_text(MULTI)
    (proj / "probe" / "uninit_ref.py").write_text(REFERENCE)
    single = {"add_into": "double", "relu_flag": "relu", "hide_tcm": "double",
              "read_back": "double", "past_end_sometimes": "double",
              "input_sometimes": "double", "smooth3": "smooth3", "far_pad": "same",
              "input_past_end": "double"}
    multi = {"mc_add_into": "double", "mc_read_back": "double"}
    manifest = {"version": 1, "libraries": [
        {"name": "uninit", "sources": ["probe/single.cpp"], "includes": ["runtime_model/src"],
         "ops": [{"schema": f"t::{op}(Tensor x) -> Tensor",
                  "vectors": [_vector(ref)] + ([_vector(ref, "sbuf") | {"name": "sbuf"}]
                                               if op in ("smooth3", "far_pad") else [])}
                 for op, ref in single.items()]},
        {"name": "uninit_mc", "multicore": True, "sources": ["probe/multi.cpp"],
         "ops": [{"schema": f"t::{op}(Tensor x) -> Tensor", "vectors": [_vector(ref)]}
                 for op, ref in multi.items()]}]}
    (proj / "uninit.yaml").write_text(json.dumps(manifest))
    out = {}
    for lib in ("uninit", "uninit_mc"):
        proc = run_scons(proj, "MANIFEST=uninit.yaml", f"build/host/{lib}/testplan.json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        plan = TestPlan.load(str(proj / f"build/host/{lib}/testplan.json"))
        proc = run_scons(proj, "MANIFEST=uninit.yaml", ZYGOTE, *(c.object for c in plan.cores))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        options = RunOptions(timeout=5, zygote=str(proj / ZYGOTE))
        with LibrarySession(plan, root=str(proj), options=options) as s:
            out[lib] = {v.op if v.vector == "v" else f"{v.op}[{v.vector}]": (v.status, v.message)
                        for v in s.run_all().vectors}
    return out


def test_a_single_core_kernel_adding_into_its_unwritten_output_fails(results):
    assert results["uninit"]["add_into"] == (
        "fail", f"core 0: output elements [0, 16) {NEVER_WRITTEN}")


def test_a_write_set_that_depends_on_unwritten_tcm_fails(results):
    # the negatives are written in the second run only (TCM poison 0xC3)
    assert results["uninit"]["relu_flag"] == (
        "fail", "core 0: output elements [2, 4), [6, 8), [10, 12), [14, 16) depend on "
                "never-written TCM, stack or heap (their values change with the poison of "
                "tcm_malloc memory, local variables and malloc / new blocks: read before the "
                "kernel wrote it)")


def test_cleared_report_flags_skip_nothing(results):
    # (the flags it cleared named the TCM; the stack's and the heap's remain)
    assert results["uninit"]["hide_tcm"] == (
        "fail", "core 0: output elements [0, 16) depend on never-written stack or heap (their "
                "values change with the poison of local variables and malloc / new blocks: "
                "read before the kernel wrote it)")


def test_a_multicore_kernel_adding_into_its_unwritten_slices_fails(results):
    assert results["uninit_mc"]["mc_add_into"] == (
        "fail", "cores 0-7: output elements [0, 16) depend on output elements read before "
                "they were written (through a standard or stream accessor or a raw pointer: "
                "an output element holds no defined value until it is written)")


def test_reading_back_what_a_core_wrote_passes(results):
    assert results["uninit"]["read_back"] == ("pass", "")
    assert results["uninit_mc"]["mc_read_back"] == ("pass", "")


def test_a_write_past_the_output_in_the_second_run_only_fails(results):
    assert results["uninit"]["past_end_sometimes"] == (
        "fail", "core 0 wrote past the end of the output: elements [16, 20) (the output has 16 "
                "elements)")


def test_an_input_changed_in_the_second_run_only_fails(results):
    assert results["uninit"]["input_sometimes"] == (
        "fail", "input 'x' was modified (28 bytes changed)")


def test_reading_past_an_input_fails(results):
    # x[16] is the poison of never-written memory, not a zero that the
    # reference's padding happens to expect (in HBM and in SBUF)
    for key in ("smooth3", "smooth3[sbuf]"):
        status, message = results["uninit"][key]
        assert (status, message.split(" depend on ")[0]) == (
            "fail", "core 0: output elements [15, 16)"), key


def test_reading_far_past_an_input_fails(results):
    # x[32..47] lie beyond the input's poisoned guard, on the rest of its
    # arena's page: poisoned too, not zeros that padding would expect
    for key in ("far_pad", "far_pad[sbuf]"):
        status, message = results["uninit"][key]
        assert (status, message.split(" depend on ")[0]) == (
            "fail", "core 0: output elements [0, 16)"), key


def test_a_write_past_an_input_fails(results):
    assert results["uninit"]["input_past_end"] == (
        "fail", "input 'x' was written past its end (4 bytes changed after it)")
