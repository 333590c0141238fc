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
import re
import types

import pytest

from conftest import ROOT, write
from gpsimd_build import buildnames
from gpsimd_build.manifest import ManifestError, load_manifest

SITE = ROOT / "site_scons"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A scratch project (the current directory) with a kernel ``k/k.cpp``."""
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "k.cpp").write_text("// kernel\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


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


# -- 2. strings that reach a command mean what they say ----------------------

@pytest.mark.parametrize("field,text,column,why", [
    ("sources", '["k/r${Z}.cpp"]', 19, "SCons and ninja read '$'"),
    ("sources", '["k/x$(id).cpp"]', 19, "SCons and ninja read '$'"),
    ("sources", '["k/q;id;.cpp"]', 19, "';': the shell"),
    ("sources", "['k/q`id`.cpp']", 19, "'`': the shell"),
    ("sources", '["k/r*.cpp"]', 19, "'*': the shell"),
    ("sources", '["k/a\\\\b.cpp"]', 15, "'\\': the shell"),
    ("sources", '["-o.cpp"]', 16, "'-' at the start: the compiler reads"),
    ("sources", '["@k.cpp"]', 16, "'@' at the start: the compiler reads"),
    ("includes", '["k${NOPE}"]', 18, "SCons and ninja read '$'"),
    ("cflags", '["-DVAL=$Z"]', 21, "SCons and ninja read '$'"),
    ("cflags", '["-DA={1,2}"]', 19, "'{': the shell"),
    ("cflags", '["-DF(x)=x"]', 18, "'(': the shell"),
    ("sources", '["k/{r,q}.cpp"]', 18, "'{': the shell"),
    ("cflags", '["-DA=1;id"]', 20, "';': the shell"),
    # one flag, three words: SCons quotes a word with a space ("-DA" -DB "-DC")
    ("cflags", "['-DA\" -DWRONG \"-DB']", 18, "the shell would read it as other than one word"),
    ("cflags", "['-DA\"', '-O2']", 18, "a quote or backslash left open"),
    ("cflags", "['-DX=a\\', '-O2']", 20, "a quote or backslash left open"),
    ("cflags", "['-DM=\"a b\"']", 19, "a quote that ends the double quotes"),
    # ninja's line wrapping drops the blanks that start a line
    ("cflags", "['-include/h  x.h']", 25, "a run of spaces"),
    ("sources", '["k/a  b.cpp"]', 19, "a run of spaces"),
])
def test_a_string_a_command_would_read_otherwise_is_refused(proj, field, text, column, why):
    for name in ("r${Z}.cpp", "r.cpp", "x$(id).cpp", "q;id;.cpp", "q`id`.cpp", "r*.cpp",
                 "a\\b.cpp", "k${NOPE}"):
        (proj / "k" / name).write_text("// kernel\n")
    (proj / "-o.cpp").write_text("")
    (proj / "@k.cpp").write_text("")
    doc = manifest(library(extra=f"    {field}: {text}\n") if field != "sources"
                   else library(sources=text))
    path = write("ops.yaml", doc)
    (line,) = errors(path)
    assert line.startswith(f"ops.yaml:{4 if field == 'sources' else 5}:{column}: "), line
    assert why in line and "cannot reach a build command as written" in line, line


def test_a_flag_keeps_the_shell_s_quotes_and_backslashes(proj):
    """A flag is a shell word, as CFLAGS are to make: '-DNAME=\\"xy\\"' is the
    string macro "xy" (refusing it left no way to pass one)."""
    path = write("ops.yaml", manifest(library(
        extra="    cflags: ['-DNAME=\\\"xy\\\"', \"-DQ='a'\", '-I../common', '-O2', "
              "'-DMSG=\\\"hello world\\\"']\n")))
    (lib,) = load_manifest(path).libraries
    assert list(lib.cflags[-5:]) == ['-DNAME=\\"xy\\"', "-DQ='a'", "-I../common", "-O2",
                                     '-DMSG=\\"hello world\\"']


def test_npy_reference_and_include_paths_are_held_to_the_same_rule(proj):
    (proj / "k" / "e${Z}.npy").write_text("")
    (proj / "r${Z}.py").write_text("def f(x):\n    return x\n")
    write("i$x/ops.yaml", manifest(library("other")))
    path = write("ops.yaml", manifest(library(
        expected='{npy: "k/e${Z}.npy"}', op_extra="        reference: \"r${Z}.py:f\"\n"),
        head='include: ["i$x/ops.yaml"]\n'))
    lines = errors(path)
    assert [line.split(": ")[1] for line in lines] == [
        "$.include[0]", "$.libraries[0].ops[0].reference",
        "$.libraries[0].ops[0].vectors[0].expected.npy"]
    assert all("SCons and ninja read '$'" in line for line in lines)


def test_a_glob_include_that_matches_a_name_with_a_dollar_is_refused(proj):
    write("teams/a$b/ops.yaml", manifest(library("other")))
    path = write("ops.yaml", manifest(library(), head='include: ["teams/*/ops.yaml"]\n'))
    (line,) = errors(path)
    assert line.startswith("ops.yaml:2:11: $.include[0]: include pattern 'teams/*/ops.yaml' "
                           "matches 'teams/a$b/ops.yaml' cannot reach"), line


@pytest.mark.slow
def test_the_file_compiled_is_the_file_named(tmp_path):
    """A real build of sources whose names hold every punctuation a path
    may keep (a space, ':', '+', '=', ',', '%', '!', ']', '~' and
    '#' inside a word): each one compiles the file named, not a decoy
    whose name SCons, ninja or the shell would have made of it."""
    from conftest import copy_project, run_scons
    project = copy_project(tmp_path / "p")
    k = project / "k"
    k.mkdir()
    plus1 = "#include <torch/torch.h>\ntorch::Tensor f(const torch::Tensor& x) " \
            "{ return torch::add(x, 1); }\n"
    decoy = "#include <torch/torch.h>\ntorch::Tensor f(const torch::Tensor& x) { return x; }\n"
    names = ["a b.cpp", "a:b.cpp", "a+b=c,d%e!f]h.cpp", "a~b#c.cpp"]
    for name in names:
        (k / name).write_text(plus1)
    for name in ("a.cpp", "ab.cpp", "b.cpp", "a+b=c,d%e!f.cpp", "a~b.cpp"):
        (k / name).write_text(decoy)
    libs = "".join(library(f"l{i}", sources=json.dumps([f"k/{n}"]),
                           schema="my_ops::f(Tensor x) -> Tensor", expected="{values: [2, 3]}")
                   for i, n in enumerate(names))
    write(project / "att.yaml", manifest(libs))
    for extra in ([], ["--experimental=ninja", "BUILD_DIR=build-ninja"]):
        proc = run_scons(project, "-Q", "MANIFEST=att.yaml", *extra)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert f"all libraries: {len(names)} passed, 0 failed" in out, out
    # k/r${Z}.cpp would compile k/r.cpp (before: a FAIL, or a PASS for the
    # wrong kernel): refused before anything is built
    (k / "r${Z}.cpp").write_text(plus1)
    (k / "r.cpp").write_text(decoy)
    write(project / "dollar.yaml", manifest(library(
        "ld", sources='["k/r${Z}.cpp"]', schema="my_ops::f(Tensor x) -> Tensor",
        expected="{values: [2, 3]}")))
    proc = run_scons(project, "-Q", "MANIFEST=dollar.yaml")
    assert proc.returncode != 0 and "dollar.yaml:4:19: " in proc.stderr, proc.stderr
    assert "PASS" not in proc.stdout and "CXX" not in proc.stdout, proc.stdout


# -- 3. a number is the number written ---------------------------------------

INT64 = "x: {dtype: int64, shape: [1], values: [0]}"


@pytest.mark.parametrize("inputs,expected,where,message", [
    (INT64, "{values: [9007199254740993.0]}", "11:33: $.libraries[0].ops[0].vectors[0]"
     ".expected.values[0]", "9007199254740993.0 is the integer 9007199254740993, but as a "
     "float literal it reads as 9007199254740992 (a double holds no more than 53 bits); the "
     "integer dtype int64 takes it exactly or not at all: write 9007199254740993"),
    (INT64, "{values: [1.00000000000000001e17]}", "11:33: $.libraries[0].ops[0].vectors[0]"
     ".expected.values[0]", "1.00000000000000001e17 is the integer 100000000000000001, but"),
    (INT64, "{values: [0.99999999999999999]}", "11:33: $.libraries[0].ops[0].vectors[0]"
     ".expected.values[0]", "0.99999999999999999 is a number with a fraction, but as a float "
     "literal it reads as 1 "),
    ("x: {dtype: int64, shape: [1], values: [9007199254740993.0]}", "{values: [0]}",
     "10:54: $.libraries[0].ops[0].vectors[0].inputs.x.values[0]", "9007199254740993.0 is"),
    ("x: {dtype: int64, shape: [2], random: {distribution: integers, low: 0, "
     "high: 9007199254740993.0}}", "{values: [0, 0]}",
     "10:92: $.libraries[0].ops[0].vectors[0].inputs.x.random.high",
     "integers distribution: 9007199254740993.0 is"),
    (INT64, "{values: [1e309]}", "11:33: $.libraries[0].ops[0].vectors[0].expected.values[0]",
     "number '1e309' is beyond the largest double (1.8e308) and would become an infinity; "
     "write .inf or -.inf for one"),
    ("x: {dtype: float16, shape: [1], values: [-1e400]}", "{values: [0]}",
     "10:56: $.libraries[0].ops[0].vectors[0].inputs.x.values[0]", "number '-1e400' is beyond"),
])
def test_a_literal_is_judged_by_its_text(proj, inputs, expected, where, message):
    path = write("ops.yaml", manifest(library(inputs=inputs, expected=expected)))
    (line,) = errors(path)
    assert line.startswith(f"ops.yaml:{where}: {message}"), line


def test_a_long_long_scalar_written_as_an_inexact_float_is_refused(proj):
    path = write("ops.yaml", manifest(library(
        schema="my_ops::f(Tensor x, long long n) -> Tensor",
        inputs=INT64 + "\n              n: 9007199254740993.0")))
    (line,) = errors(path)
    assert line.startswith("ops.yaml:11:18: $.libraries[0].ops[0].vectors[0].inputs.n: "
                           "argument 'n' (long long): 9007199254740993.0 is the integer"), line


def test_exact_float_literals_and_written_infinities_stay(proj):
    """1e17 and 2.0 are exactly the integers written; a float dtype rounds
    9007199254740993.0 as it rounds any value; .inf and .nan are kept."""
    path = write("ops.yaml", manifest(
        library(inputs="x: {dtype: int64, shape: [3], values: [1e17, 2.0, -0.0]}",
                expected="{values: [1.0e17, 2, 0]}"),
        library("f", inputs="x: {dtype: float32, shape: [3], values: [9007199254740993.0, "
                            ".inf, .nan]}", expected="{values: [1.00000000000000001e17, "
                                                     "-.inf, .nan]}")))
    lib, flib = load_manifest(path).libraries
    assert lib.ops[0].vectors[0].inputs[0].values == [1e17, 2.0, -0.0]
    assert flib.ops[0].vectors[0].expected.values[1] == float("-inf")


# -- 4. names are bounded ----------------------------------------------------

def test_name_limits_are_the_schemas_and_the_docs():
    from gpsimd_build.manifest import rules
    schema = json.loads((ROOT / "schema" / "ops.schema.json").read_text())
    assert schema["$defs"]["identifier"]["maxLength"] == rules.MAX_NAME_CHARS
    assert schema["$defs"]["vector"]["properties"]["name"]["maxLength"] == \
        rules.MAX_VECTOR_NAME_CHARS
    doc = (ROOT / "docs" / "manifest.md").read_text()
    assert f"| `MAX_NAME_CHARS` | {rules.MAX_NAME_CHARS} characters" in doc
    assert f"| `MAX_VECTOR_NAME_CHARS` | {rules.MAX_VECTOR_NAME_CHARS} characters" in doc
    # the longest file named after them: explore's example arrays
    assert len(f"{'l' * 64}.{'o' * 31}.{'0' * 12}.{'a' * 64}.npy".encode()) < 255


_TOO_LONG = [
    ("3:11: $.libraries[0].name", lambda n: library(n),
     "library name 'LLLLLLLLLLLLLLLLLLLLLLLL...' has {n} characters; a library name has at "
     "most 64 (the build names files"),
    ("8:19: $.libraries[0].ops[0].vectors[0].name", lambda n: library(vector=n),
     "vector name 'LLLLLLLLLLLLLLLLLLLLLLLL...' has {n} characters; a vector name has at most "
     "128"),
    ("6:38: $.libraries[0].ops[0].schema", lambda n: library(
        schema=f"my_ops::relu(Tensor {n}) -> Tensor", inputs=f"{n}: {{dtype: float32, "
        "shape: [2], values: [1, 2]}"),
     "argument name 'LLLLLLLLLLLLLLLLLLLLLLLL...' has {n} characters; an argument name has at "
     "most 64"),
]


# (an op schema has at most 2,048 characters, MAX_SCHEMA_CHARS: its argument
# name is not tried at 3,000,000)
@pytest.mark.parametrize("where,build,message,length", [
    (*case, length) for case in _TOO_LONG for length in (245, 300, 3_000_000)
    if not ("schema" in case[0] and length > 2000)])
def test_a_name_too_long_for_a_file_is_a_located_error(proj, where, build, message, length):
    name = "L" * (length if "vector" not in where else length + 64)
    path = write("ops.yaml", manifest(build(name)))
    lines = errors(path)
    assert lines[0].startswith(f"ops.yaml:{where}: " + message.format(n=len(name))), \
        lines[0][:300]
    assert max(len(line) for line in lines) < 1000


# -- 5. patterns anchor truly ------------------------------------------------

def _patterns(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


#: A string each pattern of the schema matches (a new pattern needs one).
PATTERN_SAMPLES = {"identifier": "relu", "reference": "k/ref.py:f", "vector": "v1.a-b"}


def test_no_schema_pattern_lets_a_trailing_newline_through():
    schema = json.loads((ROOT / "schema" / "ops.schema.json").read_text())
    patterns = sorted(set(_patterns(schema)))
    assert len(patterns) == len(PATTERN_SAMPLES)
    for pattern in patterns:
        samples = [s for s in PATTERN_SAMPLES.values() if re.search(pattern, s)]
        assert samples, f"no sample for {pattern}"
        for sample in samples:
            for bad in (sample + "\n", sample + "\n\n", "\n" + sample, sample + "\r\n"):
                assert re.search(pattern, bad) is None, (pattern, bad)


@pytest.mark.parametrize("build,where,words", [
    (lambda: library('"relu\\n"'), "3:11: $.libraries[0].name", "'relu\\n' is not a C identifier"),
    (lambda: library(vector='"v1\\n"'), "8:19: $.libraries[0].ops[0].vectors[0].name",
     "'v1\\n' is not a valid vector name"),
    (lambda: library(op_extra='        reference: "numpy:negative\\n"\n'),
     "7:20: $.libraries[0].ops[0].reference", "'numpy:negative\\n' is not a reference"),
])
def test_a_name_with_a_trailing_newline_is_refused(proj, build, where, words):
    path = write("ops.yaml", manifest(build()))
    assert errors(path)[0].startswith(f"ops.yaml:{where}: {words}")


# -- 6. two sources, one object ----------------------------------------------

@pytest.mark.parametrize("sources,where,message", [
    ('[k/r.cpp, k/r.cc]', "4:24", "source 'k/r.cc' compiles to obj/k/r.o, as 'k/r.cpp' (line 4) "
     "does: both would be one object; rename one of them"),
    ('[k/k.cpp, wrapper.cpp]', "4:24", "source 'wrapper.cpp' compiles to obj/wrapper.o, the "
     "object of the library's generated wrapper (wrapper.cpp): rename the source"),
    ('[wrapper.cc]', "4:15", "source 'wrapper.cc' compiles to obj/wrapper.o, the object"),
    ('["../x/r.cpp", outside/x/r.cpp]', "4:29", "source 'outside/x/r.cpp' compiles to "
     "obj/outside/x/r.o, as '../x/r.cpp' (line 4) does"),
])
def test_two_sources_that_make_one_object_are_refused(proj, sources, where, message):
    for name in ("k/r.cpp", "k/r.cc", "wrapper.cpp", "wrapper.cc", "outside/x/r.cpp"):
        write(proj / name, "// kernel\n")
    write(proj.parent / "x" / "r.cpp", "// kernel\n")
    path = write("ops.yaml", manifest(library(sources=sources)))
    (line,) = errors(path, allow_paths=[str(proj.parent / "x")])
    index = 1 if "," in sources else 0
    assert line.startswith(f"ops.yaml:{where}: $.libraries[0].sources[{index}]: "), line
    assert message in line, line


def test_two_shape_sources_that_make_one_object_are_refused(proj):
    write("k/s.cpp", "// shapes\n")
    write("k/s.cc", "// shapes\n")
    path = write("ops.yaml", manifest(library(extra="    shape_sources: [k/s.cpp, k/s.cc]\n")))
    lines = errors(path)
    assert any(line.startswith("ops.yaml:5:30: $.libraries[0].shape_sources[1]: source 'k/s.cc' "
                               "compiles to shapes/obj/k/s.o, as 'k/s.cpp' (line 5) does")
               for line in lines), lines


# -- 7. tolerances, include names, explore ranges ----------------------------

@pytest.mark.parametrize("where,text,message", [
    ("vector", "            rtol: .nan\n", "rtol must be a finite number, got nan (a NaN "
     "tolerance makes every comparison fail)"),
    ("vector", "            atol: .inf\n", "atol must be a finite number, got inf (an infinite "
     "tolerance passes any output)"),
    ("op", "        atol: -.inf\n", "atol must be a finite number, got -inf"),
    ("library", "    defaults: {rtol: .inf}\n", "rtol must be a finite number, got inf"),
    ("manifest", "defaults: {atol: .nan}\n", "atol must be a finite number, got nan"),
])
def test_a_tolerance_is_finite(proj, where, text, message):
    doc = manifest(library(vec_extra=text if where == "vector" else "",
                           op_extra=text if where == "op" else "",
                           extra=text if where == "library" else ""),
                   head=text if where == "manifest" else "")
    path = write("ops.yaml", doc)
    lines = [line for line in errors(path) if message in line]
    assert lines and lines[0].split(": ")[1].endswith(("rtol", "atol")), errors(path)


def test_an_include_name_that_exists_is_that_file_not_a_pattern(proj):
    write("inc/ops[1].yaml", manifest(library("bracket", sources="[../k/k.cpp]")))
    write("inc/ops1.yaml", manifest(library("one", sources="[../k/k.cpp]")))
    path = write("ops.yaml", 'version: 1\ninclude: ["inc/ops[1].yaml"]\n')
    assert [lib.name for lib in load_manifest(path).libraries] == ["bracket"]
    # a pattern where no file has its name is a pattern
    path = write("top2.yaml", 'version: 1\ninclude: ["inc/ops[1-2].yaml"]\n')
    assert [lib.name for lib in load_manifest(path).libraries] == ["one"]


def test_an_include_folder_a_shell_would_read_is_refused(proj):
    write("inc[1]/ops.yaml", manifest(library("bracket", sources="[../k/k.cpp]")))
    path = write("ops.yaml", 'version: 1\ninclude: ["inc[1]/ops.yaml"]\n')
    (line,) = errors(path)
    assert line.startswith("ops.yaml:2:15: $.include[0]: include 'inc[1]/ops.yaml' cannot reach "
                           "a build command as written: '[': the shell"), line


EXPLORE_OP = ("my_ops::f(Tensor x, int lo, long long big, float s, Scalar a) -> Tensor")
EXPLORE_INPUTS = ("x: {dtype: int32, shape: [2], values: [1, 2]}\n              lo: 1\n"
                  "              big: 2\n              s: 0.5\n              a: 1.5")


@pytest.mark.parametrize("block,where,message", [
    ("{low: -1e308, high: 1e308}", "explore.low", "explore: [low, high] = [-1e+308, 1e+308] is "
     "not within the values of int32 (-2147483648..2147483647), which tensor argument 'x' is "
     "drawn in"),
    ("{low: 0, high: 1e10}", "explore.high", "is not within the values of int32"),
    ("{scalars: {lo: {low: 1e30, high: 1e31}}}", "explore.scalars.lo", "explore: scalars: lo: "
     "[1e+30, 1e+31] is not a range of int32 (-2147483648..2147483647, integers), the dtype of "
     "argument 'lo' (int)"),
    ("{scalars: {lo: {low: 0.5, high: 0.7}}}", "explore.scalars.lo", "is not a range of int32"),
    ("{scalars: {big: {low: 0, high: 9007199254740993.0}}}", "explore.scalars.big.high",
     "explore: 9007199254740993.0 is the integer 9007199254740993, but as a float literal it "
     "reads as 9007199254740992"),
    ("{scalars: {s: {low: -1e39, high: 0}}}", "explore.scalars.s", "is not a range of float32"),
    ("{scalars: {a: {low: -1e300, high: 0}}}", "explore.scalars.a", "is not a range of float32"),
])
def test_explore_ranges_fit_the_dtype_drawn(proj, block, where, message):
    path = write("ops.yaml", manifest(library(schema=EXPLORE_OP, inputs=EXPLORE_INPUTS,
                                              expected="{values: [1, 2]}",
                                              op_extra=f"        explore: {block}\n")))
    (line,) = errors(path)
    assert f": $.libraries[0].ops[0].{where}: " in line and message in line, line


def test_explore_ranges_fit_every_dtype_the_vectors_give(proj):
    """float32 and float16 vectors: each dtype is searched, so the range must
    fit float16 too (checked against the first vector's alone, 1e5 was drawn
    as inf in float16 and gave a false FALSIFIED)."""
    half = ("          - name: w\n            inputs:\n"
            "              x: {dtype: float16, shape: [2], values: [1, 2]}\n"
            "            expected: {values: [1, 2]}\n")
    path = write("ops.yaml", manifest(library(
        vec_extra=half, op_extra="        explore: {low: -1.0e5, high: 1.0e5}\n")))
    (line,) = errors(path)
    assert ": $.libraries[0].ops[0].explore.low: explore: [low, high] = [-100000, 100000] is " \
           "not within the values of float16 (-65504..65504)" in line, line


def test_explore_ranges_without_a_vector_hold_to_the_widest_dtype(proj):
    doc = manifest(library(op_extra="        explore: {low: -1e300, high: 0}\n")
                   .split("        vectors:")[0])
    path = write("ops.yaml", doc)
    (line,) = errors(path)
    assert "is not within the values of any dtype (-3.40282e+38..3.40282e+38)" in line, line
    path = write("ok.yaml", doc.replace("-1e300", "-1e30"))
    assert load_manifest(path).libraries[0].ops[0].explore.low == -1e30


def test_expected_float_literals_of_a_shape_function_s_output_are_kept(proj):
    """A library whose shape function gives the output dtype (float32
    here): its expected 3.0e38 is a float, not an integer written inexactly
    (the loader refused it, as if the output were an integer)."""
    write("k/shape.cpp", '#include <torch/torch.h>\n#include "torchneuron/register.h"\n'
          "torch::Tensor twice_shape(torch::Tensor x) { return torch::zeros(x.sizes(), "
          "torch::kFloat); }\n"
          'NEURON_LIBRARY(my_ops, m) { m.def("twice", &twice_shape, "twice"); }\n')
    write("k/r.cpp", "// kernel\n")
    path = write("ops.yaml", "version: 1\nlibraries:\n  - name: lib3\n    sources: [k/r.cpp]\n"
                 "    shape_sources: [k/shape.cpp]\n    ops:\n      - name: twice\n"
                 "        vectors:\n          - name: big\n            inputs:\n"
                 "              x: {dtype: float32, shape: [2], values: [1.5e38, 1e20]}\n"
                 "            expected: {values: [3.0e+38, 2.0e+20]}\n")
    (lib,) = load_manifest(path).libraries
    assert lib.ops[0].vectors[0].expected.values == [3.0e38, 2.0e20]


def test_a_hex_float_literal_is_judged_by_its_value(proj):
    """`!!float 0x20000000000001` is 2**53 + 1, read as the double 2**53:
    refused for an integer dtype as any inexact float literal is."""
    path = write("ops.yaml", manifest(library(inputs="x: {dtype: int64, shape: [2], values: "
                                              "[!!float 0x20000000000001, 1]}")))
    (line,) = errors(path)
    assert "9007199254740993 is the integer 9007199254740993, but as a float literal it reads " \
           "as 9007199254740992" in line, line
