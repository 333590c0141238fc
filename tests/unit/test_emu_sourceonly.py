"""A reference and the project's modules it imports are compiled from
their source at every run (gpsimd_emu.sourceonly): an edit that keeps a
file's size within the second of the bytecode cache's record runs the new
code, where a plain import runs the old; a package outside the project's
folders keeps its cache; built-in modules keep their precedence; a
project module a reference loads that the plan does not count among its
imports (a computed import) fails it."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOAD = """
import sys
from gpsimd_device.plan import ReferenceSpec
from gpsimd_emu.sourceonly import load_reference
f = load_reference(ReferenceSpec({file!r}, None, "f"))
print(f(1), load_reference(ReferenceSpec(None, "modref", "f"))(1))
"""


def _python(code: str, cwd) -> str:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)            # (caches are written, as in a build)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "runtime_model"),
                                         os.path.join(ROOT, "site_scons")])
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _same_second_edit(path, old: str, new: str) -> None:
    """``old`` -> ``new`` (same length) in ``path``, its time kept to the second."""
    st = os.stat(path)
    text = path.read_text()
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new))
    second = st.st_mtime_ns - st.st_mtime_ns % 10**9
    os.utime(path, ns=(st.st_atime_ns, second + (st.st_mtime_ns + 1) % 10**9))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "k/ref.py").write_text("import helpers\ndef f(x):\n    return x * helpers.F\n")
    (tmp_path / "k/helpers.py").write_text("F = 2\n")
    (tmp_path / "modref.py").write_text("from pkg import c\ndef f(x):\n    return x + c.C\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/c.py").write_text("C = 10\n")
    for path in ("k/ref.py", "k/helpers.py", "modref.py", "pkg/c.py"):
        os.utime(tmp_path / path, ns=(10**18, 10**18 + 100))     # (one second for all)
    return tmp_path


def test_an_edit_within_the_cached_second_runs_the_new_code(project):
    # a plain import writes the caches (as a user's own run of the module would)
    assert _python("import sys; sys.path.insert(0, 'k'); import helpers, modref; "
                   "print(helpers.F, modref.f(1))", project) == "2 11"
    assert _python(LOAD.format(file="k/ref.py"), project) == "2 11"
    _same_second_edit(project / "k/helpers.py", "F = 2", "F = 3")
    _same_second_edit(project / "pkg/c.py", "C = 10", "C = 20")
    # (a plain import still takes the caches: the case this guards against)
    assert _python("import sys; sys.path.insert(0, 'k'); import helpers, modref; "
                   "print(helpers.F, modref.f(1))", project) == "2 11"
    assert _python(LOAD.format(file="k/ref.py"), project) == "3 21"


def test_only_the_project_s_folders_are_compiled_from_source(project, tmp_path):
    builtin = _python("import sys; print(next(n for n in sorted(sys.builtin_module_names) "
                      "if n not in sys.modules and not n.startswith('_')))", project)
    (project / f"k/{builtin}.py").write_text("")      # (never shadows the built-in module)
    (project / "venv").mkdir()
    (project / "venv/installed.py").write_text("")
    code = ("import importlib, sys, os\n"
            "sys.path[:0] = [os.path.abspath('venv'), 'k']\n"
            "from gpsimd_emu import sourceonly\n"
            "sourceonly.local_folder('k', '.')\n"
            f"import helpers, installed, {builtin}\n"
            "print(type(helpers.__loader__).__name__, type(installed.__loader__).__name__,\n"
            f"      {builtin}.__spec__.origin)\n")
    assert _python(code, project) == "SourceOnlyLoader SourceFileLoader built-in"


def test_two_references_import_the_modules_of_their_own_folders(tmp_path):
    """kernels a/ and b/ each hold a ``helpers`` module, with different
    factors: each reference, loaded in one process, gets its own (the
    second is not judged against the first's ``helpers``)."""
    for folder, factor in (("a", 2), ("b", 3)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ref.py").write_text(
            "import helpers\ndef f(x):\n    return x * helpers.F\n")
        (tmp_path / folder / "helpers.py").write_text(f"F = {factor}\n")
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   "a = load_reference(ReferenceSpec('a/ref.py', None, 'f'))\n"
                   "b = load_reference(ReferenceSpec('b/ref.py', None, 'f'))\n"
                   "print(a(1), b(1), a(1))\n", tmp_path) == "2 3 2"


