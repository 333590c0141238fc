"""The layers, checked on the source: every import statement of every
module (function-level ones included) of the project's packages.

- ``gpsimd_device`` (device facts) imports neither side;
- ``gpsimd_emu`` (the emulator) never imports the build side, nor
  Hypothesis, nor ``gpsimd_explore`` (explore, an application of the
  emulator, which the build runs as a command and never imports);
- the front ends (``gpsimd_build``, the SCons tool ``gpsimd_tool``, the
  pytest plugin ``gpsimd_pytest``) import of ``gpsimd_emu`` only its
  client, ``gpsimd_emu.client``, which imports nothing else of the
  emulator, and with everything it imports is stdlib only;
- no package has an import cycle;
- the emulator's program (its C sources) stands in layers: the sandbox,
  then a vector's processes (the leader), then the program's loop; a file
  includes the headers of its own layer and those below, and calls only
  their functions.
"""

import ast
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PACKAGES = {
    "gpsimd_device": "runtime_model/gpsimd_device",
    "gpsimd_emu": "runtime_model/gpsimd_emu",
    "gpsimd_explore": "runtime_model/gpsimd_explore",
    "gpsimd_build": "site_scons/gpsimd_build",
    "gpsimd_pytest": "site_scons/gpsimd_pytest",
    "gpsimd_tool": "site_scons/site_tools/gpsimd_tool",
}

#: What each package must never import (top-level names).
FORBIDDEN = {
    "gpsimd_device": {"gpsimd_emu", "gpsimd_explore", "gpsimd_build", "gpsimd_tool",
                      "gpsimd_pytest", "SCons", "numpy", "yaml", "jsonschema"},
    "gpsimd_emu": {"gpsimd_explore", "gpsimd_build", "gpsimd_tool", "gpsimd_pytest", "SCons",
                   "yaml", "jsonschema", "hypothesis"},
    "gpsimd_explore": {"gpsimd_build", "gpsimd_tool", "gpsimd_pytest", "SCons", "yaml",
                       "jsonschema"},
    "gpsimd_build": {"gpsimd_explore", "gpsimd_tool", "gpsimd_pytest", "SCons"},
    "gpsimd_tool": {"gpsimd_explore", "gpsimd_pytest"},
    "gpsimd_pytest": {"gpsimd_explore", "gpsimd_tool", "SCons"},
}

#: The only part of gpsimd_emu the front ends may import (a package).
CLIENT = "gpsimd_emu.client"
#: The front ends: the build library, the SCons tool, the pytest plugin.
BUILD_SIDE = ("gpsimd_build", "gpsimd_tool", "gpsimd_pytest")


def modules(packages):
    """{dotted module name: file} for every ``.py`` file of ``packages``
    ({package: folder})."""
    out = {}
    for package, folder in packages.items():
        for here, _, files in os.walk(folder):
            for name in files:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(here, name), folder)[:-3]
                    parts = [package] + rel.split(os.sep)
                    if parts[-1] == "__init__":
                        parts.pop()
                    out[".".join(parts)] = os.path.join(here, name)
    return out


def imports(name, path, known):
    """Every module ``name`` (at ``path``) imports, anywhere in its text,
    relative imports resolved; ``from p import m`` counts ``p.m`` when it
    is a module of ``known``."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            if mod != name:         # (a package's __init__ importing its own modules)
                out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known)
    return out


def graph(packages):
    known = modules(packages)
    return {m: imports(m, p, known) for m, p in known.items()}


def cycles(edges):
    """The strongly connected components of more than one module (or a
    module importing itself), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def violations(edges):
    """Every import that breaks a layer rule, as 'module -> import: why'."""
    out = []
    for module, targets in sorted(edges.items()):
        package = module.split(".")[0]
        for target in sorted(targets):
            top = target.split(".")[0]
            if top in FORBIDDEN[package]:
                out.append(f"{module} -> {target}: {package} never imports {top}")
            elif (package in BUILD_SIDE and top == "gpsimd_emu"
                  and target != "gpsimd_emu" and target != CLIENT
                  and not target.startswith(CLIENT + ".")):
                out.append(f"{module} -> {target}: the build side imports only {CLIENT}")
    return out


def closure(edges, start):
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(t for t in edges.get(m, ()) if t in edges)
    return seen


@pytest.fixture(scope="module")
def project():
    return graph({p: os.path.join(ROOT, d) for p, d in PACKAGES.items()})


