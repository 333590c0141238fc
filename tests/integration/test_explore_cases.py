"""Explore on the emulator where a search alone misses or misreports:
bugs only past the buffers (in the second set of dtypes; of tensors of
different shapes), faults at the vectors' own rank, a rank-0 vector, a
vector asking exact results, a reference that raises where the kernel
refuses the rank; each example fails the same way pasted; and two
explores of one library at once (tests/data/explore_cases)."""
import os
import re
import shutil
import subprocess
import sys

from conftest import ROOT, copy_built, run_scons
from test_explore import _lines


def test_two_explores_of_one_library_at_once_never_share_their_drawn_inputs(built_project,
                                                                           tmp_path):
    """Two ``python -m gpsimd_explore`` runs of one library at once (two
    shells, or pytest-xdist's workers, each with its own database) print
    what one alone prints: each writes its drawn inputs in a folder of its
    own (they shared ``explore/<op>/x.npy``: FlakyFailure, or an example
    falsified by the other run's file), removed when it ends."""
    proj = copy_built(built_project[0], tmp_path / "p")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))

    def start(name):
        return subprocess.Popen(
            [sys.executable, "-m", "gpsimd_explore", "build/host/relu/testplan.json",
             "--zygote", "build/host/emu/gpsimd-zygote", "--root", ".", "--examples", "60",
             "--shapes", "build/host/relu/shapes/relu_shapes.so",
             "--database", str(tmp_path / f"db-{name}"), "--save-dir", str(tmp_path / name),
             "--save-prefix", "explore/"], cwd=str(proj), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
    alone = start("alone").communicate(timeout=900)[0]
    runs = [start(name) for name in ("a", "b")]
    outputs = [run.communicate(timeout=900)[0] for run in runs]
    assert "relu: 2 ops explored, 1 falsified" in alone.splitlines(), alone
    assert outputs == [alone, alone], outputs
    assert not any((proj / "build/host/relu/explore").iterdir())


def _vector_lines(name, inputs, extra=""):
    return (f"          - name: {name}\n            inputs:\n"
            + "".join(f"              {k}: {v}\n" for k, v in inputs.items()) + extra)


_NORMAL = "random: {distribution: normal}}"
_CASES = "\n  - name: ec\n    sources: [ec/cases.cpp]\n    ops:\n" + "".join(
    f'      - schema: "cases::{op}"\n        reference: ec/reference.py:{ref}\n'
    f"        vectors:\n{vectors}          # PASTE {op.split('(')[0]}\n"
    for op, ref, vectors in (
        ("f16_big(Tensor x) -> Tensor", "double",
         _vector_lines("f32", {"x": "{dtype: float32, shape: [100], " + _NORMAL})
         + _vector_lines("f16", {"x": "{dtype: float16, shape: [100], " + _NORMAL})),
        ("rowscale(Tensor a, Tensor v) -> Tensor", "rowscale",
         _vector_lines("m4k8", {"a": "{dtype: float32, shape: [4, 8], " + _NORMAL,
                                "v": "{dtype: float32, shape: [8], " + _NORMAL})),
        ("big_bug(Tensor x) -> Tensor", "double",
         _vector_lines("n100", {"x": "{dtype: float32, shape: [100], " + _NORMAL})),
        ("rows_bug(Tensor x) -> Tensor", "double",
         _vector_lines("m4k8", {"x": "{dtype: float32, shape: [4, 8], " + _NORMAL})),
        ("first_only(Tensor x) -> Tensor", "double",
         _vector_lines("r0", {"x": "{dtype: float32, shape: [], values: 1.5}"})),
        ("ulp_off(Tensor x) -> Tensor", "double",
         _vector_lines("exact", {"x": "{dtype: float32, shape: [100], " + _NORMAL},
                       "            rtol: 0\n            atol: 0\n")),
        ("rowfirst(Tensor x) -> Tensor", "rowfirst",
         _vector_lines("m4k8", {"x": "{dtype: float32, shape: [4, 8], " + _NORMAL}))))


def test_explore_finds_what_the_sweep_and_the_ranks_hide_and_each_example_fails_pasted(
        built_project, tmp_path):
    """A float16-only bug past 16384 elements (float32 vectors first); a
    bug past 20000 elements of a[m,k] with v[k]; sizes()[dim()] past 1000
    elements or on a dimension of 1, at the vectors' own rank; a kernel
    that writes element 0 only, whose vector is 0-dimensional; a result one
    ulp off where the vector asks rtol 0, atol 0: each FALSIFIED, and each
    example, pasted under its op's vectors, fails the same way under scons
    test-ec. A reference that raises on the rank the kernel refuses
    (``x[:, 0]`` of a rank-1 x, ``accessor<float,2>``) is no bug."""
    proj = copy_built(built_project[0], tmp_path / "p")
    (proj / "ec").mkdir()
    for name in ("cases.cpp", "reference.py"):
        shutil.copy(ROOT / "tests" / "data" / "explore_cases" / name, proj / "ec" / name)
    manifest = proj / "ops.yaml"
    manifest.write_text(manifest.read_text() + _CASES)
    built = run_scons(proj, "-Q", "ec")
    assert "ec: 8 passed, 0 failed" in built.stdout.splitlines(), built.stdout + built.stderr
    proc = run_scons(proj, "-Q", "explore-ec", "EXPLORE_EXAMPLES=100")
    lines = _lines(proc)
    assert lines[-1] == "ec: 7 ops explored, 6 falsified", proc.stdout + proc.stderr
    assert "EXPLORED ec::rowfirst: 100 examples, every check passed" in lines
    falsified, examples = {}, {}
    for i, line in enumerate(lines):
        if line.startswith("FALSIFIED ec::"):
            op = line.split("::")[1].split(":")[0]
            falsified[op] = line
            examples[op] = lines[i + 1:lines.index("", i)]
    assert sorted(falsified) == ["big_bug", "f16_big", "first_only", "rows_bug", "rowscale",
                                 "ulp_off"], lines
    assert "IntArrayRef index 1 out of range (size 1)" in falsified["big_bug"]
    assert "IntArrayRef index 2 out of range (size 2)" in falsified["rows_bug"]
    assert "(rtol=0, atol=0)" in falsified["ulp_off"]
    assert examples["ulp_off"][-2:] == ["      rtol: 0.0", "      atol: 0.0"]
    text = manifest.read_text()
    for op, example in examples.items():
        text = text.replace(f"          # PASTE {op}\n", "".join(
            " " * 10 + line[4:] + "\n" for line in example))
    manifest.write_text(text)
    test = run_scons(proj, "-Q", "test-ec")
    fail = {l.split("::")[1].split("[")[0]: l for l in test.stdout.splitlines()
            if l.startswith("FAIL ")}
    assert sorted(fail) == sorted(falsified), test.stdout + test.stderr
    for op, line in falsified.items():
        head, tail = line.split(": ", 1)[1].split(" (explored)")
        assert re.fullmatch(re.escape(head) + r" \(ops\.yaml:\d+:\d+\)" + re.escape(tail),
                            fail[op]), (fail[op], line)
