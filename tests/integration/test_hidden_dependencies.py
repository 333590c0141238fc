"""What a build depends on beyond what SCons's scanners see: an edit to any
of it re-runs the test, which then FAILs, on the SCons path and on the
ninja path, never a stale PASS.

* Headers only the compiler finds: one a macro names (``#include
  FACTOR_HEADER``), one a flag forces in (``-include``, ``-imacros``), one
  in an include folder the library's ``cflags`` give (``-I``,
  ``-isystem``), one behind ``__has_include``. The compiler's depfile
  names each (``gpsimd_tool/depfiles.py``; ninja's ``deps = gcc``).
* Headers whose absence a compile depended on, as they appear: one a
  ``__has_include`` of a macro or of a name no ``#include`` gives probed
  for, one earlier in the search than a macro's ``#include`` found
  (``gpsimd_tool/probes.py``), a clean build from a cache included.
* Python modules a reference imports, transitively: a module beside a
  ``file.py`` reference, a package's modules reached from it, and the
  modules of a ``module:function`` reference
  (``gpsimd_build.manifest.imports``).
"""
import os
import shutil
import subprocess

import pytest

from conftest import copy_built, copy_project, run_scons

NINJA = os.path.join(pytest.importorskip("ninja").BIN_DIR, "ninja")
MANIFEST = "MANIFEST=deps.yaml"

