"""`pip install .` (not editable) into a fresh virtual environment, then an
outside project built with the installed copy alone.

The environment sees this interpreter's packages (``--system-site-packages``
and, when the tests run in a virtual environment, a ``.pth`` file naming its
site-packages) so that nothing is downloaded: ``--no-deps
--no-build-isolation``. The source copy that was installed is deleted before
the build, so nothing can come from a checkout.
"""
import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys

import pytest

from conftest import NEGATE_KERNEL, ROOT

#: The source folders the package installs from, and where each lands
#: (pyproject.toml [tool.setuptools.package-dir]), with the files it carries.
INSTALLED = {
    "site_scons/gpsimd_build": ("gpsimd_build", (".py",)),
    "site_scons/site_tools": ("gpsimd_build/site_tools", (".py",)),
    "schema": ("gpsimd_build/schema", (".json",)),
    "runtime_model/gpsimd_device": ("gpsimd_device", (".py",)),
    "runtime_model/gpsimd_emu": ("gpsimd_emu", (".py", ".c", ".h")),
    "runtime_model/gpsimd_explore": ("gpsimd_explore", (".py",)),
    "runtime_model/include": ("gpsimd_device/include", (".h", ".hpp")),
    "runtime_model/src": ("gpsimd_device/src", (".cpp", ".h")),
    "site_scons/gpsimd_pytest": ("gpsimd_pytest", (".py",)),
}

KERNEL = NEGATE_KERNEL

MANIFEST = """\
version: 1
libraries:
  - name: outside
    sources: [src/negate.cpp]
    ops:
      - schema: "team::negate(Tensor x) -> Tensor"
        reference: numpy:negative
        vectors:
          - name: n11
            inputs:
              x: {dtype: float32, shape: [11], random: {distribution: normal}}
          - name: inline
            inputs:
              x: {dtype: float32, shape: [3], values: [-1, 0, 2.5]}
            expected: {values: [1, 0, -2.5]}
"""

#: The SConstruct docs/other-projects.md gives for another project, as it is
#: written there.
SCONSTRUCT = re.search(r"# Using the tool from another SCons project\n.*?```python\n(.*?)```",
                       (ROOT / "docs" / "other-projects.md").read_text(encoding="utf-8"),
                       re.S).group(1)


def _files(folder, suffixes):
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, _, names in os.walk(folder) for n in names if n.endswith(suffixes))


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtual environment with this project installed from a source
    copy that no longer exists; returns (python, site-packages, tmp)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "site_scons", "schema", "runtime_model"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)],
                   check=True, capture_output=True)
    python = env_dir / "bin" / "python"
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    purelib = os.path.realpath(out)
    if sys.prefix != sys.base_prefix:   # this interpreter is a venv: its packages too
        with open(os.path.join(purelib, "_gpsimd_test_runner.pth"), "w") as f:
            f.write("\n".join(site.getsitepackages()) + "\n")
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-deps",
                           "--no-build-isolation", "--no-index", str(src)],
                          capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shutil.rmtree(src)
    return python, purelib, tmp


def test_every_source_file_is_installed(venv):
    _, purelib, _ = venv
    expected = set()
    for source, (dest, suffixes) in INSTALLED.items():
        found = _files(ROOT / source, suffixes)
        assert found, source
        expected |= {os.path.join(dest, f) for f in found}
    suffixes = tuple({s for _, ss in INSTALLED.values() for s in ss})
    installed = {os.path.join(top, f) for top in ("gpsimd_build", "gpsimd_device", "gpsimd_emu",
                                                  "gpsimd_explore", "gpsimd_pytest")
                 for f in _files(os.path.join(purelib, top), suffixes)}
    assert sorted(installed) == sorted(expected)
    # the SConstruct gpsimd-build runs
    assert (ROOT / "site_scons/gpsimd_build/SConstruct").read_bytes() == \
        (pathlib.Path(purelib) / "gpsimd_build/SConstruct").read_bytes()


