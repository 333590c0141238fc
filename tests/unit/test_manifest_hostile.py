"""The manifest front door against any file (issue 13): bounded work, every
independent error in one run, no traceback, safe diagnostics, the trust
rule for paths, and the record of what a validation read.

One test (or one parametrized family) per item of the issue's "What was
seen" list, with exact messages; the fuzz campaign is in
``bench/fuzz_manifest.py`` (a short seeded run of it is here too).
"""

import json
import os
import pathlib
import random
import re
import socket
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, write
from gpsimd_build.manifest import ManifestError, Read, load_manifest, reads_still_hold
from gpsimd_build.diagnostics import shown
from gpsimd_build.manifest import paths as mpaths
from gpsimd_build.yamlloc import MAX_DEPTH, MAX_MANIFEST_BYTES, MAX_NODES, MAX_NUMBER_LENGTH

sys.path.insert(0, str(ROOT / "bench"))
import fuzz_manifest  # noqa: E402

OUTSIDE = ("a manifest names only paths inside the project root, or inside a folder listed "
           "in the top manifest's allow_paths or in ALLOW_PATHS=")
LIB = "$.libraries[0]"
VEC = "$.libraries[0].ops[0].vectors[0]"
BIG = "1" + "0" * 399          # a 400-digit integer


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A scratch project (the root, and the current directory): a kernel,
    a reference file, a .npy file; returns the root."""
    root = tmp_path / "proj"
    (root / "k").mkdir(parents=True)
    (root / "k" / "k.cpp").write_text("// kernel\n")
    (root / "k" / "ref.py").write_text("def f(x):\n    return x\n")
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }".ljust(117) + b"\n"
    (root / "k" / "a.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                                       + header + bytes(16))
    monkeypatch.chdir(root)
    return root


def at(text, needle, nth=0, skip=0):
    """``LINE:COL`` of the ``nth`` occurrence of ``needle`` in ``text`` (plus
    ``skip`` characters)."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    index += skip
    line = text.count("\n", 0, index) + 1
    return f"{line}:{index - (text.rfind(chr(10), 0, index) + 1) + 1}"


def errors(path, **kwargs):
    with pytest.raises(ManifestError) as info:
        load_manifest(path, **kwargs)
    text = str(info.value)
    assert text.split("\n") == [str(d) for d in info.value.diagnostics]
    return text.split("\n")


def doc(inputs="x: {dtype: float32, shape: [4], values: [1, 2, 3, 4]}",
        schema="f(Tensor x) -> Tensor", op="", vector="", library="", top="",
        sources="[k/k.cpp]"):
    """A one-library manifest; ``inputs`` is one line, the other arguments
    are extra lines (already indented) at each level."""
    return (f"version: 1\n{top}libraries:\n  - name: lib\n    sources: {sources}\n{library}"
            f"    ops:\n      - schema: \"{schema}\"\n        reference: k/ref.py:f\n{op}"
            f"        vectors:\n          - name: v\n            inputs:\n"
            f"              {inputs}\n{vector}")


LOAD = ("import sys, time\n"
        f"sys.path[:0] = [{str(ROOT / 'site_scons')!r}, {str(ROOT / 'runtime_model')!r}]\n"
        "from gpsimd_build.manifest import load_manifest, ManifestError\n"
        "t = time.process_time()\n"
        "try:\n    load_manifest(sys.argv[1]); print('loaded')\n"
        "except ManifestError as err:\n    print(err)\n"
        # VmHWM: this process's peak (ru_maxrss would keep pytest's across exec)
        "print(time.process_time() - t, next(int(line.split()[1]) for line in "
        "open('/proc/self/status') if line.startswith('VmHWM')))\n")


