"""The local modules a reference imports (gpsimd_build.manifest.imports):
exact file sets for each form of import, found where the emulator's
reference loader finds them (the reference's folder, then the project's
root), never numpy or the standard library; in the collection's model,
its reads (the manifest cache) and the test's dependencies."""

import ast
import json
import os
import pathlib

import pytest

from gpsimd_build import testplan
from gpsimd_build.manifest import load_manifest, reads_still_hold
from gpsimd_build.manifest.imports import MAX_MODULES, Import, imports_of, local_modules
from gpsimd_build.manifest.paths import PathPolicy
from gpsimd_build.manifest.reads import Recorder


def write(root: pathlib.Path, files: dict) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_every_form_of_import_is_read():
    tree = ast.parse(
        "import numpy as np, a.b\n"
        "from c import d, e as f\n"
        "from . import g\n"
        "from ..h.i import j\n"
        "from k import *\n"
        "import importlib\n"
        "def fn():\n"
        "    import lazy\n"
        "    try:\n"
        "        import maybe\n"
        "    except ImportError:\n"
        "        pass\n"
        "    importlib.import_module('dyn.mod')\n"
        "    __import__('old')\n"
        "    importlib.import_module('.rel', 'pkg')\n"
        "    importlib.import_module('..up', package='pkg.sub')\n"
        "    importlib.import_module(name='kw')\n"
        "    importlib.import_module('..above', 'top')\n"
        "    importlib.import_module(name)\n"
        "from importlib import import_module as im\n"
        "im('aliased')\n"
        "__all__ = ['sub1', 'sub2']\n")
    assert sorted(imports_of(tree)) == sorted([
        Import(0, "numpy", ()), Import(0, "a.b", ()), Import(0, "c", ("d", "e")),
        Import(1, "", ("g",)), Import(2, "h.i", ("j",)), Import(0, "k", ()),
        Import(0, "importlib", ()), Import(0, "lazy", ()), Import(0, "maybe", ()),
        Import(0, "dyn.mod", ()), Import(0, "old", ()), Import(0, "pkg.rel", ()),
        Import(0, "pkg.up", ()), Import(0, "kw", ()), Import(0, "importlib", ("import_module",)),
        Import(0, "aliased", ()), Import(1, "", ("sub1", "sub2"))])



def test_the_documented_forms_under_any_name_and_constant_folded_are_read():
    """An alias of import_module by assignment, a concatenation of
    constants, ``__package__`` as the package, ``__import__``'s fromlist
    and level, and an annotated or extended ``__all__``."""
    tree = ast.parse(
        "import importlib\n"
        "im = importlib.import_module\n"
        "im('helpa')\n"
        "alias: object = __import__\n"
        "alias('viaalias')\n"
        "importlib.import_module('.' + 'sub', 'rpk')\n"
        "importlib.import_module('.own', __package__)\n"
        "__import__('sub2', globals(), locals(), ['FACTOR'], 1)\n"
        "__import__('a.b', fromlist=('c',), level=0)\n"
        "__import__(name='k' + 'w')\n"
        "importlib.import_module('x' + name)\n"
        "__all__: list = ['s1']\n"
        "__all__ += ['s2']\n")
    assert sorted(imports_of(tree)) == sorted([
        Import(0, "importlib", ()), Import(0, "helpa", ()), Import(0, "viaalias", ()),
        Import(0, "rpk.sub", ()), Import(1, "own", ()), Import(1, "sub2", ("FACTOR",)),
        Import(0, "a.b", ("c",)), Import(0, "kw", ()), Import(1, "", ("s1",)),
        Import(1, "", ("s2",))])


@pytest.mark.parametrize("init", [
    '__all__: list = ["sub"]\n',
    '__all__ = []\n__all__ += ["sub"]\n',
    'import importlib\nsub = importlib.import_module(".sub", __package__)\n',
    'import importlib\nsub = importlib.import_module("." + "sub", "rpk")\n',
    'sub = __import__("sub", globals(), locals(), ["FACTOR"], 1)\n'])
def test_a_package_s_computed_but_constant_submodule_is_found(tmp_path, init):
    write(tmp_path, {"k/ref.py": "from rpk import *\nimport rpk\n",
                     "k/rpk/__init__.py": init, "k/rpk/sub.py": "FACTOR = 1\n",
                     "k/rpk/other.py": ""})
    io = Recorder(str(tmp_path))
    assert local_modules(io, PathPolicy(io.root_real), io.root,
                         str(tmp_path / "k/ref.py")) == (
        ("k/rpk/__init__.py", "k/rpk/sub.py"), None)

