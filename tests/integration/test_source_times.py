"""A source replaced by another of the same modification time is seen on
the SCons path (docs/ninja.md: "the SCons path [compares] contents").

SCons's default ``--max-drift`` (two days) takes a source's stored content
signature without reading the file when its time is the one recorded and
more than two days old: a kernel or a reference replaced by one of other
content and the same time (``tar x`` of an archive made with fixed times,
a zip's 1980 times, ``cp -p``, ``rsync -a``) kept the old PASS.
"""
import os

from conftest import copy_project, run_scons

OLD = 1_700_000_000    # (2023: older than any max drift)


def _replace(path, old, new):
    """Edit ``path``, keeping its modification time."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert old in text
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    os.utime(path, (OLD, OLD))


def test_a_source_replaced_with_its_time_kept_runs_the_test_again(tmp_path):
    proj = copy_project(tmp_path / "proj")
    kernel = proj / "kernels/relu/relu.cpp"
    reference = proj / "kernels/relu/reference.py"
    for path in (kernel, reference):
        os.utime(path, (OLD, OLD))
    first = run_scons(proj, "relu")
    assert "relu: 10 passed, 0 failed" in first.stdout, first.stdout + first.stderr

    _replace(kernel, "t_in_acc[i] : 0.0f;", "t_in_acc[i] : 1.0f;")
    proc = run_scons(proj, "relu")
    assert proc.returncode != 0, proc.stdout
    assert "relu: 4 passed, 6 failed" in proc.stdout, proc.stdout + proc.stderr

    _replace(kernel, "t_in_acc[i] : 1.0f;", "t_in_acc[i] : 0.0f;")
    proc = run_scons(proj, "relu")
    assert "relu: 10 passed, 0 failed" in proc.stdout, proc.stdout + proc.stderr

    _replace(reference, "np.maximum(x, np.float32(0))", "np.maximum(x, np.float32(1))")
    proc = run_scons(proj, "relu")
    assert proc.returncode != 0, proc.stdout
    assert "relu: 6 passed, 4 failed" in proc.stdout, proc.stdout + proc.stderr