def load_in_child(path, timeout=60):
    """Load ``path`` in a child Python: (exit status, diagnostics lines,
    seconds of the load's CPU time (bounds that hold on a loaded machine; a
    wait is ``timeout``'s), peak RSS in MB)."""
    proc = subprocess.run([sys.executable, "-c", LOAD, path], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stdout.rstrip("\n").split("\n")
    seconds, rss = lines[-1].split()
    return lines[:-1], float(seconds), int(rss) / 1024


# ---------------------------------------------------------------------------
# 1. A segfault from nesting: now a located error, whatever PyYAML build
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("opener,closer", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_a_located_error_not_a_crash(proj, opener, closer):
    count = 100_000 if opener == "{a: " else 30_000
    write("d.yaml", "version: 1\nlibraries: " + opener * count + closer * count + "\n")
    lines, seconds, _ = load_in_child("d.yaml")
    # the document's mapping is level 1: the 64th opener is level 65
    column = len("libraries: ") + (MAX_DEPTH - 1) * len(opener) + 1
    assert lines == [f"d.yaml:2:{column}: $: YAML nesting deeper than {MAX_DEPTH} levels "
                     "(MAX_DEPTH)"]
    assert seconds < 10


def test_nesting_limit_is_checked_per_event_in_both_parsers(proj, monkeypatch):
    """The same message from the pure-Python parser (no libyaml)."""
    from gpsimd_build import yamlloc
    monkeypatch.setattr(yamlloc, "_C_LOADER", None)
    path = write("d.yaml", "version: 1\nlibraries: " + "[" * 3000 + "]" * 3000 + "\n")
    assert errors(path) == [f"{path}:2:{11 + MAX_DEPTH}: $: YAML nesting deeper than "
                            f"{MAX_DEPTH} levels (MAX_DEPTH)"]


@pytest.mark.parametrize("text,line", [
    ("version: 1\na:\n\tb: 1\n", "3:1: $: tab character used for indentation (YAML indents "
                                  "with spaces only)"),
    ("version: 1\na: \x07\n", "2:4: $: character U+0007 is not allowed in YAML (control "
                             "characters are not allowed)"),
    ("version: 1\na: [1,\n", "3:1: $: invalid YAML: did not find expected node content "
                           "(while parsing a flow node at line 3, column 1)"),
])
def test_past_the_reparse_limit_syntax_errors_keep_libyaml_words(proj, monkeypatch, text, line):
    """A text longer than REPARSE_LIMIT is not read again by the slow
    parser: libyaml words the problem, the location is the same."""
    from gpsimd_build import yamlloc
    if yamlloc._C_LOADER is None:
        pytest.skip("PyYAML without libyaml")
    monkeypatch.setattr(yamlloc, "REPARSE_LIMIT", 4)
    path = write("m.yaml", text)
    assert errors(path) == [f"{path}:{line}"]


# ---------------------------------------------------------------------------
# 2. OverflowError from 400-digit numbers wherever a float is expected
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,where", [
    (doc("x: {dtype: float32, shape: [1], values: [1]}\n              f: BIG",
         schema="f(Tensor x, float f) -> Tensor"), f"{VEC}.inputs.f"),
    (doc("s: {value: BIG, dtype: float32}", schema="f(Scalar s) -> Tensor",
         op="        output: {dtype: float32}\n"), f"{VEC}.inputs.s.value"),
    (doc("s: -BIG", schema="f(Scalar s) -> Tensor", op="        output: {dtype: float32}\n"),
     f"{VEC}.inputs.s"),
    (doc("x: {dtype: float32, shape: [2], values: [1, BIG]}"), f"{VEC}.inputs.x.values[1]"),
    (doc(vector="            expected: {values: [BIG]}\n"), f"{VEC}.expected.values[0]"),
    (doc("x: {dtype: float32, shape: [2], random: {low: BIG}}"), f"{VEC}.inputs.x.random.low"),
    (doc("x: {dtype: float32, shape: [2], random: {high: -BIG}}"),
     f"{VEC}.inputs.x.random.high"),
    (doc("x: {dtype: float32, shape: [2], random: {distribution: normal, std: BIG}}"),
     f"{VEC}.inputs.x.random.std"),
    (doc("x: {dtype: float32, shape: [2], random: {distribution: normal, mean: BIG.5}}"),
     f"{VEC}.inputs.x.random.mean"),
    (doc("x: {dtype: int32, shape: [2], random: {distribution: integers, low: BIG}}"),
     f"{VEC}.inputs.x.random.low"),
    (doc(vector="            rtol: BIG\n"), f"{VEC}.rtol"),
    (doc(vector="            atol: BIG\n"), f"{VEC}.atol"),
    (doc(op="        rtol: BIG\n"), "$.libraries[0].ops[0].rtol"),
    (doc(op="        atol: BIG\n"), "$.libraries[0].ops[0].atol"),
    (doc(library="    defaults: {rtol: BIG}\n"), f"{LIB}.defaults.rtol"),
    (doc(library="    defaults: {atol: BIG}\n"), f"{LIB}.defaults.atol"),
    (doc(top="defaults: {rtol: BIG}\n"), "$.defaults.rtol"),
    (doc(top="defaults: {atol: BIG}\n"), "$.defaults.atol"),
    (doc(op="        stack_size: BIG\n"), "$.libraries[0].ops[0].stack_size"),
    (doc("x: {dtype: float32, shape: [BIG], random: {}}"), f"{VEC}.inputs.x.shape[0]"),
])
def test_a_400_digit_number_is_one_located_error_wherever_it_is(proj, text, where):
    number = re.search(r"-?BIG(\.5)?", text).group().replace("BIG", BIG)
    text = text.replace("BIG", BIG)
    path = write("m.yaml", text)
    assert errors(path) == [
        f"{path}:{at(text, number)}: {where}: number '{number[:24]}...' has {len(number)} "
        f"characters; a number has at most {MAX_NUMBER_LENGTH} (MAX_NUMBER_LENGTH)"]


def test_a_float_literal_beyond_float_range_is_refused_not_made_infinite(proj):
    """1e400 is a 5-character number past the largest double: not an
    infinity by accident (.inf says so), wherever it is written (issue 17)."""
    text = doc(vector="            rtol: 1e400\n")
    path = write("m.yaml", text)
    assert errors(path) == [
        f"{path}:{at(text, '1e400')}: {VEC}.rtol: number '1e400' is beyond the largest double "
        "(1.8e308) and would become an infinity; write .inf or -.inf for one"]


