"""TOOLCHAIN=xtensa issues the driver's exact commands (the Neuron SDK's build driver, build_custom_op.py).

The vendor tools cannot run here: stand-ins (tests/standin/xt_standin.py)
record the argv of every call beside the file it writes, and each recorded
command is compared token by token with the command written from the spec.
"""
import json
import os
import pathlib

import pytest
import yaml

from conftest import action_lines, ROOT, copy_project, run_scons
from gpsimd_build.codegen import WrapperOp, emit_wrapper
from gpsimd_build.profiles import DEVICE_DIALECT

# the Neuron SDK's build driver, build_custom_op.py: CC_OPT, LINK_OPT + LINKING_LIBS, STRIP_OPT,
# written out from the driver's text, not from the code under test.
CC = ("xt-clang++ -g -std=c++14 -stdlib=libc++-e -fno-jump-tables -Os -Wall -Werror "
      "-Wno-c99-designator -mcoproc -MMD -MP -fpic -mlongcalls -c "
      "--xtensa-core={core} --xtensa-system={sys} {cflags}"
      "-I{root} -I{root}/torch/include -I{root}/c10/include {includes}-o {obj} {src}")
LINK = ("xt-clang++ -g -std=c++14 -stdlib=libc++-e -fno-jump-tables -Os -Wall -Werror "
        "-Wno-c99-designator -mcoproc --xtensa-core={core} --xtensa-system={sys} "
        "-I{root} -I{root}/torch/include -I{root}/c10/include -o {lib} {objs} "
        "{root}/neuron/libneuroncustomop.a {root}/c10/lib/libc10.a -lloader "
        "-mlsp={root}/lsp_fll_load_cpus/{lsp} -lxmem -lhal -lc++-e -lm -lgcc "
        "{root}/neuron/libcweak.a")
PACK = ("xt-pkg-loadlib -e lib_func --xtensa-core={core} --xtensa-system={sys} "
        "-o {base}.packed.so -s {base}.stripped.so {lib}")

DEFAULT = dict(core="ncore2gp", sys="/opt/aws/neuron/gpsimd/tools/ncore2gp/config",
               root="/opt/aws/neuron/gpsimd/custom_op")


@pytest.fixture(scope="module")
def standin_bin(tmp_path_factory):
    bindir = tmp_path_factory.mktemp("bin")
    for tool in ("xt-clang++", "xt-pkg-loadlib"):
        (bindir / tool).symlink_to(ROOT / "tests/standin/xt_standin.py")
    return bindir


def _env(bindir, **extra):
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "Q7_CORE": None, "Q7_TOOLS": None, "NEURON_CUSTOM_OP": None}
    env.update(extra)
    return env


def _argv(path: pathlib.Path):
    rec = json.loads(pathlib.Path(str(path) + ".argv.json").read_text())
    return [rec["tool"], *rec["argv"]]


def _toks(template, **kw):
    return template.format(**kw).split()


def _expect_library(proj, lib, facts, out="build/xtensa"):
    """Compare every recorded command of one manifest library with the spec."""
    name = lib["name"]
    d = proj / out / name
    cflags = "".join(f + " " for f in lib.get("cflags", []))
    includes = "".join(f"-I{i} " for i in lib.get("includes", []))
    objs = []
    for src in lib["sources"] + [f"{out}/{name}/wrapper.cpp"]:
        stem = "wrapper" if src.endswith("wrapper.cpp") else os.path.splitext(src)[0]
        obj = f"{out}/{name}/obj/{stem}.o"
        objs.append(obj)
        assert _argv(proj / obj) == _toks(CC, cflags=cflags, includes=includes,
                                          obj=obj, src=src, **facts)
        assert (proj / obj).with_suffix(".d").is_file()   # -MMD -MP
    if lib.get("multicore"):
        linked = [(f"{name}_cpu{i}", f"lsp_fll_load_cpu{i}") for i in range(8)]
    else:
        linked = [(name, "lsp_fll_load_cpu_single")]
    for base, lsp in linked:
        so = f"{out}/{name}/{base}.so"
        assert _argv(proj / so) == _toks(LINK, lib=so, objs=" ".join(objs), lsp=lsp, **facts)
        packed = proj / out / name / f"{base}.packed.so"
        if "-g" in lib.get("cflags", []):
            assert not packed.exists()
            assert not (proj / out / name / f"{base}.stripped.so").exists()
        else:
            b = f"{out}/{name}/{base}"
            assert _argv(packed) == _toks(PACK, base=b, lib=so, **facts)
            assert _argv(proj / f"{b}.stripped.so") == _argv(packed)
    return d


@pytest.fixture(scope="module")
def xtensa_project(tmp_path_factory, standin_bin):
    proj = copy_project(tmp_path_factory.mktemp("xt"))
    proc = run_scons(proj, "TOOLCHAIN=xtensa", env=_env(standin_bin))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj, proc


def test_shipped_collection_commands_match_the_spec(xtensa_project):
    proj, proc = xtensa_project
    manifest = yaml.safe_load((proj / "ops.yaml").read_text())
    for lib in manifest["libraries"]:
        _expect_library(proj, lib, DEFAULT)
    # nothing of the host profile is built or run
    assert not (proj / "build/host").exists()
    assert "TEST" not in proc.stdout