#: A project: a reference in kernels/x importing each way.
PROJECT = {
    "kernels/x/ref.py": ("import numpy as np\n"
                         "import helpers, os\n"
                         "from pkg.mod import thing\n"
                         "from pkg import inner, missing\n"
                         "from ns.part import leaf\n"
                         "import importlib\n"
                         "def f(x):\n"
                         "    import lazy\n"
                         "    importlib.import_module('dyn')\n"
                         "    return x\n"),
    # a top-level module: its relative import fails when it runs
    "kernels/x/helpers.py": "from . import sibling\nFACTOR = 2\n",
    "kernels/x/sibling.py": "",
    "kernels/x/lazy.py": "import fastmod\n",
    "kernels/x/fastmod.cpython-311-x86_64-linux-gnu.so": "not parsed",
    "kernels/x/dyn.py": "",
    "kernels/x/unused.py": "",
    "helpers.py": "",                # the root's: what a later, lazy import finds
    "pkg/__init__.py": "from .inner import deep\nfrom .. import beyond\n",
    "pkg/mod.py": "from . import sib2\nfrom .sib2 import y\n",
    "pkg/sib2.py": "",
    "pkg/inner/__init__.py": "from ..mod import thing\n",
    "pkg/inner/deep.py": "",
    "pkg/unused.py": "",
    "ns/part/leaf.py": "import helpers\n",     # namespace packages: no __init__
}


@pytest.fixture
def io(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, PROJECT)
    return Recorder(str(tmp_path))


def found(io, **kw):
    return local_modules(io, PathPolicy(io.root_real), io.root, **kw)


def test_a_reference_file_s_local_modules_transitively(io):
    import importlib.machinery
    so = "kernels/x/fastmod.cpython-311-x86_64-linux-gnu.so"
    expected = {"helpers.py", "kernels/x/dyn.py", "kernels/x/helpers.py", "kernels/x/lazy.py",
                "ns/part/leaf.py", "pkg/__init__.py", "pkg/inner/__init__.py",
                "pkg/inner/deep.py", "pkg/mod.py", "pkg/sib2.py"}
    if os.path.basename(so)[len("fastmod"):] in importlib.machinery.EXTENSION_SUFFIXES:
        expected.add(so)       # (an extension module: a dependency, not read)
    assert found(io, file=io.absolute("kernels/x/ref.py")) == (tuple(sorted(expected)), None)


def test_a_module_reference_is_found_from_the_root_only(io):
    assert found(io, module="pkg.mod") == (("pkg/__init__.py", "pkg/inner/__init__.py",
                                            "pkg/inner/deep.py", "pkg/mod.py", "pkg/sib2.py"),
                                           None)
    assert found(io, module="numpy") == ((), None)
    assert found(io, module="helpers") == (("helpers.py",), None)


def test_a_package_wins_over_a_module_and_source_over_bytecode(io, tmp_path):
    write(tmp_path, {"kernels/y/ref.py": "import both, comp\n",
                     "kernels/y/both.py": "", "kernels/y/both/__init__.py": "",
                     "kernels/y/comp.py": "", "kernels/y/comp.pyc": ""})
    assert found(io, file=io.absolute("kernels/y/ref.py")) == (
        ("kernels/y/both/__init__.py", "kernels/y/comp.py"), None)


def test_a_module_that_leads_outside_the_project_is_a_problem_unless_allowed(io, tmp_path):
    """The reference imports ``far`` through a symbolic link in its folder:
    Python imports it, so an edit of the file it leads to must run the
    test again. Outside the allowed folders it cannot be a dependency (the
    trust model), so it is a problem naming it; allowed, a dependency."""
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "far.py").write_text("")
    os.symlink(outside / "far.py", tmp_path / "kernels/x/far.py")
    write(tmp_path, {"kernels/x/r2.py": "import far\n"})
    assert found(io, file=io.absolute("kernels/x/r2.py")) == (
        (), f"imports kernels/x/far.py, which is outside the project (resolved to "
            f"../{outside.name}/far.py): list its folder in allow_paths or ALLOW_PATHS= to make "
            "it a dependency of the test")
    policy = PathPolicy(io.root_real)
    policy.allow(os.path.realpath(outside))
    assert local_modules(io, policy, io.root, file=io.absolute("kernels/x/r2.py")) == (
        ("kernels/x/far.py",), None)


def test_too_many_local_modules_is_a_problem(io, tmp_path):
    names = [f"m{k}" for k in range(MAX_MODULES + 1)]
    write(tmp_path, {f"many/{n}.py": "" for n in names})
    write(tmp_path, {"many/ref.py": "".join(f"import {n}\n" for n in names)})
    assert found(io, file=io.absolute("many/ref.py")) == (
        (), f"imports more than {MAX_MODULES} local modules (MAX_MODULES)")


MANIFEST = """\
version: 1
libraries:
  - name: x
    sources: [kernels/x/k.cpp]
    ops:
      - schema: "my_ops::scale(Tensor x) -> Tensor"
        reference: kernels/x/ref.py:f
        vectors:
          - {name: a, inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}}
          - name: b
            inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}
            expected: {reference: "pkg.mod:thing"}
          - name: c
            inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}
            expected: {reference: "numpy:negative"}
"""


@pytest.fixture
def collection(io, tmp_path):
    write(tmp_path, {"kernels/x/k.cpp": "", "ops.yaml": MANIFEST})
    return load_manifest("ops.yaml")