# ---------------------------------------------------------------------------
# 3. RecursionError from deep values: bounded by MAX_DEPTH; below it, words
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [242, 482])
def test_values_nested_hundreds_deep_stop_at_the_depth_limit(proj, depth):
    text = doc("x: {dtype: float32, shape: [1], values: " + "[" * depth + "1" + "]" * depth + "}")
    path = write("m.yaml", text)
    # the vector's input mapping is level 9: its values' 56th list is level 65
    line, column = at(text, "[" * depth).split(":")
    assert errors(path) == [f"{path}:{line}:{int(column) + MAX_DEPTH - 9}: $: YAML nesting "
                            f"deeper than {MAX_DEPTH} levels (MAX_DEPTH)"]


def test_values_nested_just_below_the_limit_get_a_semantic_message(proj):
    depth = MAX_DEPTH - 9
    text = doc("x: {dtype: float32, shape: [2], values: " + "[" * depth + "1" + "]" * depth + "}")
    path = write("m.yaml", text)
    assert errors(path) == [f"{path}:{at(text, '[[')}: {VEC}.inputs.x.values: 1 values do not "
                            "fill shape [2] (2 elements)"]


# ---------------------------------------------------------------------------
# 4. A hang in include globs through symlink loops
# ---------------------------------------------------------------------------

TEAM = ("version: 1\nlibraries:\n  - name: {name}\n    sources: [../../k/k.cpp]\n    ops:\n"
        "      - schema: \"{name}(Tensor x) -> Tensor\"\n        reference: numpy:negative\n"
        "        vectors: [{{name: v, inputs: {{x: {{dtype: float32, shape: [1], "
        "values: [1]}}}}}}]\n")


def test_glob_through_symlink_loops_ends_and_loads_each_file_once(proj):
    write("teams/a/ops.yaml", TEAM.format(name="a"))
    write("teams/b/ops.yaml", TEAM.format(name="b"))
    os.symlink(".", "self")
    os.symlink(".", "teams/again")
    os.symlink("..", "teams/a/up")
    os.symlink("/usr", "teams/b/usr")  # outside: never walked
    path = write("ops.yaml", "version: 1\ninclude: [\"**/*.yaml\"]\n")
    start = time.process_time()
    col = load_manifest(path)
    assert time.process_time() - start < 5
    # each file by its shortest spelling: its ../../k/k.cpp resolves
    assert col.manifests == ("ops.yaml", "teams/a/ops.yaml", "teams/b/ops.yaml")
    assert [lib.sources for lib in col.libraries] == [("k/k.cpp",), ("k/k.cpp",)]


def test_a_glob_has_a_bound_on_matches_and_on_entries(proj, monkeypatch):
    for i in range(6):
        write(f"teams/t{i}/ops.yaml", TEAM.format(name=f"t{i}"))
    path = write("ops.yaml", "version: 1\ninclude: [\"teams/*/ops.yaml\"]\n")
    assert len(load_manifest(path).libraries) == 6
    monkeypatch.setattr(mpaths, "MAX_GLOB_MATCHES", 5)
    assert errors(path) == [f"{path}:2:11: $.include[0]: include pattern 'teams/*/ops.yaml' "
                            "matches more than the most a pattern may match (MAX_GLOB_MATCHES, "
                            "MAX_GLOB_ENTRIES in docs/manifest.md); narrow it"]
    monkeypatch.setattr(mpaths, "MAX_GLOB_MATCHES", 1000)
    monkeypatch.setattr(mpaths, "MAX_GLOB_ENTRIES", 4)
    assert errors(path) == [f"{path}:2:11: $.include[0]: include pattern 'teams/*/ops.yaml' "
                            "walks more directory entries than the includes of a collection may "
                            "examine (MAX_GLOB_MATCHES, MAX_GLOB_ENTRIES in docs/manifest.md); narrow it"]


# ---------------------------------------------------------------------------
# 5. Special files: never opened, named as what they are
# ---------------------------------------------------------------------------