FILES = {
    "kernels/deps/macro.cpp": (
        "#include <torch/torch.h>\n"
        "#define FACTOR_HEADER \"factor.h\"\n"
        "#include FACTOR_HEADER\n\n"
        "torch::Tensor scale_macro(const torch::Tensor& x) {\n"
        "    return torch::mul(x, FACTOR_F);\n"
        "}\n"),
    "kernels/deps/factor.h": "#define FACTOR_F 2.0f\n",
    "kernels/deps/flags.cpp": (
        "#include <torch/torch.h>\n"
        "#include <sysh.h>\n"                        # (-isystem kernels/deps/sys)
        "#include \"inch.h\"\n"                      # (-Ikernels/deps/inc)
        "#if __has_include(\"opt.h\")\n"
        "#include \"opt.h\"\n"
        "#else\n"
        "#define OPT_F 0.0f\n"
        "#endif\n\n"
        "torch::Tensor scale_flags(const torch::Tensor& x) {\n"
        "    return torch::add(torch::mul(x, FORCED_F), SYS_F + INC_F + OPT_F + MAC_F);\n"
        "}\n"),
    "kernels/deps/forced.h": "#define FORCED_F 2.0f\n",
    "kernels/deps/macros.h": "#define MAC_F 1.0f\n",
    "kernels/deps/sys/sysh.h": "#define SYS_F 0.5f\n",
    "kernels/deps/inc/inch.h": "#define INC_F 0.25f\n",
    "kernels/deps/opt.h": "#define OPT_F 0.125f\n",
    "kernels/deps/twice.cpp": (
        "#include <torch/torch.h>\n\n"
        "torch::Tensor twice(const torch::Tensor& x) {\n"
        "    return torch::mul(x, 2.0f);\n"
        "}\n"),
    "kernels/deps/reference.py": (
        "import numpy as np\n\n\n"
        "def scale_macro(x):\n"
        "    return (x * np.float32(2)).astype(np.float32)\n\n\n"
        "def scale_flags(x):\n"
        "    return (x * np.float32(2) + np.float32(1.875)).astype(np.float32)\n"),
    # a reference importing a module beside it, which imports a package's module
    "kernels/deps/pyref.py": (
        "import helpers\n\n\n"
        "def twice(x):\n"
        "    return (x * helpers.FACTOR + helpers.OFFSET).astype(x.dtype)\n"),
    "kernels/deps/helpers.py": "from refpkg.consts import OFFSET\nFACTOR = 2\n",
    "kernels/deps/refpkg/__init__.py": "",
    "kernels/deps/refpkg/consts.py": "OFFSET = 0\n",
    # a module:function reference, found from the root (namespace packages)
    "kernels/deps/modref.py": (
        "from . import modconsts\n\n\n"
        "def twice(x):\n"
        "    return (x * modconsts.FACTOR).astype(x.dtype)\n"),
    "kernels/deps/modconsts.py": "FACTOR = 2\n",
    # headers whose absence the compile depended on (ABSENT)
    "kernels/deps/hasinc.cpp": (
        "#include <torch/torch.h>\n"
        "#define OVERRIDE_H \"override.h\"\n"
        "#if __has_include(OVERRIDE_H)\n"
        "#include OVERRIDE_H\n"
        "#endif\n"
        "#ifndef OVR_F\n"
        "#define OVR_F 0.0f\n"
        "#endif\n\n"
        "torch::Tensor plus_hasinc(const torch::Tensor& x) {\n"
        "    return torch::add(x, OVR_F);\n"
        "}\n"),
    "kernels/deps/literal.cpp": (
        "#include <torch/torch.h>\n"
        "#if __has_include(\"extra.h\")\n"          # (no #include names it)
        "#define EXTRA_F 1.0f\n"
        "#else\n"
        "#define EXTRA_F 0.0f\n"
        "#endif\n\n"
        "torch::Tensor plus_literal(const torch::Tensor& x) {\n"
        "    return torch::add(x, EXTRA_F);\n"
        "}\n"),
    "kernels/deps/shadow.cpp": (
        "#include <torch/torch.h>\n"
        "#define SHADOW_H \"shadow.h\"\n"
        "#include SHADOW_H\n\n"                       # (-Ikernels/deps/later)
        "torch::Tensor plus_shadow(const torch::Tensor& x) {\n"
        "    return torch::add(x, SHADOW_F);\n"
        "}\n"),
    "kernels/deps/later/shadow.h": "#define SHADOW_F 0.0f\n",
    "kernels/deps/plus.py": (
        "import numpy as np\n\n\n"
        "def plus(x):\n"
        "    return x.astype(np.float32)\n"),
    "deps.yaml": (
        "version: 1\n"
        "libraries:\n"
        "  - name: macro\n"
        "    sources: [kernels/deps/macro.cpp]\n"
        "    ops:\n"
        "      - schema: \"deps::scale_macro(Tensor x) -> Tensor\"\n"
        "        reference: kernels/deps/reference.py:scale_macro\n"
        "        vectors:\n"
        "          - {name: v, inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}}\n"
        "  - name: flags\n"
        "    sources: [kernels/deps/flags.cpp]\n"
        "    cflags: [-include, kernels/deps/forced.h, -imacros, kernels/deps/macros.h,\n"
        "             -isystem, kernels/deps/sys, -Ikernels/deps/inc]\n"
        "    ops:\n"
        "      - schema: \"deps::scale_flags(Tensor x) -> Tensor\"\n"
        "        reference: kernels/deps/reference.py:scale_flags\n"
        "        vectors:\n"
        "          - {name: v, inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}}\n"
        "  - name: py\n"
        "    sources: [kernels/deps/twice.cpp]\n"
        "    ops:\n"
        "      - schema: \"deps::twice(Tensor x) -> Tensor\"\n"
        "        vectors:\n"
        "          - name: file\n"
        "            inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}\n"
        "            expected: {reference: kernels/deps/pyref.py:twice}\n"
        "          - name: module\n"
        "            inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}\n"
        "            expected: {reference: \"kernels.deps.modref:twice\"}\n"
        + "".join(
            f"  - name: {name}\n"
            f"    sources: [kernels/deps/{name}.cpp]\n"
            + ("    cflags: [-Ikernels/deps/later]\n" if name == "shadow" else "")
            + "    ops:\n"
            f"      - schema: \"deps::plus_{name}(Tensor x) -> Tensor\"\n"
            "        reference: kernels/deps/plus.py:plus\n"
            "        vectors:\n"
            "          - {name: v, inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}}\n"
            for name in ("hasinc", "literal", "shadow"))),
}

PASSED = "all libraries: 7 passed, 0 failed"
#: the FAIL line of an edit that adds 1 to the flags library's factor
FLAGS_PLUS_ONE = ("FAIL flags::scale_flags[v] (deps.yaml:18:13): 2 of 2 elements differ "
                  "(rtol=1.3e-06, atol=1e-05): [0] actual 4.875 expected 3.875, [1] actual "
                  "6.875 expected 5.875; max_abs_err 1")