def test_installed_packages_and_console_script(venv):
    python, purelib, _ = venv
    code = ("import gpsimd_build, gpsimd_device, gpsimd_emu\n"
            "from gpsimd_build.manifest import SCHEMA_PATH\n"
            "from gpsimd_device.headers import INCLUDE_DIR\n"
            "print(gpsimd_build.__file__, gpsimd_device.__file__, gpsimd_emu.__file__)\n"
            "print(gpsimd_build.toolpath(), SCHEMA_PATH, INCLUDE_DIR)\n")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                         env=_clean_env(), cwd="/")
    assert out.returncode == 0, out.stderr
    files, places = [line.split() for line in out.stdout.splitlines()]
    assert files == [os.path.join(purelib, p, "__init__.py")
                     for p in ("gpsimd_build", "gpsimd_device", "gpsimd_emu")]
    assert places == [os.path.join(purelib, "gpsimd_build", "site_tools"),
                      os.path.join(purelib, "gpsimd_build", "schema", "ops.schema.json"),
                      os.path.join(purelib, "gpsimd_device", "include")]
    script = python.parent / "gpsimd-emu"
    proc = subprocess.run([str(script), "run", "--help"], capture_output=True, text=True,
                          env=_clean_env())
    assert proc.returncode == 0 and "--results" in proc.stdout, proc.stdout + proc.stderr
    # the importer of a torch-neuronx build.py: the manifest it prints
    # (not probed: that builds, in the sample's folder; test_import_probe.py)
    proc = subprocess.run([str(python.parent / "gpsimd-import"), "--no-probe",
                           str(ROOT / "tests/data/aws_like/build.py")],
                          capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "\nversion: 1\n" in proc.stdout and proc.stdout.endswith(
        "    ops:\n      - name: relu_forward\n      - name: relu_backward\n"
        "      - name: tensor_negate\n")


def test_an_outside_project_builds_with_the_installed_copy(venv):
    python, purelib, tmp = venv
    proj = tmp / "team_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "ops.yaml").write_text(MANIFEST)
    (proj / "SConstruct").write_text(SCONSTRUCT)
    proc = subprocess.run([str(python), "-m", "SCons", "-j2"], cwd=str(proj), capture_output=True,
                          text=True, env=_clean_env(), timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "PASS outside::negate[n11] (ops.yaml:9:13): max_abs_err 0 over 11 elements" in out
    assert "PASS outside::negate[inline] (ops.yaml:12:13): max_abs_err 0 over 3 elements" in out
    assert "all libraries: 2 passed, 0 failed" in proc.stdout
    res = json.loads((proj / "build/host/outside/test-results.json").read_text())
    assert (res["passed"], res["failed"]) == (2, 0)

    # the runtime compiled from the project's own mirror, by relative paths
    obj = (proj / "build/host/runtime/obj/device.o").read_bytes()
    assert b"build/host/runtime/src/device.cpp" in obj
    assert b"build/host/runtime/include" in (proj / "build/host/outside/obj/src/negate.o").read_bytes()

    # no output holds the install folder (or any part of the virtual
    # environment); SCons's own record (.sconsign) lists the programs and
    # emulator files the commands depend on by their absolute paths
    needles = [str(tmp / "venv").encode(), purelib.encode(), b"site-packages"]
    holding = []
    for folder, _, names in os.walk(proj):
        for name in names:
            path = os.path.join(folder, name)
            if name == ".sconsign.dblite":
                continue
            with open(path, "rb") as f:
                data = f.read()
            holding += [f"{os.path.relpath(path, proj)}: {n.decode()}" for n in needles if n in data]
    assert holding == []
    # (the check can fail: SCons's record does hold the path)
    with open(proj / "build/.sconsign.dblite", "rb") as f:
        assert purelib.encode() in f.read()

    # the console script runs the same plan with the same result
    proc = subprocess.run([str(python.parent / "gpsimd-emu"), "run",
                           "build/host/outside/testplan.json", "--results", str(tmp / "r.json")],
                          cwd=str(proj), capture_output=True, text=True, env=_clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "outside: 2 passed, 0 failed" in proc.stdout

    # gpsimd-build: the same build in a folder with no SConstruct (the
    # folder is the project root), SCons's own lines gone with QUIET=1
    fresh = tmp / "fresh_repo"
    (fresh / "src").mkdir(parents=True)
    (fresh / "src/negate.cpp").write_text(KERNEL)
    (fresh / "ops.yaml").write_text(MANIFEST)
    proc = subprocess.run([str(python.parent / "gpsimd-build"), "-j2", "QUIET=1"], cwd=str(fresh),
                          capture_output=True, text=True, env=_clean_env(), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["outside: 2 passed, 0 failed",
                                        "all libraries: 2 passed, 0 failed"], proc.stdout
    assert (fresh / "build/host/outside/test-results.json").read_bytes() == \
        (proj / "build/host/outside/test-results.json").read_bytes()
    # its ninja path: build.ninja regenerates itself from the same SConstruct
    # (read by SCons from its standard input) when the manifest changes
    proc = subprocess.run([str(python.parent / "gpsimd-build"), "--experimental=ninja", "-Q",
                           "BUILD_DIR=bn"], cwd=str(fresh), capture_output=True, text=True,
                          env=_clean_env(), timeout=900)
    assert proc.returncode == 0 and "all libraries: 2 passed, 0 failed" in proc.stdout, \
        proc.stdout + proc.stderr
    (fresh / "ops.yaml").write_text(MANIFEST.replace("name: n11", "name: n11b"))
    ninja_env = dict(_clean_env(), PATH=f"{python.parent}{os.pathsep}{_clean_env()['PATH']}")
    proc = subprocess.run(["ninja", "-f", "bn/build.ninja"], cwd=str(fresh), capture_output=True,
                          text=True, env=ninja_env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS outside::negate[n11b]" in proc.stdout, proc.stdout

    # the pytest plugin, loaded by its entry point: the same vectors as items
    pytest_cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider"]
    proc = subprocess.run(pytest_cmd + ["--gpsimd-manifest", "ops.yaml", "-rA"], cwd=str(proj),
                          capture_output=True, text=True, env=_clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED ops.yaml::outside::negate[n11]" in proc.stdout
    assert "PASS outside::negate[inline] (ops.yaml:12:13): max_abs_err 0 over 3 elements" \
        in proc.stdout
    # and without the option it collects nothing
    proc = subprocess.run(pytest_cmd + ["--collect-only", "-q"], cwd=str(proj),
                          capture_output=True, text=True, env=_clean_env(), timeout=600)
    assert proc.returncode == 5 and "negate" not in proc.stdout, proc.stdout + proc.stderr