def test_a_fifo_or_a_device_as_the_top_manifest_is_named_at_once(proj):
    os.mkfifo("fifo.yaml")
    for path, what in (("fifo.yaml", "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        lines, seconds, _ = load_in_child(path, timeout=30)
        assert lines == [f"{path}:1:1: $: cannot read the file: is {what}, not a regular file"]
        assert seconds < 5


def test_special_files_named_by_a_manifest_are_named_as_such(proj):
    os.mkfifo("k/fifo")
    os.symlink("fifo", "k/fifo.cpp")
    os.symlink("fifo", "k/fifo.yaml")
    os.symlink("fifo", "k/fifo.py")
    os.symlink("fifo", "k/fifo.npy")
    os.symlink("loop.cpp", "k/loop.cpp")
    server = socket.socket(socket.AF_UNIX)
    server.bind("k/sock.cpp")
    try:
        text = doc("x: {npy: k/fifo.npy}", sources="[k/fifo.cpp, k/sock.cpp, k/loop.cpp]",
                   top="include: [k/fifo.yaml]\n", library="    includes: [k/fifo]\n",
                   op="        output: {dtype: float32}\n",
                   vector="            expected: {reference: k/fifo.py:f}\n")
        path = write("m.yaml", text)
        where = "not a regular file (resolved to k/{})"
        assert errors(path) == [
            f"{path}:{at(text, 'k/fifo.yaml')}: $.include[0]: include 'k/fifo.yaml' is a FIFO "
            "(named pipe), " + where.format("fifo.yaml"),
            f"{path}:{at(text, 'k/fifo.cpp')}: {LIB}.sources[0]: source file 'k/fifo.cpp' is a "
            "FIFO (named pipe), " + where.format("fifo.cpp"),
            f"{path}:{at(text, 'k/sock.cpp')}: {LIB}.sources[1]: source file 'k/sock.cpp' is a "
            "socket, " + where.format("sock.cpp"),
            f"{path}:{at(text, 'k/loop.cpp')}: {LIB}.sources[2]: source file 'k/loop.cpp' is a "
            "symlink loop, " + where.format("loop.cpp"),
            f"{path}:{at(text, 'k/fifo]')}: {LIB}.includes[0]: include directory 'k/fifo' is a "
            "FIFO (named pipe), not a directory (resolved to k/fifo)",
            f"{path}:{at(text, 'k/fifo.npy')}: {VEC}.inputs.x.npy: .npy file 'k/fifo.npy' is a "
            "FIFO (named pipe), " + where.format("fifo.npy"),
            f"{path}:{at(text, 'k/fifo.py')}: {VEC}.expected.reference: reference file "
            "'k/fifo.py' is a FIFO (named pipe), " + where.format("fifo.py"),
        ]
    finally:
        server.close()


def test_a_symlink_to_a_device_is_outside_unless_allowed_and_then_named(proj):
    os.symlink("/dev/zero", "k/zero.npy")
    os.symlink("/dev/zero", "k/zero.yaml")
    text = doc("x: {npy: k/zero.npy}", top="include: [k/zero.yaml]\n")
    path = write("m.yaml", text)
    npy = f"{path}:{at(text, 'k/zero.npy')}: {VEC}.inputs.x.npy: .npy file 'k/zero.npy' is"
    assert errors(path) == [
        f"{path}:2:11: $.include[0]: include 'k/zero.yaml' is outside the project (resolved to "
        f"{os.path.relpath('/dev/zero')}): {OUTSIDE}",
        f"{npy} outside the project (resolved to {os.path.relpath('/dev/zero')}): {OUTSIDE}",
    ]
    assert errors(path, allow_paths=["/dev"]) == [
        f"{path}:2:11: $.include[0]: include 'k/zero.yaml' is a character device, not a regular "
        "file (resolved to k/zero.yaml)",
        f"{npy} a character device, not a regular file (resolved to k/zero.npy)",
    ]


def test_a_glob_that_matches_a_fifo_names_it(proj):
    write("teams/a/ops.yaml", TEAM.format(name="a"))
    os.mkfifo("teams/a/zz.yaml")
    path = write("ops.yaml", "version: 1\ninclude: [\"teams/*/*.yaml\"]\n")
    assert errors(path) == [f"{path}:2:11: $.include[0]: include pattern 'teams/*/*.yaml' "
                            "matches teams/a/zz.yaml, which is a FIFO (named pipe), not a "
                            "regular file"]


# ---------------------------------------------------------------------------
# 6. Memory and time before the limits: checked while reading
# ---------------------------------------------------------------------------

def test_a_4mb_list_stops_at_the_node_limit_in_bounded_time_and_memory(proj):
    text = "version: 1\nlibraries: [" + ",".join(["0"] * 2_000_000)
    write("big.yaml", text[:MAX_MANIFEST_BYTES - 2] + "]\n")
    lines, seconds, rss_mb = load_in_child("big.yaml")
    # nodes: the document's mapping, 'version', 1, 'libraries', the list, its items
    column = len("libraries: [") + 2 * (MAX_NODES - 5) + 1
    assert lines == [f"big.yaml:2:{column}: $.libraries[{MAX_NODES - 5}]: document too large: "
                     f"more than {MAX_NODES} YAML nodes (aliases expanded; MAX_NODES)"]
    assert seconds < 10 and rss_mb < 500, (seconds, rss_mb)


def test_a_file_beyond_the_size_limit_is_one_line_at_once(proj):
    with open("huge.yaml", "wb") as f:
        f.truncate(50 * 1024 * 1024)
    start = time.process_time()
    assert errors("huge.yaml") == [
        f"huge.yaml:1:1: $: cannot read the file: is larger than {MAX_MANIFEST_BYTES} bytes "
        f"({50 * 1024 * 1024} bytes), the most a manifest may be (4 MiB, MAX_MANIFEST_BYTES)"]
    assert time.process_time() - start < 1


def test_alias_expansion_counts_against_the_node_limit(proj):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n"
        for i in range(8))
    path = write("lol.yaml", laughs)
    start = time.process_time()
    (line,) = errors(path)
    assert f"document too large: more than {MAX_NODES} YAML nodes" in line
    assert time.process_time() - start < 5


# ---------------------------------------------------------------------------
# 7. Reference files and .npy headers read within bounds
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("source,message", [
    ("-" * 1_000_000, "cannot be read (is larger than 262144 bytes (1000000 bytes))"),
    ("-" * 200_000 + "1\n", "does not parse: nested too deeply for Python's parser"),
    ("x = " + "a+" * 100_000 + "a\n", "does not parse: nested too deeply for Python's parser"),
    ("x = '\x00'\n", "does not parse: "),              # the words are Python's
    ("\xff\xfe = 1\n", "does not parse: line 1: "),
    ("def f(:\n", "does not parse: line 1: "),
])
def test_a_hostile_reference_file_is_a_located_message(proj, source, message):
    pathlib.Path("k/r.py").write_text(source, encoding="latin-1")
    text = doc().replace("k/ref.py:f", "k/r.py:f")
    path = write("m.yaml", text)
    start = time.process_time()
    (line,) = errors(path)
    prefix = f"{path}:{at(text, 'k/r.py')}: $.libraries[0].ops[0].reference: reference file " \
             "'k/r.py' "
    assert line.startswith(prefix + message) and (line == prefix + message
                                                  or message.endswith(" ")), line
    assert time.process_time() - start < 10


@pytest.mark.parametrize("head,message", [
    (b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF),
     "its header claims 4294967295 bytes; at most 65536 are read (MAX_NPY_HEADER_BYTES)"),
    (b"\x93NUMPY\x01\x00" + struct.pack("<H", 4000) + b"(" * 4000, "unreadable header"),
    (b"\x93NUMPY\x09\x00\x00\x00", "unknown .npy format version 9"),
    (b"\x93NUMPY\x01\x00" + struct.pack("<H", 100) + b"{}", "truncated header"),
])
def test_a_hostile_npy_header_is_a_located_message(proj, head, message):
    pathlib.Path("k/h.npy").write_bytes(head)
    path = write("m.yaml", doc("x: {npy: k/h.npy}"))
    start = time.process_time()
    assert errors(path) == [f"{path}:11:24: {VEC}.inputs.x.npy: 'k/h.npy' is not a readable "
                            f".npy file ({message})"]
    assert time.process_time() - start < 1


