"""The image files a session keeps between vectors (``ImagePool``) take
nothing from a later vector's memory limit: the pages a vector's
processes made in its file are charged to the sandbox's memory cgroup,
and a file kept with them counted against every vector run while it was
kept (two vectors that each touched 12 MiB of their HBM scratch made a
third, which fits the limit alone, fail as 'core 0 exceeded the 160 MiB
memory limit').

- ``touch`` touches ``x[0]`` MiB of its HBM scratch;
- ``hog`` touches ``x[0]`` MiB of its HBM scratch and ``x[1]`` MiB of
  ``malloc`` memory, or aborts when it gets none (a file of another size
  than ``touch``'s: it takes none of theirs).
"""
import json

import pytest

from conftest import copy_project, run_scons

from gpsimd_device.plan import TestPlan
from gpsimd_emu import memory
from gpsimd_emu.session import LibrarySession, RunOptions

ZYGOTE = "build/host/emu/gpsimd-zygote"
LIMIT_MIB = 160
STEP = 8        # (MiB between hog vectors)

KERNELS = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

namespace {
float* raw(const torch::Tensor& t) {
    return (float*)neuron_translate(t.q7_data_ptr().ctx, t.q7_data_ptr().hbm_addr);
}
void fill(size_t mib) {
    char* s = (char*)neuron_translate(neuron_translate_ctx(), neuron_hbm_allocate(mib << 20));
    if (s) memset(s, 1, mib << 20);
}
torch::Tensor twice(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    const float* xi = raw(x);
    float* o = raw(out);
    for (int64_t i = 0; i < x.numel(); i++) o[i] = 2.0f * xi[i];
    return out;
}
}  // namespace

torch::Tensor touch(const torch::Tensor& x) {
    fill((size_t)raw(x)[0]);
    return twice(x);
}

torch::Tensor hog(const torch::Tensor& x) {
    fill((size_t)raw(x)[0]);
    const size_t m = (size_t)raw(x)[1] << 20;
    char* h = (char*)malloc(m);
    if (!h) abort();        // (past the data limit: a failure as past the cgroup's)
    for (size_t i = 0; i < m; i += 4096) ((volatile char*)h)[i] = 1;   // (not elided)
    return twice(x);
}
"""

REFERENCE = """\
import numpy as np
def double(x):
    return (x * np.float32(2)).astype(np.float32)
"""

HOG = list(range(0, 200, STEP))


def _vector(name, values):
    return {"name": name, "inputs": {"x": {"dtype": "float32", "shape": [len(values)],
                                           "values": values}},
            "expected": {"reference": "probe/charge_ref.py:double"}}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The probe library built: ``(project, plan)``."""
    proj = copy_project(tmp_path_factory.mktemp("charge") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "charge.cpp").write_text(KERNELS)
    (proj / "probe" / "charge_ref.py").write_text(REFERENCE)
    ops = {"touch": [_vector("a", [12.0] + [0.0] * 15), _vector("b", [12.0] + [0.0] * 2047)],
           "hog": [_vector(f"m{m}", [30.0, float(m)] + [0.0] * 4094) for m in HOG]}
    manifest = {"version": 1, "libraries": [
        {"name": "charge", "sources": ["probe/charge.cpp"],
         "ops": [{"schema": f"t::{op}(Tensor x) -> Tensor", "vectors": vectors}
                 for op, vectors in ops.items()]}]}
    (proj / "charge.yaml").write_text(json.dumps(manifest))
    proc = run_scons(proj, "MANIFEST=charge.yaml", "build/host/charge/testplan.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = TestPlan.load(str(proj / "build/host/charge/testplan.json"))
    proc = run_scons(proj, "MANIFEST=charge.yaml", ZYGOTE, *(c.object for c in plan.cores))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj, plan


def test_a_kept_file_takes_nothing_from_the_next_vectors_memory_limit(built, monkeypatch):
    proj, plan = built
    ops = {o.name: o for o in plan.ops}
    options = RunOptions(timeout=10, checks=False, memory=LIMIT_MIB << 20,
                         zygote=str(proj / ZYGOTE))

    def run(s, op, vector):
        return s.run_vector(ops[op], next(v for v in ops[op].vectors if v.name == vector)).status

    def alone(m):
        with LibrarySession(plan, root=str(proj), options=options) as s:
            if s.ready()["mode"] == "pgroup" or not s.ready()["cgroup"]:
                pytest.skip("no PID namespace or no memory cgroup here: no file kept, no limit")
            return run(s, "hog", f"m{m}")
    lo, hi = 0, len(HOG)         # (the most malloc memory that passes alone: HOG[lo])
    assert alone(HOG[0]) == "pass"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if alone(HOG[mid]) == "pass" else (lo, mid)
    assert 2 <= lo < len(HOG) - 1, f"the limit is not within the vectors: {HOG[lo]} MiB"
    kept = []
    real = memory.ImagePool.give
    monkeypatch.setattr(memory.ImagePool, "give", lambda pool, f, keep: (
        real(pool, f, keep), kept.append(f.fd is not None)))
    with LibrarySession(plan, root=str(proj), options=options) as s:
        # (24 MiB of scratch pages in two kept files; the hog vector, a
        # step below the most that passes alone, fails if they count)
        assert [run(s, "touch", "a"), run(s, "touch", "b"), kept] == ["pass", "pass", [True, True]]
        assert run(s, "hog", f"m{HOG[lo - 1]}") == "pass"
