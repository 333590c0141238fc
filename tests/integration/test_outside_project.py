"""The tool used from another repository's SConstruct (toolpath=)."""
import json
import textwrap

from conftest import NEGATE_KERNEL, ROOT, run_scons

KERNEL = NEGATE_KERNEL


def _manifest(library: str, source: str, head: str = "") -> str:
    """A one-library manifest of the negate kernel at ``source``."""
    return f"version: 1\n{head}" + textwrap.dedent(f"""\
        libraries:
          - name: {library}
            sources: [{source}]
            ops:
              - schema: "team::negate(Tensor x) -> Tensor"
                reference: numpy:negative
                vectors:
                  - name: n11
                    inputs:
                      x: {{dtype: float32, shape: [11], random: {{distribution: normal}}}}
        """)


def test_outside_sconstruct_builds_and_tests_a_library(tmp_path):
    proj = tmp_path / "team_repo"
    (proj / "src").mkdir(parents=True)
    (proj / "src/negate.cpp").write_text(KERNEL)
    (proj / "manifest.yaml").write_text(_manifest("outside", "src/negate.cpp"))
    (proj / "SConstruct").write_text(textwrap.dedent(f"""\
        env = Environment(tools=["default", "gpsimd"],
                          toolpath=[{str(ROOT / "site_scons/site_tools")!r}])
        nodes = env.GpsimdCollection("manifest.yaml", build_dir="out")
        print("libraries:", sorted(nodes))
        """))
    proc = run_scons(proj, "test-outside")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "libraries: ['outside']" in out
    assert "PASS outside::negate[n11]" in out
    res = json.loads((proj / "out/host/outside/test-results.json").read_text())
    assert (res["passed"], res["failed"]) == (1, 0)
    # the checkout's runtime is mirrored into the build folder and compiled
    # from there: no output holds the checkout's path (SCons's own record
    # lists the files the commands depend on by their absolute paths)
    holding = [str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file()
               and p.name not in (".sconsign.dblite", "SConstruct")
               and str(ROOT).encode() in p.read_bytes()]
    assert holding == []
    # (the build folder, "out", is named "build" in every output)
    obj = (proj / "out/host/outside/obj/src/negate.o").read_bytes()
    assert b"build/host/runtime/include" in obj and b"out/host" not in obj
    # the alias of the library builds its loadable object
    proc = run_scons(proj, "-Q", "outside")
    assert proc.returncode == 0
    assert (proj / "out/host/outside/outside.packed.so").is_file()


def test_a_source_of_an_allowed_folder_outside_the_project(tmp_path):
    """Issue 28: a source outside the project (an allowed folder) builds to
    obj/outside/<its path past the ..>, not obj/__/..."""
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor/negate.cpp").write_text(KERNEL)
    proj = tmp_path / "ops"
    proj.mkdir()
    (proj / "ops.yaml").write_text(_manifest("vendored", "../vendor/negate.cpp",
                                             "allow_paths: [../vendor]\n"))
    (proj / "SConstruct").write_text(textwrap.dedent(f"""\
        env = Environment(tools=["default", "gpsimd"],
                          toolpath=[{str(ROOT / "site_scons/site_tools")!r}])
        env.GpsimdCollection("ops.yaml")
        """))
    proc = run_scons(proj, "test-vendored")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    objects = sorted(str(p.relative_to(proj / "build/host/vendored/obj"))
                     for p in (proj / "build/host/vendored/obj").rglob("*.o"))
    assert objects == ["outside/vendor/negate.o", "wrapper.o"]
    # and a shape source outside it likewise (one rule for both objects)
    (tmp_path / "vendor/shape.cpp").write_text(textwrap.dedent("""\
        #include <torch/torch.h>
        #include "torchneuron/register.h"
        torch::Tensor negate_shape(torch::Tensor x) {
            return torch::zeros(x.sizes(), torch::kFloat);
        }
        NEURON_LIBRARY(team, m) { m.def("negate", &negate_shape, "negate"); }
        """))
    text = (proj / "ops.yaml").read_text()
    (proj / "ops.yaml").write_text(text.replace(
        "sources: [../vendor/negate.cpp]",
        "sources: [../vendor/negate.cpp]\n    shape_sources: [../vendor/shape.cpp]"))
    proc = run_scons(proj, "test-vendored")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shapes = proj / "build/host/vendored/shapes/obj"
    assert [str(p.relative_to(shapes)) for p in shapes.rglob("*.o")] == ["outside/vendor/shape.o"]