# ---------------------------------------------------------------------------
# 8. Diagnostics safe to print: one line each, escaped, cut
# ---------------------------------------------------------------------------

def test_control_characters_in_keys_and_values_are_escaped(proj):
    path = write("m.yaml", '"a\\nb\\e[2J\\u202e": 1\n' + doc().replace("name: lib", 'name: "l\\rx"')
                 .replace("version: 1\n", "version: 1\n", 1))
    lines = errors(path)
    assert lines == [
        f"{path}:1:1: $['a\\nb\\x1b[2J\\u202e']: unknown key 'a\\nb\\x1b[2J\\u202e' (expected "
        "one of: version, include, allow_paths, defaults, libraries)",
        f"{path}:4:11: $.libraries[0].name: 'l\\rx' is not a C identifier (letters, digits "
        "and '_', not starting with a digit)",
    ]
    text = "\n".join(lines)
    assert not any(ord(c) < 0x20 and c != "\n" or c == "\u202e" for c in text)


def test_long_text_is_cut_and_a_file_is_never_echoed(proj):
    secret = "root:x:0:0:" + "s3cret" * 10_000
    write("notes.txt", secret)
    path = write("m.yaml", "version: 1\ninclude: [notes.txt]\nlibraries: 'x" + "y" * 5000 + "'\n")
    text = "\n".join(errors(path))
    assert "s3cret" not in text and "root:x" not in text
    assert max(len(line) for line in text.split("\n")) < 400
    assert "notes.txt:1:1: $: a manifest is a mapping with the keys 'version' and 'libraries', " \
           "got a string" in text


# ---------------------------------------------------------------------------
# 9. Every independent error in one run
# ---------------------------------------------------------------------------

def test_eight_independent_mistakes_in_one_run(monkeypatch):
    """tests/manifests/bad/eight_mistakes.yaml (its exact output is in
    test_manifest.BAD_CASES): a YAML syntax error in an included file, a
    duplicate key, schema errors beside a missing source, a reference typo,
    a wrong input name, values that do not fill their shape, a 400-digit
    number, a path outside the project, an unknown dtype: all in one run."""
    monkeypatch.chdir(ROOT)
    lines = errors("tests/manifests/bad/eight_mistakes.yaml")
    kinds = ["invalid YAML", "duplicate key", "expected a boolean", "not found",
             "expected an integer", "defines no 'rlu'", "do not fill shape", "MAX_NUMBER_LENGTH",
             "names no argument", "must not be negative", "outside the project",
             "unknown dtype"]
    assert [k for k in kinds if not any(k in line for line in lines)] == []
    assert len(lines) == len(kinds)


def test_a_schema_error_does_not_hide_checks_of_siblings_or_other_libraries(proj):
    path = write("m.yaml", doc("x: {dtype: float32, shape: [5], values: [1, 2, 3]}",
                               library="    multicore: 3\n",
                               sources="[k/k.cpp, k/missing.cpp]",
                               vector="            rtol: -1\n            atol: x\n"))
    text = pathlib.Path(path).read_text()
    assert errors(path) == [
        f"{path}:{at(text, 'k/missing.cpp')}: {LIB}.sources[1]: source file 'k/missing.cpp' "
        "not found (resolved to k/missing.cpp)",
        f"{path}:{at(text, 'multicore: 3', skip=11)}: {LIB}.multicore: expected a boolean (true "
        "or false), got an integer (3)",
        f"{path}:{at(text, '[1, 2, 3]')}: {VEC}.inputs.x.values: 3 values do not fill shape "
        "[5] (5 elements)",
        f"{path}:{at(text, '-1')}: {VEC}.rtol: rtol must not be negative, got -1",
        f"{path}:{at(text, 'x', text.count('x') - 1)}: {VEC}.atol: expected a number, got a "
        "string ('x')",
    ]


