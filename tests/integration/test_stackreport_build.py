"""The static stack report through the build: every shipped op reported
without warning, a 1 MiB frame printed as a WARNING line."""
import re


def test_shipped_collection_reports_every_op_without_warning(built_project):
    from gpsimd_build.manifest import load_manifest
    proj, proc = built_project
    assert proc.returncode == 0
    for lib in load_manifest(str(proj / "ops.yaml"), root=str(proj)).libraries:
        lines = (proj / "build/host" / lib.name / "stack-report.txt").read_text().splitlines()
        assert len(lines) == len(lib.ops)
        for line, op in zip(lines, lib.ops):
            # the op's name; the chain starts at its kernel function's wrapper
            assert line.startswith(f"{lib.name}::{op.name}: worst static stack chain "), line
            assert f" of 4196 ({op.function}_wrapper -> " in line
    assert "WARNING" not in proc.stdout


def test_a_one_mebibyte_frame_is_reported(built_project, tmp_path):
    from conftest import copy_built, run_scons
    proj = copy_built(built_project[0], tmp_path / "p")   # (its own copy: it builds in it)
    proc = run_scons(proj, "MANIFEST=kernels/broken/ops.yaml", "stack-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [l for l in proc.stdout.splitlines() if l.startswith("WARNING: ")]
    assert len(warnings) == 1, warnings
    m = re.match(r"WARNING: broken_memory::stack_overflow: worst static stack chain (\d+) bytes "
                 r"of 4196 \(stack_overflow_wrapper -> stack_overflow\b", warnings[0])
    assert m and 1 << 20 <= int(m.group(1)) < (1 << 20) + 8192, warnings[0]
    report = (proj / "build/host/broken_memory/stack-report.txt").read_text()
    assert warnings[0] in report.splitlines()


def test_every_frame_and_chain_is_gccs(built_project, tmp_path):
    """Issue 29: the report reads the one compile's objects; against GCC's
    own figures from a compile of each unit with -fstack-usage
    -fcallgraph-info=su (tests/stack_reference.py): every function's frame
    is GCC's, no frame is below it, every op's worst chain is the one GCC's
    graph gives, and the recompiled objects are the same bytes.
    (bench/stack_check.py runs the same on the generated 1,000-op
    collection: BENCHMARKS.md.)"""
    from conftest import copy_built, run_scons
    import stack_reference
    proj = copy_built(built_project[0], tmp_path / "p")
    proc = run_scons(proj, "-Q", "compiledb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "gcc").mkdir()
    r = stack_reference.compare(str(proj), str(tmp_path / "gcc"))
    assert r.functions > 300 and r.libraries == 8 and r.ops == 24     # every op
    assert (r.low, r.other, r.same_bytes, r.chains) == ([], [], [], [])