def test_no_package_has_an_import_cycle(project):
    assert cycles(project) == []


def test_every_import_keeps_to_its_layer(project):
    assert violations(project) == []


def test_the_client_and_what_it_imports_are_stdlib_only(project):
    assert CLIENT in project
    assert project["gpsimd_emu"] == set()   # (importing the client runs the package's __init__)
    parts = [m for m in project if m == CLIENT or m.startswith(CLIENT + ".")]
    assert len(parts) > 1                   # (its modules: every one is checked)
    for module in set().union(*(closure(project, m) for m in parts)):
        # (self-contained: of the emulator, only its own modules)
        assert module.startswith(CLIENT + ".") or module in (CLIENT, "gpsimd_emu"), module
        for target in project[module]:
            top = target.split(".")[0]
            assert top == "gpsimd_emu" or top in sys.stdlib_module_names or top == "__future__", \
                f"{module} imports {target}"


def test_the_walker_sees_function_level_imports_cycles_and_back_doors(tmp_path):
    """The checks above can fail: a planted cycle through a function-level
    import, and a build module reaching past the client, are both found."""
    emu = tmp_path / "gpsimd_emu"
    tool = tmp_path / "gpsimd_tool"
    for folder in (emu, tool):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (emu / "client.py").write_text("from . import contain\n")
    (emu / "contain.py").write_text("import os\n")
    (emu / "cli.py").write_text("from .server import serve\n")
    (emu / "server.py").write_text("def serve():\n    from . import cli\n")
    (tool / "ninja.py").write_text("def run():\n    from gpsimd_emu import contain\n"
                                   "from gpsimd_emu import client\n")
    edges = graph({"gpsimd_emu": str(emu), "gpsimd_tool": str(tool)})
    assert cycles(edges) == [["gpsimd_emu.cli", "gpsimd_emu.server"]]
    assert violations(edges) == [
        "gpsimd_tool.ninja -> gpsimd_emu.contain: the build side imports only gpsimd_emu.client"]


#: The program's C layers, lowest first: each one's files (the layer's
#: name, or its name, ``_`` and a part) and the prefix of the functions its
#: header declares.
C_LAYERS = (("sandbox", "sb_"), ("leader", "gl_"), ("zygote", "gz_"))


def c_layer(name):
    """The layer of a C file or header (``sandbox_cgroup.c``: ``sandbox``)."""
    return os.path.splitext(name)[0].split("_")[0]


def c_violations(folder, names):
    """Every include of a local header or call of a layer's function, in
    the C files ``names`` of ``folder``, that reaches a higher layer, as
    'file -> what: why'."""
    rank = {layer: i for i, (layer, _) in enumerate(C_LAYERS)}
    out = []
    for name in sorted(names):
        mine = rank[c_layer(name)]
        text = open(os.path.join(folder, name), encoding="utf-8").read()
        for header in re.findall(r'^\s*#\s*include\s+"([a-z_]+)\.h"', text, re.M):
            if rank.get(c_layer(header), -1) > mine:
                out.append(f"{name} -> {header}.h: {C_LAYERS[mine][0]} is below {header}")
        for layer, prefix in C_LAYERS[mine + 1:]:
            for call in sorted(set(re.findall(rf"\b({prefix}[a-z_]+)\s*\(", text))):
                out.append(f"{name} -> {call}: {C_LAYERS[mine][0]} is below {layer}")
    return out


def test_the_program_sources_stand_in_layers():
    from gpsimd_device import zygote as program
    assert {c_layer(n) for n in program.SOURCE_NAMES} == {l for l, _ in C_LAYERS}
    assert c_violations(os.path.join(ROOT, PACKAGES["gpsimd_emu"]), program.SOURCE_NAMES) == []


def test_the_c_check_sees_an_include_or_a_call_upwards(tmp_path):
    (tmp_path / "sandbox.c").write_text('#include "sandbox.h"\n#include "leader.h"\n'
                                        "void f(void) { gl_set_name(\"x\"); sb_g(); }\n")
    (tmp_path / "leader.c").write_text('#include "sandbox.h"\nint g(void) { sb_enter(1, 2); }\n')
    assert c_violations(str(tmp_path), ["sandbox.c", "leader.c"]) == [
        "sandbox.c -> leader.h: sandbox is below leader",
        "sandbox.c -> gl_set_name: sandbox is below leader"]