# ---------------------------------------------------------------------------
# 10. Outside the tree: refused unless allowed, never an existence oracle
# ---------------------------------------------------------------------------

def test_paths_outside_the_project_are_refused(proj):
    up = "../" * 30
    text = doc(f"x: {{npy: {up}etc/passwd.npy}}", sources=f"[/etc/passwd, {up}etc/hostname]",
               top=f"include: [\"{up}etc/passwd\"]\n", library="    includes: [/etc]\n",
               vector="            expected: {reference: /etc/x.py:f}\n")
    path = write("m.yaml", text)
    rel = os.path.relpath
    assert errors(path) == [
        f"{path}:2:11: $.include[0]: include '{shown(up + 'etc/passwd')}' is outside the "
        f"project (resolved to {rel('/etc/passwd')}): {OUTSIDE}",
        f"{path}:{at(text, '/etc/passwd,')}: {LIB}.sources[0]: source file '/etc/passwd' is "
        f"outside the project (resolved to {rel('/etc/passwd')}): {OUTSIDE}",
        f"{path}:{at(text, up + 'etc/hostname')}: {LIB}.sources[1]: source file "
        f"'{shown(up + 'etc/hostname')}' is outside the project (resolved to "
        f"{rel(os.path.realpath('/etc/hostname'))}): {OUTSIDE}",
        f"{path}:{at(text, '/etc]')}: {LIB}.includes[0]: include directory '/etc' is outside "
        f"the project (resolved to {rel('/etc')}): {OUTSIDE}",
        f"{path}:{at(text, up + 'etc/passwd.npy')}: {VEC}.inputs.x.npy: .npy file "
        f"'{shown(up + 'etc/passwd.npy')}' is outside the project (resolved to "
        f"{rel('/etc/passwd.npy')}): {OUTSIDE}",
        f"{path}:{at(text, '/etc/x.py')}: {VEC}.expected.reference: reference file '/etc/x.py' "
        f"is outside the project (resolved to {rel('/etc/x.py')}): {OUTSIDE}",
    ]


def test_outside_an_existing_and_a_missing_file_read_the_same(proj, tmp_path):
    (tmp_path / "there.npy").write_bytes(b"x")
    lines = [errors(write("m.yaml", doc(f"x: {{npy: ../{name}}}")))[0]
             for name in ("there.npy", "nothere.npy")]
    assert lines[0].replace("there.npy", "X") == lines[1].replace("nothere.npy", "X")


def test_a_symlink_out_of_the_tree_is_outside(proj, tmp_path):
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "v.cpp").write_text("//\n")
    os.symlink("../../vendor", "k/ext")
    path = write("m.yaml", doc(sources="[k/ext/v.cpp]"))
    assert errors(path) == [f"{path}:4:15: {LIB}.sources[0]: source file 'k/ext/v.cpp' is "
                            f"outside the project (resolved to ../vendor/v.cpp): {OUTSIDE}"]
    assert load_manifest(path, allow_paths="../vendor").libraries[0].sources == ("k/ext/v.cpp",)


def test_allow_paths_in_the_top_manifest_or_from_the_caller(proj, tmp_path):
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "v.cpp").write_text("//\n")
    text = doc(sources="[../vendor/v.cpp]")
    path = write("m.yaml", text)
    assert len(errors(path)) == 1
    for kwargs in ({"allow_paths": "../vendor"}, {"allow_paths": [str(tmp_path / "vendor")]},
                   {"allow_paths": os.pathsep.join(["/nowhere", "../vendor"])}):
        assert load_manifest(path, **kwargs).libraries[0].sources == ("../vendor/v.cpp",)
    path = write("top.yaml", text.replace("version: 1\n", "version: 1\nallow_paths: [../vendor]\n"))
    assert load_manifest(path).libraries[0].sources == ("../vendor/v.cpp",)


def test_allow_paths_is_refused_in_an_included_manifest_and_must_be_a_folder(proj):
    write("teams/a/ops.yaml", "version: 1\nallow_paths: [/]\n"
          + TEAM.format(name="a").replace("version: 1\n", ""))
    path = write("ops.yaml", "version: 1\nallow_paths: [nowhere, k/k.cpp]\n"
                 "include: [teams/a/ops.yaml]\n")
    assert errors(path) == [
        f"{path}:2:15: $.allow_paths[0]: allow_paths entry 'nowhere' is not found; it must be "
        "a folder (resolved to nowhere)",
        f"{path}:2:24: $.allow_paths[1]: allow_paths entry 'k/k.cpp' is a regular file; it must "
        "be a folder (resolved to k/k.cpp)",
        "teams/a/ops.yaml:2:1: $.allow_paths: allow_paths is accepted in the top manifest only "
        "(an included manifest cannot widen what the collection may read): list the folder "
        "there, or pass ALLOW_PATHS=",
    ]


def test_an_allowed_outside_file_that_is_not_a_manifest_is_not_echoed(proj):
    up = "../" * 30
    path = write("m.yaml", f"version: 1\ninclude: [\"{up}etc/passwd\"]\n")
    text = "\n".join(errors(path, allow_paths=["/etc"]))
    assert "root:" not in text
    assert text.endswith("etc/passwd:1:1: $: a manifest is a mapping with the keys 'version' "
                         "and 'libraries', got a string")


