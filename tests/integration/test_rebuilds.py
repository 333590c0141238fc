"""Exact incremental rebuilds, judged by SCons's own explanation of what it
rebuilt (--debug=explain), and builds that survive a SIGKILL."""
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import copy_project, run_scons

EXPLAIN = re.compile(r"^scons: rebuilding `([^']+)' because", re.M)


def rebuilt(proj, *args):
    """Run an explained build; return the set of targets SCons rebuilt.

    A library's locations.json (where its vectors are written, for messages)
    is rewritten whenever lines of the manifest move; it triggers nothing
    (see ARCHITECTURE.md) and is left out here.
    """
    proc = run_scons(proj, "-Q", "--debug=explain", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {t for t in EXPLAIN.findall(proc.stdout) if not t.endswith("/locations.json")}


def lib_outputs(lib, objects, linked, tests=True):
    """Targets of one library: the given objects, the links of `linked` and
    their one pack, its tests, and its stack report (read from the objects)
    when an object changed."""
    d = f"build/host/{lib}"
    out = {f"{d}/obj/{o}.o" for o in objects}
    if objects:
        out.add(f"{d}/stack-report.txt")
    out |= {f"{d}/{base}.so" for base in linked}
    if linked:
        # one pack action writes every core's .packed.so and .stripped.so;
        # SCons explains a multi-target action once, by its first target
        out.add(f"{d}/{linked[0]}.packed.so")
    if tests:
        out.add(f"{d}/test-results.json")
    return out


SPMD_CORES = [f"spmd_cpu{i}" for i in range(8)]


@pytest.fixture(scope="module")
def proj(tmp_path_factory):
    p = copy_project(tmp_path_factory.mktemp("rebuild"))
    # a header shared by two kernels of two libraries
    (p / "kernels/common").mkdir()
    (p / "kernels/common/chunk.h").write_text("#pragma once\n#define GPSIMD_CHUNK 1024\n")
    for src, old in (("kernels/tcm_eltwise/tcm_eltwise.cpp", "constexpr size_t kChunk = 1024;"),
                     ("kernels/spmd/spmd.cpp", "constexpr size_t kChunk = 1024;")):
        text = (p / src).read_text()
        assert old in text
        text = text.replace("#include <torch/torch.h>",
                            '#include <torch/torch.h>\n#include "common/chunk.h"', 1)
        (p / src).write_text(text.replace(old, "constexpr size_t kChunk = GPSIMD_CHUNK;"))
    manifest = (p / "ops.yaml").read_text()
    manifest = manifest.replace("sources: [kernels/tcm_eltwise/tcm_eltwise.cpp]",
                                "sources: [kernels/tcm_eltwise/tcm_eltwise.cpp]\n    includes: [kernels]")
    manifest = manifest.replace("sources: [kernels/spmd/spmd.cpp]",
                                "sources: [kernels/spmd/spmd.cpp]\n    includes: [kernels]")
    (p / "ops.yaml").write_text(manifest)
    proc = run_scons(p)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rebuilt(p) == set()
    return p


def edit(path, old, new):
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_null_build_rebuilds_nothing(proj):
    assert rebuilt(proj) == set()


def test_kernel_edit(proj):
    src = proj / "kernels/relu/relu.cpp"
    edit(src, "t_in_acc[i] > 0.0f ? t_grad_acc[i]", "t_in_acc[i] > 0.0f ? 1.0f * t_grad_acc[i]")
    edit(src, "for (size_t i = 0; i < num_elem; i++) {\n        t_out_acc[i] = t_in_acc[i] > 0.0f ? t_in_acc[i]",
         "for (size_t i = 0; i != num_elem; ++i) {\n        t_out_acc[i] = t_in_acc[i] >= 0.0f ? t_in_acc[i]")
    assert rebuilt(proj) == lib_outputs("relu", ["kernels/relu/relu"], ["relu"])
    assert rebuilt(proj) == set()


def test_shared_header_edit(proj):
    edit(proj / "kernels/common/chunk.h", "GPSIMD_CHUNK 1024", "GPSIMD_CHUNK 512")
    expected = (lib_outputs("tcm_eltwise", ["kernels/tcm_eltwise/tcm_eltwise"], ["tcm_eltwise"])
                | lib_outputs("spmd", ["kernels/spmd/spmd"], SPMD_CORES))
    assert rebuilt(proj) == expected
    assert rebuilt(proj) == set()


def test_vector_edit_reruns_only_that_librarys_tests(proj):
    edit(proj / "ops.yaml", "shape: [77], random: {distribution: uniform, low: -1, high: 1}}",
         "shape: [78], random: {distribution: uniform, low: -1, high: 1}}")
    edit(proj / "ops.yaml", "shape: [77], random: {distribution: uniform, low: -1, high: 1}}",
         "shape: [78], random: {distribution: uniform, low: -1, high: 1}}")
    # (the test plan is written while the graph is read: it is a source; the
    # results change, since they record each vector's write-set layout, whose
    # element count is the vector's; the summary is written at the end of
    # every build, not a node)
    # (relu has shape sources: its outputs are asked of the shape functions
    # again for the edited plan)
    assert rebuilt(proj) == {"build/host/relu/test-results.json",
                             "build/host/relu/testplan.shaped.json"}
    assert rebuilt(proj) == set()


def test_schema_edit_rebuilds_that_librarys_wrapper_and_dependents(proj):
    # scale_shift's shift becomes an int: a new wrapper (customop_next_int) and
    # a kernel overload to match; nothing of the other libraries.
    src = proj / "kernels/tcm_eltwise/tcm_eltwise.cpp"
    src.write_text(src.read_text() + (
        "\n// y = x * scale + shift, integer shift\n"
        "torch::Tensor scale_shift(const torch::Tensor& t_in, float scale, int shift) {\n"
        "    return scale_shift(t_in, scale, static_cast<float>(shift));\n}\n"))
    assert rebuilt(proj) == lib_outputs("tcm_eltwise", ["kernels/tcm_eltwise/tcm_eltwise"],
                                        ["tcm_eltwise"])
    # (tcm_eltwise's schemas are derived from its shape functions: the
    # shape function's shift becomes an int64_t, which derives `long long`;
    # an explicit schema says int)
    edit(proj / "ops.yaml", "      - name: scale_shift",
         '      - schema: "my_ops::scale_shift(Tensor x, float scale, int shift) -> Tensor"')
    edit(proj / "kernels/tcm_eltwise/shape.cpp", "double shift", "int64_t shift")
    edit(proj / "ops.yaml", "shift: -0.25", "shift: -1")
    got = rebuilt(proj)
    d = "build/host/tcm_eltwise"
    assert got == {f"{d}/obj/wrapper.o",
                   f"{d}/stack-report.txt", f"{d}/tcm_eltwise.so", f"{d}/tcm_eltwise.packed.so",
                   f"{d}/test-results.json", f"{d}/testplan.shaped.json",
                   f"{d}/shapes/obj/kernels/tcm_eltwise/shape.o", f"{d}/shapes/registration.json",
                   f"{d}/shapes/tcm_eltwise_shapes.so", f"{d}/shapes/registration-check.txt"}
    assert rebuilt(proj) == set()


def test_cflags_edit_recompiles_only_that_library(proj):
    edit(proj / "ops.yaml", "sources: [kernels/scalar_args/scalar_args.cpp]",
         "sources: [kernels/scalar_args/scalar_args.cpp]\n    cflags: [-DSCALAR_ARGS_BUILD=1]")
    got = rebuilt(proj)
    d = "build/host/scalar_args"
    compiled = {t for t in got if t.endswith(".o")}
    assert compiled == {f"{d}/obj/kernels/scalar_args/scalar_args.o", f"{d}/obj/wrapper.o"}
    assert all(t.startswith(d + "/") for t in got), got
    assert rebuilt(proj) == set()


@pytest.mark.campaign
def test_changing_the_compiler_recompiles_everything(proj):
    if not any(os.access(os.path.join(p, "g++-12"), os.X_OK)
               for p in os.environ["PATH"].split(os.pathsep)):
        pytest.skip("no second name for the compiler (g++-12) on PATH")
    built = {str(p.relative_to(proj)) for p in (proj / "build/host").rglob("*")
             if p.name.endswith(".o") or (p.name.endswith(".so") and
                                          not p.name.endswith((".packed.so", ".stripped.so")))}
    compiler_steps = lambda got: {t for t in got if t.endswith((".o", ".so"))
                                  and not t.endswith(".packed.so")}
    # every compile and every link runs again with the other compiler, and back
    assert compiler_steps(rebuilt(proj, "CXX=g++-12")) == built
    assert compiler_steps(rebuilt(proj)) == built
    assert rebuilt(proj) == set()


def _digests(proj):
    proc = run_scons(proj, "-Q", "digests")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [l for l in proc.stdout.splitlines() if re.match(r"^[0-9a-f]{64}  ", l)]


@pytest.mark.campaign
def test_sigkill_then_rebuild_equals_clean_build(tmp_path):
    p = copy_project(tmp_path / "killed")
    clean = copy_project(tmp_path / "clean")
    child = subprocess.Popen([sys.executable, "-m", "SCons", "-j2"], cwd=str(p),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    time.sleep(random.uniform(1.0, 4.0))   # somewhere among compiles, links and tests
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    proc = run_scons(p)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_scons(clean)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _digests(p) == _digests(clean)


PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] (\S+)", re.M)


def test_progress_counts_the_work_of_this_run(proj):
    """Each action line starts with [done/total]: done counts 1, 2, ...;
    the total is this run's predicted work, corrected as SCons finds
    predicted actions up to date, and the last line reads [n/n]."""
    src = proj / "kernels/relu/relu.cpp"
    src.write_text(src.read_text() + "volatile int gpsimd_progress_edit = 1;\n")
    proc = run_scons(proj, "-Q", "-j1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [(int(d), int(t), what) for d, t, what in PROGRESS.findall(proc.stdout)]
    assert [d for d, _, _ in lines] == list(range(1, len(lines) + 1))
    assert sorted(what for _, _, what in lines) == ["CXX", "LINK", "PACK", "STACK", "TEST"]
    assert all(t >= d for d, t, _ in lines) and lines[-1][:2] == (5, 5)
    # predicted from the first line: compile, link, pack, test and the stack report
    assert lines[0][1] == 5
    null = run_scons(proj, "-Q")
    assert not PROGRESS.search(null.stdout) and "relu: 10 passed, 0 failed" in null.stdout
    # the same through a command line's target, an alias (`scons relu`):
    # its total is predicted from the first line too, not counted up
    src.write_text(src.read_text() + "volatile int gpsimd_progress_edit2 = 1;\n")
    proc = run_scons(proj, "-Q", "-j1", "relu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [(int(d), int(t), what) for d, t, what in PROGRESS.findall(proc.stdout)]
    assert sorted(what for _, _, what in lines) == ["CXX", "LINK", "PACK", "STACK", "TEST"]
    assert lines[0][1] == 5 and lines[-1][:2] == (5, 5), lines