#: each edit: (file, old, new, the FAIL line it gives)
EDITS = {
    "macro": ("kernels/deps/factor.h", "2.0f", "3.0f",
              "FAIL macro::scale_macro[v] (deps.yaml:9:13): 2 of 2 elements differ "
              "(rtol=1.3e-06, atol=1e-05): [0] actual 3 expected 2, [1] actual 6 expected 4; "
              "max_abs_err 2"),
    "include": ("kernels/deps/forced.h", "2.0f", "4.0f",
                "FAIL flags::scale_flags[v] (deps.yaml:18:13): 2 of 2 elements differ "
                "(rtol=1.3e-06, atol=1e-05): [0] actual 5.875 expected 3.875, [1] actual "
                "9.875 expected 5.875; max_abs_err 4"),
    "imacros": ("kernels/deps/macros.h", "1.0f", "2.0f", FLAGS_PLUS_ONE),
    "isystem": ("kernels/deps/sys/sysh.h", "0.5f", "1.5f", FLAGS_PLUS_ONE),
    "I": ("kernels/deps/inc/inch.h", "0.25f", "1.25f", FLAGS_PLUS_ONE),
    "has_include": ("kernels/deps/opt.h", "0.125f", "1.125f", FLAGS_PLUS_ONE),
    "module": ("kernels/deps/helpers.py", "FACTOR = 2", "FACTOR = 3",
               "FAIL py::twice[file] (deps.yaml:24:13): 2 of 2 elements differ "
               "(rtol=1.3e-06, atol=1e-05): [0] actual 2 expected 3, [1] actual 4 expected 6; "
               "max_abs_err 2"),
    "package": ("kernels/deps/refpkg/consts.py", "OFFSET = 0", "OFFSET = 1",
                "FAIL py::twice[file] (deps.yaml:24:13): 2 of 2 elements differ "
                "(rtol=1.3e-06, atol=1e-05): [0] actual 2 expected 3, [1] actual 4 expected 5; "
                "max_abs_err 1"),
    "module_reference": ("kernels/deps/modconsts.py", "FACTOR = 2", "FACTOR = 3",
                         "FAIL py::twice[module] (deps.yaml:27:13): 2 of 2 elements differ "
                         "(rtol=1.3e-06, atol=1e-05): [0] actual 2 expected 3, [1] actual 4 "
                         "expected 6; max_abs_err 2"),
}
def _plus_one(lib, line):
    return (f"FAIL {lib}::plus_{lib}[v] (deps.yaml:{line}:13): 2 of 2 elements differ "
            "(rtol=1.3e-06, atol=1e-05): [0] actual 2 expected 1, [1] actual 3 expected 2; "
            "max_abs_err 1")


#: a header whose absence (or place in the search) the compile depended on,
#: as it appears: (file, its text, the library, the FAIL line it gives)
ABSENT = {
    "has_include_of_a_macro": ("kernels/deps/override.h", "#define OVR_F 1.0f\n", "hasinc",
                               _plus_one("hasinc", 36)),
    "has_include_literal": ("kernels/deps/extra.h", "\n", "literal", _plus_one("literal", 43)),
}


@pytest.fixture(scope="module", autouse=True)
def _ccache_preprocessor_mode():
    """The session's ccache (tests/conftest.py) in its preprocessor mode:
    its direct mode, by its own documented caveat, hands back an object
    compiled before a header that a ``__has_include`` probed for, or that
    comes earlier in the search, appeared (ccache/ccache#811)."""
    saved = os.environ.get("CCACHE_NODIRECT")
    os.environ["CCACHE_NODIRECT"] = "1"
    yield
    if saved is None:
        os.environ.pop("CCACHE_NODIRECT", None)
    else:
        os.environ["CCACHE_NODIRECT"] = saved


def _project(top):
    proj = copy_project(top)
    for path, text in FILES.items():
        (proj / path).parent.mkdir(parents=True, exist_ok=True)
        (proj / path).write_text(text)
    return proj


def _edit(proj, path, old, new):
    text = (proj / path).read_text()
    assert old in text, (path, old)
    (proj / path).write_text(text.replace(old, new, 1))


def _fail_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith("FAIL ")]