def test_device_wrapper_text(xtensa_project):
    proj, _ = xtensa_project
    text = (proj / "build/xtensa/scalar_args/wrapper.cpp").read_text()
    assert text == emit_wrapper([
        WrapperOp("add_scalar", ("Tensor", "Scalar")),
        WrapperOp("clamp_int", ("Tensor", "int", "int")),
        WrapperOp("offset_long", ("Tensor", "long long")),
    ], DEVICE_DIALECT)
    assert 'asm("j switchBack");' in text and "(uint32_t)add_scalar_wrapper" in text


def test_environment_overrides(tmp_path, standin_bin):
    proj = copy_project(tmp_path / "p")
    facts = dict(core="mycore", sys="/tools/cfg", root="/sdk/custom_op")
    proc = run_scons(proj, "TOOLCHAIN=xtensa", "spmd", "relu",
                     env=_env(standin_bin, Q7_CORE="mycore", Q7_TOOLS="/tools/cfg",
                              NEURON_CUSTOM_OP="/sdk/custom_op"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = yaml.safe_load((proj / "ops.yaml").read_text())
    libs = {lib["name"]: lib for lib in manifest["libraries"]}
    _expect_library(proj, libs["spmd"], facts)
    _expect_library(proj, libs["relu"], facts)


def test_q7_tools_follows_q7_core(tmp_path, standin_bin):
    proj = copy_project(tmp_path / "p")
    proc = run_scons(proj, "TOOLCHAIN=xtensa", "relu", env=_env(standin_bin, Q7_CORE="othercore"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lib = {"name": "relu", "sources": ["kernels/relu/relu.cpp"]}
    _expect_library(proj, lib, dict(DEFAULT, core="othercore",
                                    sys="/opt/aws/neuron/gpsimd/tools/othercore/config"))


def test_debug_cflags_skip_packing_and_single_core(tmp_path, standin_bin):
    proj = copy_project(tmp_path / "p")
    lib = {"name": "dbg", "multicore": True, "cflags": ["-g", "-DDEBUG_LEVEL=2"],
           "includes": ["kernels/spmd"], "sources": ["kernels/spmd/spmd.cpp"]}
    single = {"name": "one", "multicore": False, "sources": ["kernels/relu/relu.cpp"]}
    ops = {"dbg": ["my_ops::spmd_relu(Tensor x) -> Tensor"],
           "one": ["my_ops::relu_forward(Tensor x) -> Tensor"]}
    manifest = {"version": 1, "libraries": []}
    for spec in (lib, single):
        entry = dict(spec)
        entry["ops"] = [{"schema": s, "vectors": [{
            "name": "v", "inputs": {"x": {"dtype": "float32", "shape": [3], "values": [1, 2, 3]}},
            "expected": {"values": [1, 2, 3]}}]} for s in ops[spec["name"]]]
        manifest["libraries"].append(entry)
    (proj / "dbg.yaml").write_text(yaml.safe_dump(manifest))
    proc = run_scons(proj, "TOOLCHAIN=xtensa", "MANIFEST=dbg.yaml", env=_env(standin_bin))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _expect_library(proj, lib, DEFAULT)
    _expect_library(proj, single, DEFAULT)
    assert sorted(p.name for p in (proj / "build/xtensa/one").glob("*.so")) == [
        "one.packed.so", "one.so", "one.stripped.so"]


def test_missing_tools_one_line_error_and_no_outputs(tmp_path):
    proj = copy_project(tmp_path / "p")
    proc = run_scons(proj, "TOOLCHAIN=xtensa",
                     env={"PATH": "/usr/bin:/bin", "Q7_CORE": None})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "scons: Could not find xt-clang++"
    assert "Traceback" not in proc.stderr
    assert not (proj / "build").exists()


def test_missing_packer_alone(tmp_path, standin_bin):
    proj = copy_project(tmp_path / "p")
    bindir = tmp_path / "onlycc"
    bindir.mkdir()
    (bindir / "xt-clang++").symlink_to(ROOT / "tests/standin/xt_standin.py")
    proc = run_scons(proj, "TOOLCHAIN=xtensa",
                     env={"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "scons: Could not find xt-pkg-loadlib"
    assert not (proj / "build").exists()


def test_header_edit_rebuilds_exactly_its_includers(tmp_path, standin_bin):
    proj = copy_project(tmp_path / "p")
    (proj / "kernels/common").mkdir()
    (proj / "kernels/common/scale.h").write_text("#define SCALE 2\n")
    (proj / "kernels/a.cpp").write_text('#include "common/scale.h"\nint a() { return SCALE; }\n')
    (proj / "kernels/b.cpp").write_text("int b() { return 1; }\n")
    manifest = {"version": 1, "libraries": [{
        "name": "hdr", "includes": ["kernels"], "sources": ["kernels/a.cpp", "kernels/b.cpp"],
        "ops": [{"schema": "t::f(Tensor x) -> Tensor", "vectors": [{
            "name": "v", "inputs": {"x": {"dtype": "float32", "shape": [1], "values": [1]}},
            "expected": {"values": [1]}}]}]}]}
    (proj / "hdr.yaml").write_text(yaml.safe_dump(manifest))
    args = ("TOOLCHAIN=xtensa", "MANIFEST=hdr.yaml")
    assert run_scons(proj, *args, env=_env(standin_bin)).returncode == 0
    (proj / "kernels/common/scale.h").write_text("#define SCALE 3\n")
    proc = run_scons(proj, *args, "--debug=explain", env=_env(standin_bin))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compiled = sorted(target for kind, target in action_lines(proc.stdout) if kind == "CXX")
    assert compiled == ["build/xtensa/hdr/obj/kernels/a.o"]