def test_a_module_no_other_folder_shadows_stays_loaded(tmp_path):
    """A reference that imports its module at load and again as it runs
    (its folder is on sys.path only while it loads) still finds it after a
    reference of another folder, which has no module of that name, loads."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a/ref.py").write_text("import consts\n"
                                       "def f(x):\n    import consts\n    return x * consts.F\n")
    (tmp_path / "a/consts.py").write_text("F = 2\n")
    (tmp_path / "b/ref.py").write_text("def f(x):\n    return x * 3\n")
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   "a = load_reference(ReferenceSpec('a/ref.py', None, 'f'))\n"
                   "b = load_reference(ReferenceSpec('b/ref.py', None, 'f'))\n"
                   "print(a(1), b(1))\n", tmp_path) == "2 3"


def test_a_folder_s_module_is_its_own_after_a_subfolder_s_of_that_name(tmp_path):
    """The root holds ``helpers`` (F = 2) and so does kernels/b (F = 3): a
    reference of the root, loaded after one of kernels/b, gets the root's,
    and kernels/b's gets its own again (a module under the root, of any
    subfolder, is not the root's module of that name)."""
    (tmp_path / "kernels/b").mkdir(parents=True)
    for folder, factor in (("", 2), ("kernels/b/", 3)):
        (tmp_path / f"{folder}ref.py").write_text("import helpers\ndef f(x):\n    return x * helpers.F\n")
        (tmp_path / f"{folder}helpers.py").write_text(f"F = {factor}\n")
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   "b = load_reference(ReferenceSpec('kernels/b/ref.py', None, 'f'))\n"
                   "root = load_reference(ReferenceSpec('ref.py', None, 'f'))\n"
                   "print(b(1), root(1), b(1))\n", tmp_path) == "3 2 3"


def test_an_import_as_a_reference_runs_finds_its_own_folder_s_module(tmp_path):
    """A reference that imports ``helpers`` only as it runs gets its own
    folder's, alone (its folder is on ``sys.path`` while it runs) and after
    a reference of another folder loaded a ``helpers`` of its own."""
    for folder, factor, ref in (("a", 2, "def f(x):\n    import helpers\n    return x * helpers.F\n"),
                                ("b", 3, "import helpers\ndef f(x):\n    return x * helpers.F\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ref.py").write_text(ref)
        (tmp_path / folder / "helpers.py").write_text(f"F = {factor}\n")
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   "a = load_reference(ReferenceSpec('a/ref.py', None, 'f'))\n"
                   "alone = a(1)\n"
                   "b = load_reference(ReferenceSpec('b/ref.py', None, 'f'))\n"
                   "print(alone, b(1), a(1), b(1))\n", tmp_path) == "2 3 2 3"


COUNTED = """
from gpsimd_device.plan import PlanError, ReferenceSpec
from gpsimd_emu.sourceonly import load_reference
def run(file, imports, module=None):
    try:
        return load_reference(ReferenceSpec(file, module, "f", imports))(1)
    except PlanError as e:
        return str(e)
"""

FIX = ("which the build cannot see as a dependency (a computed import): an edit to it would "
       "not run this test again; import it with a plain import statement (docs/manifest.md)")


def test_a_module_loaded_by_a_computed_name_fails_its_reference(tmp_path):
    """As the reference loads (find_spec and exec_module, which no scanner
    follows) or as it runs (a computed name), and for a module reference:
    a project module the plan does not count fails the reference, naming
    it; counted, or in a plan without counts, it runs."""
    (tmp_path / "k").mkdir()
    (tmp_path / "k/helpa.py").write_text("F = 2\n")
    (tmp_path / "k/load.py").write_text(
        "import importlib.util\n_s = importlib.util.find_spec('helpa')\n"
        "_h = importlib.util.module_from_spec(_s)\n_s.loader.exec_module(_h)\n"
        "def f(x):\n    return x * _h.F\n")
    (tmp_path / "k/call.py").write_text(
        "import importlib\nN = 'helpa'\ndef f(x):\n    return x * importlib.import_module(N).F\n")
    (tmp_path / "modref.py").write_text(
        "import importlib\nN = 'pkg.c'\nC = importlib.import_module(N).C\ndef f(x):\n    return x + C\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/c.py").write_text("C = 10\n")
    out = _python(COUNTED + "for case in ([('k/load.py', ())], [('k/call.py', ())],\n"
                  "             [(None, ('modref.py',), 'modref')], [('k/load.py', None)],\n"
                  "             [('k/call.py', ('k/helpa.py',))]):\n"
                  "    print(run(*case[0]))\n", tmp_path).splitlines()
    assert out == [f"reference k/load.py:f imported k/helpa.py, {FIX}",
                   f"reference k/call.py:f imported k/helpa.py, {FIX}",
                   f"reference modref:f imported pkg/__init__.py, pkg/c.py, {FIX}",
                   "2", "2"]