@pytest.fixture(scope="module")
def scons_built(tmp_path_factory):
    """The module's SCons build; each test changes a copy of it."""
    proj = _project(tmp_path_factory.mktemp("deps"))
    proc = run_scons(proj, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr
    return proj


def ninja(proj, check=None):
    proc = subprocess.run([NINJA, "-f", "build/build.ninja"], cwd=str(proj), capture_output=True,
                          text=True, timeout=900)
    if check is not None:
        assert (proc.returncode == 0) == check, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def ninja_built(tmp_path_factory):
    """The module's ninja build (its folder) and a copy of it as built."""
    top = tmp_path_factory.mktemp("deps-ninja")
    proj = _project(top / "p")
    proc = run_scons(proj, "-Q", "--experimental=ninja", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr
    return proj, copy_built(proj, top / "as-built")


@pytest.fixture
def scons_project(scons_built, tmp_path):
    """This test's copy of the module's SCons build."""
    return copy_built(scons_built, tmp_path / "scons")


@pytest.fixture
def ninja_project(ninja_built):
    """The module's ninja build, this test's own: restored as built in the
    folder it was built in (build.ninja holds absolute paths: a copy
    elsewhere would regenerate, and import the build's code, there); the
    module's tests run one after another."""
    proj, as_built = ninja_built
    shutil.rmtree(proj)
    shutil.copytree(as_built, proj, symlinks=True)
    return proj


@pytest.mark.parametrize("case", list(EDITS))
def test_an_edit_the_scanners_do_not_see_fails_the_scons_build(scons_project, case):
    """The edit FAILs its vector; undone, the build PASSes again."""
    path, old, new, line = EDITS[case]
    _edit(scons_project, path, old, new)
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode != 0, proc.stdout
    assert _fail_lines(proc.stdout) == [line], proc.stdout
    _edit(scons_project, path, new, old)
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr


@pytest.mark.parametrize("case", list(EDITS))
def test_an_edit_the_scanners_do_not_see_fails_the_ninja_build(ninja_project, case):
    """The same on the ninja path."""
    path, old, new, line = EDITS[case]
    _edit(ninja_project, path, old, new)
    proc = ninja(ninja_project, check=False)
    assert _fail_lines(proc.stdout) == [line], proc.stdout
    _edit(ninja_project, path, new, old)
    proc = ninja(ninja_project, check=True)
    assert PASSED in proc.stdout.splitlines(), proc.stdout


@pytest.mark.parametrize("case", list(ABSENT))
def test_a_header_that_appears_fails_the_scons_build(scons_project, case):
    """A header the compile looked for and did not find (``__has_include``
    of a macro or of a name no ``#include`` line gives), or found later in
    its search than the new one (a macro's ``#include``), appears: the
    build FAILs (``probes.py``); removed, it PASSes again. (After a build
    that settles the first: it compiles again what read a header only its
    depfile names.)"""
    path, text, _, line = ABSENT[case]
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr
    (scons_project / path).write_text(text)
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode != 0 and _fail_lines(proc.stdout) == [line], proc.stdout
    (scons_project / path).unlink()
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr


@pytest.mark.parametrize("case", list(ABSENT))
def test_a_header_that_appears_fails_the_ninja_build(ninja_project, case):
    """The same on the ninja path (a compile depends on the folders its
    search reaches)."""
    path, text, _, line = ABSENT[case]
    (ninja_project / path).write_text(text)
    proc = ninja(ninja_project, check=False)
    assert _fail_lines(proc.stdout) == [line], proc.stdout
    (ninja_project / path).unlink()
    proc = ninja(ninja_project, check=True)
    assert PASSED in proc.stdout.splitlines(), proc.stdout


def test_a_clean_build_from_a_cache_never_takes_an_object_built_without_a_new_header(tmp_path):
    """Built twice with a cache (the second build pushes what the first
    could not), then headers the compiles probed for and did not find
    appear: a clean build with the cache takes neither object (one probed
    through a macro: never cached; a literal probe: in the key) and FAILs
    both vectors."""
    proj = _project(tmp_path / "p")
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    for _ in range(2):
        proc = run_scons(proj, "-Q", MANIFEST, cache)
        assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout
    cases = [ABSENT["has_include_of_a_macro"], ABSENT["has_include_literal"]]
    for path, text, _, _ in cases:
        (proj / path).write_text(text)
    shutil.rmtree(proj / "build")
    proc = run_scons(proj, "-Q", "-k", MANIFEST, cache)
    assert proc.returncode != 0, proc.stdout
    assert sorted(_fail_lines(proc.stdout)) == [c[3] for c in cases], proc.stdout
    assert "Retrieved `build/host/py/obj/kernels/deps/twice.o' from cache" in proc.stdout
    for _, _, lib, _ in cases:
        assert f"Retrieved `build/host/{lib}/obj/kernels/deps/{lib}.o'" not in proc.stdout


REMOVED = ("FAIL py::twice[file] (deps.yaml:24:13): reference kernels/deps/pyref.py cannot be "
           "imported: ModuleNotFoundError: No module named 'helpers' "
           "(at kernels/deps/pyref.py:1)")


@pytest.mark.parametrize("path", ["scons", "ninja"])
def test_a_removed_module_runs_the_test_again(request, path, tmp_path):
    """The module a reference imports is removed: the test runs again and
    fails (on the ninja path build.ninja regenerates without it, and the
    list of the test's files, a source of the test, changes); put back,
    the build PASSes again."""
    proj = request.getfixturevalue(f"{path}_project")
    helpers = proj / "kernels/deps/helpers.py"
    kept = tmp_path / "helpers.py"
    shutil.move(str(helpers), str(kept))
    proc = run_scons(proj, "-Q", MANIFEST) if path == "scons" else ninja(proj)
    assert proc.returncode != 0 and _fail_lines(proc.stdout) == [REMOVED], proc.stdout
    shutil.move(str(kept), str(helpers))
    if path == "ninja":     # (a module that appears is seen once build.ninja
        os.utime(proj / "kernels/deps/pyref.py")    # regenerates: docs/ninja.md)
    proc = run_scons(proj, "-Q", MANIFEST) if path == "scons" else ninja(proj)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout
    assert "kernels/deps/helpers.py\n" in (proj / "build/host/py/test-inputs.txt").read_text()


def test_a_header_removed_with_its_include_builds(scons_project, tmp_path):
    """The header and the #include that named it are removed: the next
    build compiles without it (its object's last depfile still names it),
    and PASSes; restored, it builds again."""
    source, header = scons_project / "kernels/deps/macro.cpp", scons_project / "kernels/deps/factor.h"
    text = source.read_text()
    shutil.move(str(header), str(tmp_path / "factor.h"))
    source.write_text(text.replace('#define FACTOR_HEADER "factor.h"\n#include FACTOR_HEADER\n',
                                   "#define FACTOR_F 2.0f\n"))
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr
    shutil.move(str(tmp_path / "factor.h"), str(header))
    source.write_text(text)
    proc = run_scons(scons_project, "-Q", MANIFEST)
    assert proc.returncode == 0 and PASSED in proc.stdout.splitlines(), proc.stdout + proc.stderr


def _rebuilt(proj, *args):
    proc = run_scons(proj, "-Q", "--debug=explain", MANIFEST, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sorted(line.split("`")[1].split("'")[0] for line in proc.stdout.splitlines()
                  if line.startswith("scons: rebuilding `")
                  and not line.endswith("locations.json' because"))


def test_only_a_compile_that_probes_compiles_again_then_nothing_after_it(tmp_path):
    """After a clean build, the flags' headers and the literal probe's
    (``__has_include("opt.h")``, ``("extra.h")``) are known from the first
    build on; a macro's ``#include`` from the second (its depfile names
    it: the object compiles once more); the object whose compile depends
    on a header's absence that no scanner can name (``__has_include`` of a
    macro: ``probes.py``) compiles on every build, and nothing after it
    (its bytes are the same). Every library is in the record of inputs
    once settled: a probing one too, or the pytest plugin failed its
    vectors after every build (found in review)."""
    from gpsimd_build import freshness
    proj = _project(tmp_path / "p")
    proc = run_scons(proj, "-Q", MANIFEST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = proj / "build/host" / freshness.RECORD_NAME
    obj = "build/host/{0}/obj/kernels/deps/{0}.o".format
    assert _rebuilt(proj) == [obj(lib) for lib in ("hasinc", "macro", "shadow")]
    assert _rebuilt(proj) == [obj("hasinc")]
    assert _rebuilt(proj) == [obj("hasinc")]
    assert set(freshness.read_record(str(record)).libraries) == {
        freshness.ZYGOTE_ENTRY, "flags", "py", "literal", "hasinc", "macro", "shadow"}


def test_a_clean_build_from_a_cache_never_takes_an_object_of_another_header(tmp_path):
    """A build cache's key holds what SCons knew before the compile: an
    object whose compile read a header only the depfile names is not
    pushed until a build knows it, so a clean build with that header
    edited compiles, and fails."""
    proj = _project(tmp_path / "p")
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    proc = run_scons(proj, "-Q", MANIFEST, cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path, old, new, line = EDITS["macro"]
    _edit(proj, path, old, new)
    shutil.rmtree(proj / "build")
    proc = run_scons(proj, "-Q", MANIFEST, cache)
    assert proc.returncode != 0 and _fail_lines(proc.stdout) == [line], proc.stdout
    assert "Retrieved `build/host/macro/obj/kernels/deps/macro.o'" not in proc.stdout


def test_a_pack_built_alone_on_the_ninja_path_leaves_no_summary(ninja_project):
    """``ninja build/host/py/py.packed.so`` after py's kernel changed made
    the packs, ran no test, and left ``all libraries: 7 passed`` in
    test-summary.txt (found in review): the pack step removes the summary
    and the report first, as a test run does."""
    summary = ninja_project / "build/host/test-summary.txt"
    report = ninja_project / "build/host/report.html"
    assert summary.read_text().splitlines()[-1] == "all libraries: 7 passed, 0 failed"
    _edit(ninja_project, "kernels/deps/twice.cpp", "2.0f", "3.0f")
    proc = subprocess.run([NINJA, "-f", "build/build.ninja", "build/host/py/py.packed.so"],
                          cwd=str(ninja_project), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "py.packed.so" in proc.stdout, proc.stdout + proc.stderr
    assert not summary.exists() and not report.exists()
