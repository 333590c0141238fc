"""The cores of a vector in parallel (issue "Eight cores as the device runs
them", item 3): every op of the shipped multicore library and every broken
multicore kernel give the same results one core after another and spread
over processes (so crash containment, time limits and the per-core checks
stay exact), and the cores of a slow vector do run at the same time.

Parallel runs are forced with ``RunOptions(parallel=N, spread_after=0)``
(by default a run spreads only after 20 ms, so short kernels never fork).
The vectors run in the emulator's program the build made.
"""
import json
import time

import pytest

from conftest import copy_built, run_scons
from test_emu_checks import BROKEN_OPTIONS

from gpsimd_device.plan import TestPlan
from gpsimd_emu.session import LibrarySession, RunOptions

SERIAL = dict(parallel=1)
ZYGOTE = "build/host/emu/gpsimd-zygote"
SPREAD = dict(parallel=8, spread_after=0.0)

PAR_SOURCE = r"""
#include <unistd.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>
namespace {
void twice(const torch::Tensor& x, torch::Tensor& out) {
    const size_t n = x.numel(), id = get_cpu_id(), cnt = get_cpu_count();
    const size_t begin = id * (n / cnt), count = id == cnt - 1 ? n - begin : n / cnt;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * 64);
    if (buf == nullptr) return;
    for (size_t i = 0; i < count; i += 64) {
        const size_t k = count - i < 64 ? count - i : 64;
        x.tcm_accessor().tensor_to_tcm<float>(buf, begin + i, k);
        for (size_t j = 0; j < k; j++) buf[j] *= 2.0f;
        out.tcm_accessor().tcm_to_tensor<float>(buf, begin + i, k);
    }
    torch::neuron::tcm_free(buf);
}
}  // namespace
// Each core sleeps 0.25 s, then writes its slice.
torch::Tensor nap(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    usleep(250000);
    twice(x, out);
    return out;
}
// Core 5 never returns; the others write their slices.
torch::Tensor hang5(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    if (get_cpu_id() == 5) { volatile int64_t n = 1; while (n > 0) n = n + 1 - 1; }
    twice(x, out);
    return out;
}
"""


@pytest.fixture(scope="module")
def plans(built_project, tmp_path_factory):
    """{library: (project, TestPlan)}: spmd, broken_spmd, broken_race, par, built
    in this module's copy of the shared build."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("parallel") / "p")
    (proj / "probe").mkdir(exist_ok=True)
    (proj / "probe" / "par.cpp").write_text(PAR_SOURCE)
    vec = {"name": "n1000", "inputs": {"x": {"dtype": "float32", "shape": [1000],
                                             "random": {"seed": 1, "distribution": "normal"}}},
           "expected": {"reference": "probe/par_ref.py:double"}}
    (proj / "probe" / "par_ref.py").write_text(
        "import numpy as np\ndef double(x):\n    return (x * np.float32(2)).astype(np.float32)\n")
    manifest = {"version": 1, "libraries": [{
        "name": "par", "multicore": True, "sources": ["probe/par.cpp"],
        "ops": [{"schema": "t::nap(Tensor x) -> Tensor", "vectors": [vec]},
                {"schema": "t::hang5(Tensor x) -> Tensor", "vectors": [vec]}]}]}
    (proj / "par.yaml").write_text(json.dumps(manifest))
    out = {}
    for options, libs in ((("MANIFEST=par.yaml",), ("par",)),
                          (BROKEN_OPTIONS, ("broken_spmd", "broken_race")),
                          ((), ("spmd",))):
        targets = [f"build/host/{lib}/{name}" for lib in libs
                   for name in ["testplan.json"] + [f"{lib}_cpu{i}.packed.so" for i in range(8)]]
        targets.append(ZYGOTE)
        proc = run_scons(proj, *options, *targets)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for lib in libs:
            # (a library with shape sources runs the plan its shape functions filled)
            shaped = proj / f"build/host/{lib}/testplan.shaped.json"
            if lib == "spmd":
                assert run_scons(proj, str(shaped.relative_to(proj))).returncode == 0
            plan = shaped if shaped.exists() else proj / f"build/host/{lib}/testplan.json"
            out[lib] = (proj, TestPlan.load(str(plan)))
    return out


@pytest.fixture
def leader(plans):
    """RunOptions(zygote=...): the program the build made."""
    proj = next(iter(plans.values()))[0]
    return {"zygote": str(proj / ZYGOTE)}


def _run_all(plans, lib, **options):
    proj, plan = plans[lib]
    with LibrarySession(plan, root=str(proj), options=RunOptions(**options)) as s:
        return s.run_all()


@pytest.mark.parametrize("lib,checks", [("spmd", True), ("spmd", False), ("broken_spmd", True),
                                        ("broken_spmd", False), ("broken_race", True)])
def test_results_identical_serial_and_parallel(plans, lib, checks, leader):
    """(Without checks the cores of a run share one output as on the device,
    so a racy kernel -- broken_race -- may give any result there.)"""
    serial = _run_all(plans, lib, checks=checks, timeout=10, **SERIAL, **leader).to_json()
    spread = _run_all(plans, lib, checks=checks, timeout=10, **SPREAD, **leader).to_json()
    assert spread == serial
    if lib == "spmd":
        assert serial["failed"] == 0 and serial["passed"] == 16


def test_cores_run_at_the_same_time(plans, leader):
    serial = _timed(plans, checks=False, **SERIAL, **leader)
    spread = _timed(plans, checks=False, **SPREAD, **leader)
    print(f"8 cores x 0.25 s asleep: one after another {serial:.2f} s, spread {spread:.2f} s")
    assert serial > 1.9 and spread < serial / 2


def _timed(plans, **options):
    proj, plan = plans["par"]
    with LibrarySession(plan, root=str(proj), options=RunOptions(timeout=10, **options)) as s:
        s.run_vector("nap", "n1000")         # the zygote loads the objects
        start = time.monotonic()
        r = s.run_vector("nap", "n1000")
        took = time.monotonic() - start
    assert (r.status, r.message) == ("pass", ""), r.message
    return took


@pytest.mark.parametrize("options", [SERIAL, SPREAD], ids=["serial", "spread"])
def test_time_limit_names_the_core_that_hangs(plans, options, leader):
    proj, plan = plans["par"]
    with LibrarySession(plan, root=str(proj), options=RunOptions(timeout=1, **options,
                                                                 **leader)) as s:
        r = s.run_vector("hang5", "n1000")
    assert r.message == "timed out after 1 s (core 5 was running)"