# ---------------------------------------------------------------------------
# What a validation read: Collection.reads and reads_still_hold
# ---------------------------------------------------------------------------

def _reads_project(root):
    write("k/ref.py", "import helper\ndef f(x):\n    return x\n")
    write("k/helper.py", "SCALE = 1\n")
    write("teams/a/ops.yaml", TEAM.format(name="a").replace(
        "reference: numpy:negative", "reference: ../../k/ref.py:f").replace(
        "values: [1]}}", "values: [1]}, y: {npy: ../../k/a.npy}}").replace(
        "(Tensor x)", "(Tensor x, Tensor y)"))
    os.symlink("k", "kdir")
    return write("ops.yaml", "version: 1\ninclude: [\"teams/*/ops.yaml\"]\n"
                 "libraries:\n  - name: top\n    sources: [kdir/k.cpp]\n    includes: [k]\n"
                 "    ops:\n      - schema: \"t(Tensor x) -> Tensor\"\n"
                 "        vectors: [{name: v, inputs: {x: {npy: k/a.npy}}, "
                 "expected: {reference: k/ref.py:f}}]\n")


def test_reads_list_every_kind_of_fact_with_root_relative_paths(proj):
    col = load_manifest(_reads_project(proj), allow_paths=["k"])
    kinds = {r.kind for r in col.reads}
    assert kinds == {"file", "kind", "real", "glob", "npy", "reference", "module", "allow"}
    assert all(isinstance(r, Read) and not r.path.startswith("/") and "\\" not in r.path
               for r in col.reads)
    by_kind = {(r.kind, r.path): r.value for r in col.reads}
    assert by_kind[("real", "kdir/k.cpp")] == "k/k.cpp"
    assert by_kind[("kind", "kdir/k.cpp")] == "regular"
    assert by_kind[("glob", "teams")] == ("*/ops.yaml", (("teams/a/ops.yaml", "regular"),), None)
    assert ("file", "teams/a/ops.yaml") in by_kind and ("npy", "k/a.npy") in by_kind
    assert ("reference", "k/ref.py") in by_kind and ("module", "k/helper.py") in by_kind
    assert by_kind[("kind", "k/helper.py")] == "regular"
    assert by_kind[("kind", "k/helper")] == "missing"     # (where a package would be)
    assert reads_still_hold(col.reads, ".")
    assert reads_still_hold(col.reads, str(proj))


@pytest.mark.parametrize("change", ["file", "kind", "real", "glob", "npy", "reference",
                                    "module", "allow"])
def test_changing_any_fact_makes_reads_not_hold(proj, tmp_path, change):
    col = load_manifest(_reads_project(proj), allow_paths=["k"])
    assert reads_still_hold(col.reads)
    if change == "file":
        with open("teams/a/ops.yaml", "a") as f:
            f.write("# edited\n")
    elif change == "kind":
        os.unlink("k/k.cpp")
        os.mkdir("k/k.cpp")
    elif change == "real":
        os.mkdir("k2")
        (proj / "k2" / "k.cpp").write_text("// kernel\n")
        os.unlink("kdir")
        os.symlink("k2", "kdir")
    elif change == "glob":
        write("teams/b/ops.yaml", TEAM.format(name="b"))
    elif change == "npy":
        data = pathlib.Path("k/a.npy").read_bytes().replace(b"(4,)", b"(2,)")
        pathlib.Path("k/a.npy").write_bytes(data)
    elif change == "reference":
        with open("k/ref.py", "a") as f:
            f.write("def g(x):\n    return x\n")
    elif change == "module":
        with open("k/helper.py", "a") as f:
            f.write("SCALE = 2\n")
    elif change == "allow":
        os.rename("k", "k_old")
        os.symlink("k_old", "k")
    assert not reads_still_hold(col.reads)


def test_reads_still_hold_never_raises(proj):
    assert not reads_still_hold([Read("file", "nowhere.yaml", "0" * 64)])
    assert not reads_still_hold([Read("bogus", "x", None)])
    assert reads_still_hold([])


# ---------------------------------------------------------------------------
# No traceback, ever: a seeded mutation campaign (the long one: bench/)
# ---------------------------------------------------------------------------

def test_seeded_mutations_never_traceback(proj):
    """A few hundred mutated manifests (bytes, lines, YAML structure, hostile
    values, special and outside paths; bench/fuzz_manifest.py): each loads or
    gives located errors, within the time bound (CPU seconds: they hold on
    a loaded machine), never an internal error."""
    rng = random.Random(13)
    fuzz_manifest.prepare(proj)
    start = time.process_time()
    stats = fuzz_manifest.campaign(proj, rng, cases=300, case_timeout=5)
    assert stats["failures"] == [], stats["failures"][:3]
    assert stats["cases"] == 300 and stats["errors"] > 200
    assert time.process_time() - start < 50


