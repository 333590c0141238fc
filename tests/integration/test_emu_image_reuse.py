"""The image file a session keeps between vectors (``ImagePool``) passes
nothing a new file would not: kernels that pass only if they read what
the previous vector left in the file fail exactly as with a new file for
each vector, with and without the checks, after a vector that passed,
crashed or hit its time limit:

- ``skip_last`` writes every element when ``x[0]`` is 1, else all but the
  last, which the previous vector's run wrote with the right value;
- ``peek_past`` reads a 16-element input's next 16 elements, where the
  previous vector's 32-element input held what its reference expects;
- ``crash_then_skip`` and ``spin_then_skip`` write every element, then
  crash or spin, when ``x[0]`` is 1; else they are ``skip_last``.

In the ``pgroup`` mode, whose sweep of a vector's processes gives up after
a time, no file is kept; nor the file of a vector whose zygote was killed
while it ran (no answer: its processes may live on).
"""
import json
import os
import signal
import threading

import pytest

from conftest import copy_project, run_scons

from gpsimd_device.plan import TestPlan
from gpsimd_emu import memory, session, zygote_client
from gpsimd_emu.session import LibrarySession, RunOptions

ZYGOTE = "build/host/emu/gpsimd-zygote"
KEPT = session.KEPT_IMAGES

KERNELS = r"""
#include <stdint.h>
#include <stdlib.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

namespace {
float* raw(const torch::Tensor& t) {
    return (float*)neuron_translate(t.q7_data_ptr().ctx, t.q7_data_ptr().hbm_addr);
}
// 2x of every element, or of all but the last
int64_t twice(const torch::Tensor& x, const torch::Tensor& out, bool all) {
    const int64_t n = x.numel();
    const float* xi = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < (all ? n : n - 1); i++) o[i] = 2.0f * xi[i];
    return n;
}
}  // namespace

torch::Tensor skip_last(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    twice(x, out, raw(x)[0] == 1.0f);
    return out;
}

// 2x of a 32-element input; x + the 16 elements after a 16-element one
torch::Tensor peek_past(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const int64_t n = x.numel();
    const float* xi = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < n; i++) o[i] = n == 32 ? 2.0f * xi[i] : xi[i] + xi[i + 16];
    return out;
}

torch::Tensor crash_then_skip(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const bool first = raw(x)[0] == 1.0f;
    twice(x, out, first);
    if (first) abort();
    return out;
}

torch::Tensor spin_then_skip(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const bool first = raw(x)[0] == 1.0f;
    twice(x, out, first);
    for (volatile int spin = first; spin;) {}
    return out;
}
"""

REFERENCE = """\
import numpy as np
def double(x):
    return (x * np.float32(2)).astype(np.float32)
def peek(x):
    if x.size == 32:
        return double(x)
    return (x + np.arange(16, 32, dtype=np.float32)).astype(np.float32)
"""

FIRST = [1.0] + [float(i) for i in range(2, 17)]         # (x[0] == 1)
LATER = [5.0] + [float(i) for i in range(2, 17)]


def _vector(name, values, reference):
    return {"name": name, "inputs": {"x": {"dtype": "float32", "shape": [len(values)],
                                           "values": values}},
            "expected": {"reference": f"probe/reuse_ref.py:{reference}"}}