def test_the_model_and_the_test_s_files_hold_them(collection):
    (lib,) = collection.libraries
    refs = [v.expected.reference for v in lib.ops[0].vectors]
    assert refs[0].imports == found(Recorder("."), file=os.path.abspath("kernels/x/ref.py"))[0]
    assert refs[1].imports == ("pkg/__init__.py", "pkg/inner/__init__.py",
                               "pkg/inner/deep.py", "pkg/mod.py", "pkg/sib2.py")
    assert refs[2].imports == ()
    assert testplan.plan_files(lib) == sorted(set(refs[0].imports) | {"kernels/x/ref.py"})
    # the plan carries them, for the emulator's check of what a reference loads
    plan = json.loads(testplan.library_plan(lib, [(None, "x", "x.so")]).dumps())
    assert [v["expected"]["reference"]["imports"] for v in plan["ops"][0]["vectors"]] == [
        list(r.imports) for r in refs]


@pytest.mark.parametrize("change", ["edit", "create", "remove", "package"])
def test_a_changed_local_module_loads_the_manifest_again(collection, tmp_path, change):
    assert reads_still_hold(collection.reads)
    kinds = {r.kind for r in collection.reads}
    assert {"reference", "module", "kind"} <= kinds
    if change == "edit":
        (tmp_path / "pkg/inner/deep.py").write_text("import more\n")
    elif change == "create":       # (a module now found where none was)
        (tmp_path / "kernels/x/numpy.py").write_text("")
    elif change == "remove":
        os.unlink(tmp_path / "kernels/x/lazy.py")
    else:                          # (a package now shadows the module)
        write(tmp_path, {"kernels/x/dyn/__init__.py": ""})
    assert not reads_still_hold(collection.reads)


def test_an_unrelated_file_keeps_the_reads(collection, tmp_path):
    (tmp_path / "kernels/x/unused.py").write_text("import helpers\n")
    (tmp_path / "notes.txt").write_text("")
    assert reads_still_hold(collection.reads)


def test_a_module_too_large_to_read_is_a_problem(io, tmp_path):
    """Python imports a module of any size: one the reading cannot read
    would leave what it imports (``beyond``) out of the test's
    dependencies, and an edit of that module out of the next build's
    tests (a stale PASS). So it is a problem, as a reference file too
    large to read is; a module that does not parse stays a dependency (the
    emulator's import of it fails)."""
    from gpsimd_build.manifest.probes import MAX_REFERENCE_BYTES
    large = "import beyond\n" + "#" * MAX_REFERENCE_BYTES + "\n"
    write(tmp_path, {"big/ref.py": "import large\n", "big/large.py": large,
                     "big/beyond.py": "", "bad/ref.py": "import broken\n",
                     "bad/broken.py": "import beyond\nthis is not python\n"})
    assert found(io, file=io.absolute("big/ref.py")) == (
        (), f"imports big/large.py, which cannot be read (is larger than {MAX_REFERENCE_BYTES} "
            f"bytes ({len(large)} bytes)): the modules it imports (the test's dependencies) "
            "cannot be found")
    assert found(io, file=io.absolute("bad/ref.py")) == (("bad/broken.py",), None)


def test_a_module_too_large_to_read_is_a_located_error(io, tmp_path):
    from gpsimd_build.manifest import ManifestError
    from gpsimd_build.manifest.probes import MAX_REFERENCE_BYTES
    large = "from consts import FLOOR\nTABLE = [\n" + "    0,\n" * (MAX_REFERENCE_BYTES // 6) \
        + "]\n"
    write(tmp_path, {"kernels/x/ref2.py": "import table\n\n\ndef f(x):\n    return x\n",
                     "kernels/x/table.py": large, "kernels/x/consts.py": "FLOOR = 0\n",
                     "kernels/x/k.cpp": "",
                     "ops.yaml": MANIFEST.replace("kernels/x/ref.py:f", "kernels/x/ref2.py:f")})
    with pytest.raises(ManifestError) as err:
        load_manifest("ops.yaml")
    assert str(err.value).splitlines() == [
        "ops.yaml:7:20: $.libraries[0].ops[0].reference: reference file 'kernels/x/ref2.py' "
        f"imports kernels/x/table.py, which cannot be read (is larger than {MAX_REFERENCE_BYTES} "
        f"bytes ({len(large)} bytes)): the modules it imports (the test's dependencies) cannot "
        "be found"]


def test_too_many_local_modules_is_a_located_error(io, tmp_path):
    from gpsimd_build.manifest import ManifestError
    names = [f"m{k}" for k in range(MAX_MODULES + 1)]
    write(tmp_path, {f"many/{n}.py": "" for n in names})
    write(tmp_path, {"many/ref.py": "".join(f"import {n}\n" for n in names)
                     + "def f(x):\n    return x\n",
                     "kernels/x/k.cpp": "",
                     "ops.yaml": MANIFEST.replace("kernels/x/ref.py:f", "many/ref.py:f")})
    with pytest.raises(ManifestError) as err:
        load_manifest("ops.yaml")
    assert str(err.value).splitlines() == [
        "ops.yaml:7:20: $.libraries[0].ops[0].reference: reference file 'many/ref.py' imports "
        f"more than {MAX_MODULES} local modules (MAX_MODULES)"]