def test_a_module_an_earlier_reference_loaded_is_caught_when_reached_by_name(tmp_path):
    """``helpa`` is in ``sys.modules`` already, loaded by a reference that
    imports it plainly (counted): another reference of the folder that
    reaches it by a computed name, with no loader call of its own, still
    fails; the first still runs."""
    (tmp_path / "k").mkdir()
    (tmp_path / "k/helpa.py").write_text("F = 2\n")
    (tmp_path / "k/plain.py").write_text("import helpa\ndef f(x):\n    return x * helpa.F\n")
    (tmp_path / "k/dyn.py").write_text(
        "import importlib\nN = 'helpa'\ndef f(x):\n    return x * importlib.import_module(N).F\n")
    out = _python(COUNTED + "print(run('k/plain.py', ('k/helpa.py',)))\n"
                  "print(run('k/dyn.py', ()))\nprint(run('k/plain.py', ('k/helpa.py',)))\n",
                  tmp_path).splitlines()
    assert out == ["2", f"reference k/dyn.py:f imported k/helpa.py, {FIX}", "2"]


def test_namespace_packages_and_aliased_modules_are_each_reference_s_own(tmp_path):
    """Folders x and y each hold a namespace package ``nsp`` (no
    ``__init__``) with a ``mod``, and y's reference also imports a
    ``legacy`` that x's package registered under that name in
    ``sys.modules``: each reference gets its own (the namespace package and
    the alias were shared, so y's reference computed with x's modules)."""
    for folder, k in (("x", 1), ("y", 2)):
        (tmp_path / folder / "nsp").mkdir(parents=True)
        (tmp_path / folder / "nsp" / "mod.py").write_text(f"K = {k}\n")
    (tmp_path / "x" / "pkg").mkdir()
    (tmp_path / "x" / "pkg" / "__init__.py").write_text(
        "import sys\nfrom . import impl\nsys.modules['legacy'] = impl\n")
    (tmp_path / "x" / "pkg" / "impl.py").write_text("L = 10\n")
    (tmp_path / "y" / "legacy.py").write_text("L = 20\n")
    (tmp_path / "x" / "ref.py").write_text(
        "import pkg\nfrom nsp import mod\ndef f(v):\n    return v * mod.K + pkg.impl.L\n")
    (tmp_path / "y" / "ref.py").write_text(
        "from nsp import mod\nimport legacy\ndef f(v):\n    return v * mod.K + legacy.L\n")
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   "x = load_reference(ReferenceSpec('x/ref.py', None, 'f'))\n"
                   "y = load_reference(ReferenceSpec('y/ref.py', None, 'f'))\n"
                   "print(x(1), y(1), x(1))\n", tmp_path) == "11 22 11"


def test_a_reference_finds_the_project_s_root_modules_from_any_folder(tmp_path):
    """The plugin may run from another folder (``--gpsimd-build-dir``): a
    reference's root modules are found from the project's root, not from
    the folder the process runs in."""
    (tmp_path / "proj" / "k").mkdir(parents=True)
    (tmp_path / "proj" / "common.py").write_text("F = 5\n")
    (tmp_path / "proj" / "k" / "ref.py").write_text(
        "import common\ndef f(v):\n    return v * common.F\n")
    (tmp_path / "elsewhere").mkdir()
    assert _python("from gpsimd_device.plan import ReferenceSpec\n"
                   "from gpsimd_emu.sourceonly import load_reference\n"
                   f"f = load_reference(ReferenceSpec('k/ref.py', None, 'f'), {str(tmp_path / 'proj')!r})\n"
                   "print(f(2))\n", tmp_path / "elsewhere") == "10"
