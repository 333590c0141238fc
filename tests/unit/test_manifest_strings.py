"""What a manifest's names, strings and numbers may be (the hostile
manifests of issue 17): a library named as a target or folder of the
build's own, a ``$`` (or another character SCons, ninja or a shell would
read) in a string that reaches a command, a float literal for an integer
dtype that is not the number written, a literal that overflows to inf,
names without a length bound, patterns whose ``$`` let a newline through,
two sources that make one object, non-finite tolerances, an include whose
name has glob characters, explore ranges outside an argument's dtype.
Each is a located error (never a traceback, a silent change or a PASS).
"""

import ast
import json
import pathlib
import re
import types

import pytest

from gpsimd_build import buildnames
from gpsimd_build.manifest import ManifestError, load_manifest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = ROOT / "site_scons"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A scratch project (the current directory) with a kernel ``k/k.cpp``."""
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "k.cpp").write_text("// kernel\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def errors(path, **kwargs):
    with pytest.raises(ManifestError) as info:
        load_manifest(path, **kwargs)
    return str(info.value).split("\n")


def library(name="relu", sources="[k/k.cpp]", vector="v", inputs="x: {dtype: float32, "
            "shape: [2], values: [1, 2]}", expected="{values: [1, 2]}", extra="",
            schema="my_ops::relu(Tensor x) -> Tensor", op_extra="", vec_extra=""):
    return (f"  - name: {name}\n    sources: {sources}\n{extra}    ops:\n"
            f"      - schema: \"{schema}\"\n{op_extra}        vectors:\n"
            f"          - name: {vector}\n            inputs:\n              {inputs}\n"
            f"            expected: {expected}\n{vec_extra}")


def manifest(*libs, head=""):
    return "version: 1\n" + head + "libraries:\n" + "".join(libs)


# -- 1. names the build gives a meaning of its own ---------------------------

@pytest.mark.parametrize("name", [n for n in buildnames.BUILD_RESERVED_NAMES
                                  if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)])
def test_a_library_may_not_take_a_name_the_build_uses(proj, name):
    path = write("ops.yaml", manifest(library(name)))
    (line,) = errors(path)
    assert line.startswith(f"ops.yaml:3:11: $.libraries[0].name: library name '{name}' is a ")
    assert "of the build's own" in line and "rename the library" in line


def _alias_names(tree, module):
    """The first argument of every ``.Alias(...)`` call: the alias names the
    module defines, resolved through ``buildnames`` (a literal is refused:
    every name is defined there, once)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Alias"):
            continue
        first = node.args[0]
        where = f"{module}:{node.lineno}"
        if ast.unparse(first) == "lib.name":
            yield where, "library", ""
        elif isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
            yield where, "collection", getattr(buildnames, first.attr)
        elif isinstance(first, ast.Name):
            yield where, "collection", getattr(buildnames, first.id)
        elif isinstance(first, ast.JoinedStr):
            parts = first.values
            assert isinstance(parts[-1], ast.FormattedValue) and \
                ast.unparse(parts[-1].value) == "lib.name", where
            prefix = parts[:-1]
            assert all(isinstance(p, ast.FormattedValue) and isinstance(p.value, ast.Name)
                       for p in prefix), f"{where}: a literal alias prefix"
            yield where, "library", "".join(getattr(buildnames, p.value.id) for p in prefix)
        else:
            raise AssertionError(f"{where}: alias name {ast.unparse(first)} is not one of "
                                 "gpsimd_build.buildnames")


def test_every_alias_and_build_folder_is_one_the_loader_refuses():
    """Every alias the SCons tool defines (a ninja phony too) and every
    folder it makes beside the libraries' comes from ``buildnames``; each
    one a library could be named is refused (the test above)."""
    seen = {"collection": set(), "library": set()}
    folders = set()
    files = sorted(SITE.rglob("*.py"))
    for file in files:
        text = file.read_text()
        for where, kind, name in _alias_names(ast.parse(text), file.name):
            seen[kind].add(name)
        # f"{profile_dir}/<folder>/...": a literal folder is refused, a named
        # one must be one of buildnames.BUILD_FOLDERS
        for m in re.finditer(r"\{(?:self\.)?profile_dir\}/(\{([A-Za-z_.]+)\}|[A-Za-z_]\w*)"
                             r"(?=/)", text):
            assert m.group(2), f"{file.name}: literal build folder {m.group(1)}"
            folders.add(getattr(buildnames, m.group(2).split(".")[-1], m.group(2)))
    assert seen["collection"] == set(buildnames.COLLECTION_TARGETS)
    assert seen["library"] == {""} | set(buildnames.LIBRARY_TARGET_PREFIXES)
    assert set(buildnames.BUILD_FOLDERS) <= folders
    others = folders - set(buildnames.BUILD_FOLDERS) - {"lib.name"}
    assert not {f for f in others if re.fullmatch(r"[A-Za-z_]\w*", str(f))}, others


def test_a_collection_target_never_selects_one_library():
    from site_tools.gpsimd_tool.targets import selected_libraries
    libs = [types.SimpleNamespace(name=n) for n in ("test", "bad")]
    assert selected_libraries(libs, "build/host", ["test"]) == libs
    assert selected_libraries(libs, "build/host", ["bad"]) == libs[1:]