@pytest.mark.parametrize("error,words", [
    (RuntimeError("boom\x1b[2J"), "internal error while checking this file (RuntimeError: "
                                   "boom\\x1b[2J); please report it"),
    (MemoryError(), "this file is too large or deep to check (MemoryError)"),
    (RecursionError(), "this file is too large or deep to check (RecursionError)"),
])
def test_the_last_net_turns_any_exception_into_a_located_line(proj, monkeypatch, error, words):
    """Kept by the fuzz campaign at zero hits; here made to fire."""
    from gpsimd_build.manifest import document

    def fail(self):
        raise error
    monkeypatch.setattr(document._ManifestFile, "libraries", fail)
    path = write("m.yaml", doc())
    assert errors(path) == [f"{path}:1:1: $: {words}"]
    from gpsimd_build.manifest import collection
    monkeypatch.setattr(collection._CollectionLoader, "check_unique_library_names", fail)
    (line,) = errors(path)
    assert line.startswith(f"{path}:1:1: $: ")


# ---------------------------------------------------------------------------
# Every limit is a named constant, documented in docs/manifest.md with its value
# ---------------------------------------------------------------------------

def test_every_limit_is_in_the_manifest_doc_with_its_value():
    from gpsimd_build import yamlloc
    from gpsimd_build.manifest import imports, probes, rules
    readme = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")
    shown_as = {
        "MAX_MANIFEST_BYTES": (yamlloc.MAX_MANIFEST_BYTES, f"{MAX_MANIFEST_BYTES >> 20} MiB"),
        "MAX_DEPTH": (yamlloc.MAX_DEPTH, f"{MAX_DEPTH} nested"),
        "MAX_NODES": (yamlloc.MAX_NODES, f"{MAX_NODES:,} YAML nodes"),
        "MAX_NUMBER_LENGTH": (yamlloc.MAX_NUMBER_LENGTH, f"{MAX_NUMBER_LENGTH} characters"),
        "MAX_PATH_CHARS": (rules.MAX_PATH_CHARS, f"{rules.MAX_PATH_CHARS:,} characters"),
        "MAX_SCHEMA_CHARS": (rules.MAX_SCHEMA_CHARS, f"{rules.MAX_SCHEMA_CHARS:,} characters"),
        "MAX_GLOB_MATCHES": (mpaths.MAX_GLOB_MATCHES, f"{mpaths.MAX_GLOB_MATCHES:,} files"),
        "MAX_GLOB_ENTRIES": (mpaths.MAX_GLOB_ENTRIES, f"{mpaths.MAX_GLOB_ENTRIES:,} directory"),
        "MAX_REFERENCE_BYTES": (probes.MAX_REFERENCE_BYTES,
                                f"{probes.MAX_REFERENCE_BYTES >> 10} KiB"),
        "MAX_NPY_HEADER_BYTES": (probes.MAX_NPY_HEADER_BYTES,
                                 f"{probes.MAX_NPY_HEADER_BYTES >> 10} KiB"),
        "MAX_DIAGNOSTICS_PER_FILE": (rules.MAX_DIAGNOSTICS_PER_FILE,
                                     f"{rules.MAX_DIAGNOSTICS_PER_FILE:,} problems"),
        "MAX_INCLUDE_DEPTH": (rules.MAX_INCLUDE_DEPTH, f"{rules.MAX_INCLUDE_DEPTH} nested"),
        "MAX_MODULES": (imports.MAX_MODULES, f"{imports.MAX_MODULES:,} local modules"),
    }
    for name, (_, text) in shown_as.items():
        assert f"| `{name}` | {text}" in readme, name
    assert f"up to {yamlloc.REPARSE_LIMIT >> 20} MiB again" in readme
    schema = json.loads((ROOT / "schema" / "ops.schema.json").read_text())
    assert schema["$defs"]["path"]["maxLength"] == rules.MAX_PATH_CHARS
    assert schema["properties"]["include"]["items"]["maxLength"] == rules.MAX_PATH_CHARS
    assert schema["$defs"]["op"]["properties"]["schema"]["maxLength"] == rules.MAX_SCHEMA_CHARS


# ---------------------------------------------------------------------------
# Through SCons: the segfault case and ALLOW_PATHS=
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_scons_reports_deep_nesting_and_honours_allow_paths(tmp_path):
    from conftest import copy_project, run_scons
    project = copy_project(tmp_path / "p")
    (project / "d.yaml").write_text("version: 1\nlibraries: " + "[" * 30000 + "]" * 30000)
    proc = run_scons(project, "-n", "MANIFEST=d.yaml", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().endswith(
        f"d.yaml:2:{11 + MAX_DEPTH}: $: YAML nesting deeper than {MAX_DEPTH} levels (MAX_DEPTH)")
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "relu.cpp").write_text((project / "kernels/relu/relu.cpp").read_text())
    manifest = textwrap.dedent("""\
        version: 1
        libraries:
          - name: vend
            sources: [../vendor/relu.cpp]
            ops:
              - schema: "relu_forward(Tensor x) -> Tensor"
                reference: numpy:abs
                vectors: [{name: v, inputs: {x: {dtype: float32, shape: [3], values: [1, 2, 3]}}}]
        """)
    (project / "v.yaml").write_text(manifest)
    proc = run_scons(project, "-n", "MANIFEST=v.yaml", timeout=120)
    assert proc.returncode == 2 and "is outside the project" in proc.stderr, proc.stderr
    proc = run_scons(project, "-n", "MANIFEST=v.yaml", f"ALLOW_PATHS={vendor}", timeout=120)
    assert proc.returncode == 0, proc.stderr