OPS = {"skip_last": [("a", FIRST), ("b", LATER)],
       "peek_past": [("long", [float(i) for i in range(32)]),
                     ("short", [float(i) for i in range(16)])],
       "crash_then_skip": [("a", FIRST), ("b", LATER)],
       "spin_then_skip": [("a", FIRST), ("b", LATER)]}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The probe library built: ``(project, plan)``."""
    proj = copy_project(tmp_path_factory.mktemp("reuse") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "reuse.cpp").write_text(KERNELS)
    (proj / "probe" / "reuse_ref.py").write_text(REFERENCE)
    manifest = {"version": 1, "libraries": [
        {"name": "reuse", "sources": ["probe/reuse.cpp"],
         "ops": [{"schema": f"t::{op}(Tensor x) -> Tensor",
                  "vectors": [_vector(name, values, "peek" if op == "peek_past" else "double")
                              for name, values in vectors]}
                 for op, vectors in OPS.items()]}]}
    (proj / "reuse.yaml").write_text(json.dumps(manifest))
    proc = run_scons(proj, "MANIFEST=reuse.yaml", "build/host/reuse/testplan.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = TestPlan.load(str(proj / "build/host/reuse/testplan.json"))
    proc = run_scons(proj, "MANIFEST=reuse.yaml", ZYGOTE, *(c.object for c in plan.cores))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj, plan


def _results(built, checks, kept, monkeypatch):
    """{op[vector]: (status, message)} of every vector run one at a time
    (each vector's file the previous one's, when files are kept), and the
    vectors that took a kept file."""
    proj, plan = built
    monkeypatch.setattr(session, "KEPT_IMAGES", kept)
    given, took = [], []
    give, take = memory.ImagePool.give, memory.ImagePool.take
    monkeypatch.setattr(memory.ImagePool, "give",
                        lambda pool, f, keep: (given.append(f), give(pool, f, keep))[1])
    monkeypatch.setattr(memory.ImagePool, "take", lambda pool, size, keep: (lambda f: (
        took.append(any(f is g for g in given)), f)[1])(take(pool, size, keep)))
    options = RunOptions(timeout=1, checks=checks, zygote=str(proj / ZYGOTE))
    out, kept = {}, []
    with LibrarySession(plan, root=str(proj), options=options) as s:
        for op in plan.ops:
            for v in op.vectors:
                before = len(took)
                r = s.run_vector(op, v)
                out[f"{op.name}[{v.name}]"] = (r.status, r.message)
                kept += [f"{op.name}[{v.name}]"] * sum(took[before:])
    return out, kept


NEVER = "elements never written: [15, 16)"
LAST = ("1 of 16 elements differ (rtol=1.3e-06, atol=1e-05): [15] actual 0 expected 32; "
        "max_abs_err 32")
WANT = {   # checks on / off: what a new file for each vector gives
    True: {"skip_last[a]": ("pass", ""), "skip_last[b]": ("fail", NEVER),
           "peek_past[long]": ("pass", ""),
           "peek_past[short]": ("fail", "core 0: output elements [0, 16) depend on never-written "
                                "memory (their values change with the poison of the bytes around "
                                "each input that a raw pointer reads outside it, local variables, "
                                "malloc / new blocks and output elements the kernel read before "
                                "writing them through a standard or stream accessor or a raw "
                                "pointer)"),
           "crash_then_skip[a]": ("fail", "core 0 crashed with SIGABRT"),
           "crash_then_skip[b]": ("fail", NEVER),
           "spin_then_skip[a]": ("fail", "timed out after 1 s (core 0 was running)"),
           "spin_then_skip[b]": ("fail", NEVER)},
    False: {"skip_last[a]": ("pass", ""), "skip_last[b]": ("fail", LAST),
            "peek_past[long]": ("pass", ""),
            "peek_past[short]": ("fail", "16 of 16 elements differ (rtol=1.3e-06, atol=1e-05): "
                                 "[0] actual 0 expected 16, [1] actual 1 expected 18, [2] actual "
                                 "2 expected 20, [3] actual 3 expected 22, [4] actual 4 expected "
                                 "24, ... (11 more); max_abs_err 31"),
            "crash_then_skip[a]": ("fail", "core 0 crashed with SIGABRT"),
            "crash_then_skip[b]": ("fail", LAST),
            "spin_then_skip[a]": ("fail", "timed out after 1 s (core 0 was running)"),
            "spin_then_skip[b]": ("fail", LAST)}}


@pytest.mark.parametrize("checks", [True, False])
def test_a_vector_passes_nothing_a_new_file_would_not(built, checks, monkeypatch):
    fresh, none = _results(built, checks, 0, monkeypatch)
    kept, reused = _results(built, checks, KEPT, monkeypatch)
    assert (fresh, none) == (WANT[checks], [])
    assert kept == fresh
    # every vector ran in the file of the one before it, but for a vector
    # whose second call has arenas of its own (a file of another size)
    assert reused == [k for k in WANT[checks] if k not in ("skip_last[a]", "skip_last[b]" * checks)]


def test_no_file_is_kept_where_the_sweep_may_leave_a_process(built, monkeypatch):
    monkeypatch.setenv("GPSIMD_EMU_CONTAIN", "pgroup")
    kept, reused = _results(built, True, KEPT, monkeypatch)
    assert (kept, reused) == (WANT[True], [])


def test_the_file_of_a_vector_whose_zygote_was_killed_is_not_kept(built, monkeypatch):
    proj, plan = built
    given = []
    real = memory.ImagePool.give
    monkeypatch.setattr(memory.ImagePool, "give", lambda pool, f, keep: (given.append(f),
                                                                          real(pool, f, keep)))
    op = next(o for o in plan.ops if o.name == "spin_then_skip")
    options = RunOptions(timeout=20, zygote=str(proj / ZYGOTE))
    with LibrarySession(plan, root=str(proj), options=options) as s:
        first = next(o for o in plan.ops if o.name == "skip_last")
        assert s.run_vector(first, first.vectors[0]).status == "pass"     # (its file kept)
        given.clear()
        killer = threading.Timer(1.0, os.kill, (s.zygote.pid, signal.SIGKILL))
        killer.start()
        try:
            r = s.run_vector(op, op.vectors[0])
        finally:
            killer.cancel()
    assert (r.status, r.message, given) == (
        "fail", "the device model process failed: died with SIGKILL", [])


def test_a_vector_queued_after_one_left_unanswered_takes_no_answer(built, monkeypatch):
    # (the worker gave up on a vector's answer while the zygote ran on: the
    # next answer read was that vector's, and the vector queued after it
    # was judged by it, perhaps before it had run, its file kept while its
    # processes still wrote it)
    proj, plan = built
    given = []
    give = memory.ImagePool.give
    monkeypatch.setattr(memory.ImagePool, "give",
                        lambda pool, f, keep: (given.append(f), give(pool, f, keep))[1])
    receive, calls = zygote_client.ZygoteClient.receive, []

    def late(client, timeout):          # (the second answer waited for: none in time)
        calls.append(timeout)
        if len(calls) == 2:
            raise zygote_client.ZygoteError("gave no answer within 1 s")
        return receive(client, timeout)
    monkeypatch.setattr(zygote_client.ZygoteClient, "receive", late)
    options = RunOptions(timeout=1, zygote=str(proj / ZYGOTE))
    with LibrarySession(plan, root=str(proj), options=options) as s:
        s.ready()
        results = s.run_all()
    lost = "the device model process failed: gave no answer within 1 s"
    assert [(r.status, r.message) for r in results.vectors[:3]] == [("pass", "")] + [
        ("fail", lost)] * 2
    assert (len(calls), len(given)) == (2, 1)      # (the first vector's file only)
