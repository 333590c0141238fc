"""The manifest front door: YAML with locations, JSON Schema, semantic checks,
the typed model. Independent of the shipped collection: every manifest used
here lives under tests/manifests/ (bad/ one problem family per file, good/
files that must load into exact model values)."""

import json
import os
import pathlib
import re
import zlib

import jsonschema
import pytest

from gpsimd_build import manifest as m
from gpsimd_build.diagnostics import Diagnostic, render_json_path
from gpsimd_build.manifest import (
    Collection, Expected, Library, Location, ManifestError, Op, Reference, ScalarInput,
    TensorInput, Vector, load_manifest,
)
from gpsimd_build.manifest.vectors import CHECKS_ONLY_NEEDS_SHAPE
from gpsimd_build.opschema import parse_schema
from gpsimd_build.yamlloc import YamlError, load_yaml_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
BAD = "tests/manifests/bad"
GOOD = "tests/manifests/good"


@pytest.fixture(autouse=True)
def _at_project_root(monkeypatch):
    """Manifest paths in messages are as given: run from the project root."""
    monkeypatch.chdir(ROOT)


def errors_of(path, **kwargs):
    with pytest.raises(ManifestError) as info:
        load_manifest(path, **kwargs)
    lines = str(info.value).split("\n")
    assert lines == [str(d) for d in info.value.diagnostics]
    return lines


# ---------------------------------------------------------------------------
# Bad manifests: the exact, complete error output of each
# ---------------------------------------------------------------------------

P = "$.libraries[0].ops[0]"
V = P + ".vectors[0]"

BAD_CASES = {
    "malformed_yaml": [
        "5:1: $: invalid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 4, column 14)",
    ],
    "tab_indent": [
        "4:1: $: tab character used for indentation (YAML indents with spaces only)",
    ],
    "duplicate_key": [
        "12:5: $.libraries[0].name: duplicate key 'name' (first defined at line 3)",
    ],
    "unknown_key": [
        "3:5: $.libraries[0]: missing required key 'sources'",
        "4:5: $.libraries[0].sorces: unknown key 'sorces' (did you mean 'sources'?)",
    ],
    "missing_key": [
        "3:5: $.libraries[0]: missing required key 'sources'",
    ],
    "wrong_type": [
        "4:16: $.libraries[0].multicore: expected a boolean (true or false), got a string "
        "('yes'); this file is YAML 1.2, where 'yes' is a string (YAML 1.1 read it as a "
        "boolean): write true or false",
        "8:21: $.libraries[0].ops[0].stack_size: expected an integer, got a string ('big')",
    ],
    "bad_schema": [
        # column 17 is the opening quote: 17 + 1 + 23 characters before 'doubel'
        "6:41: $.libraries[0].ops[0].schema: invalid op schema: unknown type 'doubel'; "
        "supported types are Tensor, Scalar, int, float, long long; did you mean 'double'?",
        # a plain scalar: 17 + 36 characters before the second return
        "12:53: $.libraries[0].ops[1].schema: invalid op schema: the device ABI returns "
        "exactly one Tensor; found 2 returns",
    ],
    "op_name_too_long": [
        "7:15: $.libraries[0].ops[0].name: op name 'a_function_name_of_32_characters' is too "
        "long (32 characters); CustomOp function names must be less than 32 characters "
        "(the Neuron SDK's build driver, build_custom_op.py)",
        "13:22: $.libraries[0].ops[1].schema: invalid op schema: op name "
        "'an_op_name_of_exactly_32_characters' is too long (35 characters); CustomOp function "
        "names must be less than 32 characters",
    ],
    "duplicate_library": [
        "3:11: $.libraries[0].name: duplicate library name 'relu' (also at line 12)",
        "12:11: $.libraries[1].name: duplicate library name 'relu' (also at line 3)",
    ],
    "duplicate_names": [
        "12:19: $.libraries[0].ops[0].vectors[1].name: duplicate vector name 'small' "
        "(first at line 8)",
        "16:17: $.libraries[0].ops[1].schema: duplicate op name 'relu' in library 'relu' "
        "(first at line 6)",
    ],
    # (two ops on one kernel: the generated wrapper stopped with a traceback)
    "shared_kernel": [
        "14:17: $.libraries[0].ops[1].kernel: kernel 'relu_forward' is already the kernel of "
        "the op at line 7: each op of a library registers a function of its own",
    ],
    # (each compiled on its own and stopped the generated wrapper.cpp: g's
    # g_wrapper() beside the kernel g_wrapper, wrapper_api.h's macro
    # customop_next_tensor(), stack_switch.hpp's STACK_SIZE)
    "wrapper_names": [
        "12:9: $.libraries[0].ops[1]: kernel 'g' clashes with the kernel 'g_wrapper' of the op "
        "at line 6: the generated wrapper.cpp defines g_wrapper() and g_stack_switch() for "
        "'g'; rename one",
        "19:17: $.libraries[0].ops[2].kernel: kernel 'g_wrapper_stack_switch' clashes with the kernel "
        "'g_wrapper' of the op at line 6: the generated wrapper.cpp defines "
        "g_wrapper_wrapper() and g_wrapper_stack_switch() for 'g_wrapper'; rename one",
        "25:18: $.libraries[0].ops[3].schema: invalid op schema: op name "
        "'customop_next_tensor' clashes with a name the generated wrapper.cpp uses; rename "
        "the op",
        "32:17: $.libraries[0].ops[4].kernel: kernel 'STACK_SIZE' clashes with a name the "
        "generated wrapper.cpp uses",
        # (its switch_stack_or_call_wrapper(), an overload of stack_switch.hpp's)
        "39:17: $.libraries[0].ops[5].kernel: kernel 'switch_stack_or_call' clashes with a "
        "name the generated wrapper.cpp uses (the wrapper's switch_stack_or_call_wrapper() "
        "made of it)",
    ],
    "unknown_dtype": [
        f"10:26: {V}.inputs.x.dtype: unknown dtype 'float33' (did you mean 'float32'?)",
    ],
    "input_no_argument": [
        f"11:15: {V}.inputs.y: input 'y' names no argument of 'relu(Tensor x) -> Tensor'",
    ],
    "argument_without_input": [
        f"10:15: {V}.inputs: no input for argument 'y' (Tensor)",
        f"10:15: {V}.inputs: no input for argument 'alpha' (float)",
    ],
    "missing_source": [
        "4:41: $.libraries[0].sources[1]: source file '../kernels/relu/missing.cpp' not found "
        "(resolved to tests/manifests/kernels/relu/missing.cpp)",
        "5:16: $.libraries[0].includes[0]: include directory '../kernels/nowhere' not found "
        "(resolved to tests/manifests/kernels/nowhere)",
    ],
    "too_many_dims": [
        f"10:67: {V}.inputs.x.shape[8]: a tensor has at most 8 dimensions "
        "(docs/kernel-api.md, Limits); this shape has 9",
    ],
    "dim_too_large": [
        f"10:55: {V}.inputs.x.shape[4]: dimension 65536 is larger than 65535, the largest "
        "dimension of a tensor of 5 to 8 dimensions (at most 4 dimensions: up to 4294967295; "
        "docs/kernel-api.md, Limits)",
    ],
    "dim_too_large_4d": [
        f"10:43: {V}.inputs.x.shape[0]: dimension 4294967296 is larger than 4294967295, the "
        "largest a tensor dimension may be (docs/kernel-api.md, Limits)",
        "14:42: $.libraries[0].ops[0].vectors[1].inputs.x.shape: shape [65536, 65536] has "
        "4294967296 elements; a descriptor counts at most 4294967295 (its 32-bit num_elem, "
        "the device ABI (gpsimd_host/abi.h))",
    ],
    "too_many_ops": [
        "66:9: $.libraries[0].ops[10]: a library has at most 10 ops (docs/kernel-api.md, Limits); "
        "this one has 11",
    ],
    "builtin_library": [
        "3:11: $.libraries[0].name: library name 'builtin' is reserved (docs/kernel-api.md, Limits)",
    ],
    "empty": [
        "1:1: $: empty document (the file holds no YAML value)",
    ],
    "multiple_documents": [
        "3:1: $: more than one YAML document in the file (expected exactly one)",
    ],
    "not_a_mapping": [
        "1:1: $: a manifest is a mapping with the keys 'version' and 'libraries', got a list",
    ],
    "bad_utf8": [
        "3:13: $: the file is not valid UTF-8 (byte 0xe9)",
    ],
    "input_kinds": [
        f"10:18: {V}.inputs.x: argument 'x' has type Tensor: give a tensor input (a mapping "
        "with dtype, shape and one of random, values, npy), not a scalar",
        f"11:22: {V}.inputs.alpha: argument 'alpha' has type float: give a number or "
        "{value: ..., dtype: ...}, not a tensor input",
        f"12:18: {V}.inputs.k: argument 'k' has type int (int32): 0.5 is not an integer",
    ],
    "no_expected": [
        f"8:13: {V}: {CHECKS_ONLY_NEEDS_SHAPE}",
        f"14:35: {P}.vectors[1].expected.reference: reference file "
        "'../kernels/relu/nope.py' not found (resolved to tests/manifests/kernels/relu/nope.py)",
    ],
    "values_mismatch": [
        f"10:67: {V}.inputs.x.values[1]: ragged values: every sub-list at one depth must "
        "have the same length",
        f"14:55: {P}.vectors[1].inputs.x.values: 4 values do not fill shape [2, 3] "
        "(6 elements)",
        f"18:56: {P}.vectors[2].inputs.x.values[1]: value 200 is out of range for int8 "
        "(-128..127)",
        f"22:18: {P}.vectors[3].inputs.x: a tensor input has exactly one of 'random', "
        "'values' or 'npy'; got 'random' and 'values'",
        f"26:59: {P}.vectors[4].inputs.x.values[1]: value 100000 is out of range for float16 "
        "(largest finite value 65504); write .inf for an infinity",
    ],
    "reference_no_function": [
        f"7:20: {P}.reference: reference file '../kernels/relu/reference.py' defines no "
        "'rlu' (did you mean 'relu'?)",
    ],
    "version_two": [
        "1:10: $.version: unsupported manifest version 2 (this build reads version 1)",
        f"10:70: {V}.inputs.x.random.distribution: unknown distribution 'gauss' "
        "(expected one of: uniform, normal, integers)",
    ],
    # -- include:, defaults:, cross-file rules (helper files in bad/inc/) --
    "include_missing": [
        "4:5: $.include[1]: included manifest 'inc/nowhere.yaml' not found (resolved to"
        f" {BAD}/inc/nowhere.yaml)",
    ],
    "include_glob_no_match": [
        "2:11: $.include[0]: include pattern 'teams/*/ops.yaml' matches no manifest "
        f"(resolved to {BAD}/teams/*/ops.yaml)",
    ],
    "include_cycle": [
        f"{BAD}/inc/sub/cycle_b.yaml:3:5: $.include[0]: include cycle: "
        f"{BAD}/include_cycle.yaml -> {BAD}/inc/cycle_a.yaml -> "
        f"{BAD}/inc/sub/cycle_b.yaml -> {BAD}/include_cycle.yaml",
    ],
    "include_self": [
        f"2:11: $.include[0]: include cycle: {BAD}/include_self.yaml -> "
        f"{BAD}/include_self.yaml",
    ],
    "include_absolute": [
        "2:11: $.include[0]: include '/etc/gpsimd/ops.yaml' is an absolute path; write "
        "it relative to this manifest's folder so the tree can move",
    ],
    "include_directory": [
        f"2:11: $.include[0]: include 'inc' is a directory (resolved to {BAD}/inc); name"
        " the manifest file",
    ],
    "include_listed_twice": [
        "4:5: $.include[1]: include './inc/../inc/relu_lib.yaml' is listed twice (first"
        " at line 3)",
    ],
    "include_not_a_list": [
        "2:10: $.include: expected a list, got a string ('inc/relu_lib.yaml')",
    ],
    "include_broken_yaml": [
        f"{BAD}/inc/tabs.yaml:4:1: $: tab character used for indentation (YAML indents "
        "with spaces only)",
    ],
    "cross_file_duplicate_library": [
        "9:11: $.libraries[1].name: duplicate library name 'relu' (also at "
        f"{BAD}/inc/relu_lib.yaml:3:11)",
        f"{BAD}/inc/relu_lib.yaml:3:11: $.libraries[0].name: duplicate library name "
        f"'relu' (also at {BAD}/cross_file_duplicate_library.yaml:9:11)",
    ],
    "include_defaults_conflict": [
        f"2:28: $.include[1]: '{BAD}/inc/relu_lib.yaml' is already part of the "
        f"collection (included at {BAD}/inc/team_a.yaml:3:11) with other defaults "
        "(cflags [-DTEAM_A] there, not set here; rtol 0.5 there, not set here); its "
        "libraries are built once: set these keys in its own defaults",
    ],
    "included_errors": [
        f"{BAD}/inc/errors.yaml:1:1: $: missing required key 'version'",
        f"{BAD}/inc/errors.yaml:3:44: $.libraries[0].sources[1]: source file "
        f"'kernels/missing.cpp' not found (resolved to {BAD}/inc/kernels/missing.cpp)",
        f"{BAD}/inc/errors.yaml:9:15: $.libraries[0].ops[0].vectors[0].inputs: no input "
        "for argument 'y' (Tensor)",
        f"{BAD}/inc/errors.yaml:10:15: $.libraries[0].ops[0].vectors[0].inputs.z: input "
        "'z' names no argument of 'sub(Tensor x, Tensor y) -> Tensor'",
    ],
    "defaults_unknown_key": [
        "3:3: $.defaults.cflag: unknown key 'cflag' (did you mean 'cflags'?)",
        "7:16: $.libraries[0].defaults.cflags: unknown key 'cflags' (a library's "
        "defaults give stack_size, rtol, atol, explore; set 'cflags' on the library itself)",
        "7:31: $.libraries[0].defaults.stack_sise: unknown key 'stack_sise' (did you "
        "mean 'stack_size'?)",
    ],
    "defaults_wrong_type": [
        "3:14: $.defaults.multicore: expected a boolean (true or false), got a string "
        "('on'); this file is YAML 1.2, where 'on' is a string (YAML 1.1 read it as a "
        "boolean): write true or false",
        "4:9: $.defaults.rtol: rtol must not be negative, got -1",
        "5:11: $.defaults.cflags: expected a list, got a string ('-O2')",
        "6:15: $.defaults.stack_size: stack_size 500000 is larger than 409600 bytes, "
        "the 400 KB the device allows (docs/kernel-api.md, Limits)",
    ],
    "defaults_missing_include": [
        "3:33: $.defaults.includes[1]: include directory '../kernels/nowhere' not found"
        " (resolved to tests/manifests/kernels/nowhere)",
    ],
    "no_libraries": [
        "1:1: $: a manifest needs 'libraries', 'include' or both",
    ],
    "include_empty_list": [
        "1:1: $: the collection has no library (its manifests give no 'libraries')",
    ],
    "duplicate_library_three": [
        "4:11: $.libraries[0].name: duplicate library name 'relu' (also at line 9, "
        f"{BAD}/inc/relu_lib.yaml:3:11)",
        "9:11: $.libraries[1].name: duplicate library name 'relu' (also at line 4, "
        f"{BAD}/inc/relu_lib.yaml:3:11)",
        f"{BAD}/inc/relu_lib.yaml:3:11: $.libraries[0].name: duplicate library name "
        f"'relu' (also at {BAD}/duplicate_library_three.yaml:4:11, "
        f"{BAD}/duplicate_library_three.yaml:9:11)",
    ],
    "included_unknown_dtype_and_key": [
        f"{BAD}/inc/sub/typos.yaml:5:5: $.libraries[0].multicor: unknown key 'multicor' "
        "(did you mean 'multicore'?)",
        f"{BAD}/inc/sub/typos.yaml:10:33: "
        "$.libraries[0].ops[0].vectors[0].inputs.x.dtype: unknown dtype 'bfloat61' (did"
        " you mean 'bfloat16'?)",
    ],
    "include_missing_from_included": [
        f"{BAD}/inc/includes_missing.yaml:2:11: $.include[0]: included manifest "
        f"'../relu_lib.yaml' not found (resolved to {BAD}/relu_lib.yaml)",
    ],
    "include_entry_empty": [
        "2:11: $.include[0]: must not be empty",
    ],
    "yaml11_boolean_multicore": [
        "4:16: $.libraries[0].multicore: expected a boolean (true or false), got a "
        "string ('off'); this file is YAML 1.2, where 'off' is a string (YAML 1.1 read "
        "it as a boolean): write true or false",
    ],
    "op_name_32_in_include": [
        f"{BAD}/inc/long_name.yaml:6:22: $.libraries[0].ops[0].schema: invalid op "
        "schema: op name 'abcdefghijklmnopqrstuvwxyz_12345' is too long (32 "
        "characters); CustomOp function names must be less than 32 characters",
    ],
    # every independent mistake in one run: a YAML syntax error stops only
    # its (included) file; a duplicate key, schema errors, a 400-digit number
    # hide none of the semantic checks beside them
    "eight_mistakes": [
        "6:16: $.libraries[0].multicore: expected a boolean (true or false), got a string "
        "('yes'); this file is YAML 1.2, where 'yes' is a string (YAML 1.1 read it as a "
        "boolean): write true or false",
        "7:41: $.libraries[0].sources[1]: source file '../kernels/relu/missing.cpp' not found "
        "(resolved to tests/manifests/kernels/relu/missing.cpp)",
        "10:21: $.libraries[0].ops[0].stack_size: expected an integer, got a string ('big')",
        "11:20: $.libraries[0].ops[0].reference: reference file '../kernels/relu/reference.py' "
        "defines no 'rlu' (did you mean 'relu'?)",
        "15:55: $.libraries[0].ops[0].vectors[0].inputs.x.values: 3 values do not fill shape "
        "[5] (5 elements)",
        "16:19: $.libraries[0].ops[0].vectors[0].inputs.lo: number '100000000000000000000000...'"
        " has 400 characters; a number has at most 64 (MAX_NUMBER_LENGTH)",
        "17:15: $.libraries[0].ops[0].vectors[0].inputs.hi: input 'hi' names no argument of "
        "'clamp(Tensor x, float lo) -> Tensor'",
        "18:19: $.libraries[0].ops[0].vectors[0].rtol: rtol must not be negative, got -1",
        "20:5: $.libraries[1].name: duplicate key 'name' (first defined at line 19)",
        "21:15: $.libraries[1].sources[0]: source file '../../../../../../../../../../../../../"
        "../../../../../../../etc/passwd' is outside the project (resolved to "
        f"{os.path.relpath('/etc/passwd', ROOT)}): a manifest names only paths inside the "
        "project root, or inside a folder listed in the top manifest's allow_paths or in "
        "ALLOW_PATHS=",
        "28:26: $.libraries[1].ops[0].vectors[0].inputs.x.dtype: unknown dtype 'float33' (did "
        "you mean 'float32'?)",
        f"{BAD}/inc/broken_syntax.yaml:5:8: $: invalid YAML: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence at line 4, column 14)",
    ],
    "builtin_in_include": [
        f"{BAD}/inc/builtin.yaml:3:11: $.libraries[0].name: library name 'builtin' is "
        "reserved (docs/kernel-api.md, Limits)",
        f"{BAD}/inc/builtin.yaml:7:90: "
        "$.libraries[0].ops[0].vectors[0].inputs.x.shape[8]: a tensor has at most 8 "
        "dimensions (docs/kernel-api.md, Limits); this shape has 9",
    ],
}


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_manifest(name):
    """The complete, sorted output; an expected line that starts with a file
    name is in an included file, any other is in the manifest itself."""
    path = f"{BAD}/{name}.yaml"
    assert errors_of(path) == [line if line.startswith(BAD) else f"{path}:{line}"
                               for line in BAD_CASES[name]]


def test_bad_corpus_is_large_enough():
    assert len(BAD_CASES) >= 40


def test_every_bad_manifest_is_tested():
    on_disk = {p.stem for p in (ROOT / BAD).glob("*.yaml")}
    assert on_disk == set(BAD_CASES)


def test_missing_manifest_file():
    assert errors_of(f"{BAD}/no_such.yaml") == [
        f"{BAD}/no_such.yaml:1:1: $: cannot read the file: no such file or directory"]


def test_manifest_is_a_directory():
    assert errors_of(BAD) == [f"{BAD}:1:1: $: cannot read the file: is a directory"]


def test_errors_are_sorted_and_diagnostics_structured():
    with pytest.raises(ManifestError) as info:
        load_manifest(f"{BAD}/unknown_key.yaml")
    first, second = info.value.diagnostics
    assert first == Diagnostic(f"{BAD}/unknown_key.yaml", 3, 5, ("libraries", 0),
                               "missing required key 'sources'")
    assert second.path == ("libraries", 0, "sorces")
    assert second.json_path == "$.libraries[0].sorces"
    assert str(second.location) == f"{BAD}/unknown_key.yaml:4:5"


# ---------------------------------------------------------------------------
# Bad documents written on the fly: more messages, and never a traceback
# ---------------------------------------------------------------------------

HEAD = "version: 1\nlibraries:\n  - name: relu\n    sources: [../kernels/relu/relu.cpp]\n"
OP = "    ops:\n      - schema: \"relu(Tensor x) -> Tensor\"\n"


@pytest.fixture
def case(tmp_path, monkeypatch):
    """Write a manifest to ``manifests/case/caseN.yaml`` in a scratch project
    (with ``manifests/kernels/relu/relu.cpp``) and return its relative path."""
    (tmp_path / "manifests" / "kernels" / "relu").mkdir(parents=True)
    (tmp_path / "manifests" / "kernels" / "relu" / "relu.cpp").write_text("// placeholder\n")
    (tmp_path / "manifests" / "case").mkdir()
    monkeypatch.chdir(tmp_path)
    count = []

    def make(text):
        path = f"manifests/case/case{len(count)}.yaml"
        count.append(path)
        pathlib.Path(path).write_text(text, encoding="utf-8")
        return path

    return make


def vector_doc(inputs, extra="", schema="relu(Tensor x) -> Tensor", op_extra=""):
    return (HEAD + f"    ops:\n      - schema: \"{schema}\"\n{op_extra}        vectors:\n"
            "          - name: v\n            inputs:\n"
            + "".join(f"              {line}\n" for line in inputs) + extra)


@pytest.mark.parametrize("inputs,extra,message", [
    (["x: {dtype: float32, shape: [4], random: {distribution: normal, low: 0}}"],
     "            expected: {values: [0, 0, 0, 0]}\n",
     "10:78: $.libraries[0].ops[0].vectors[0].inputs.x.random.low: 'low' does not apply to "
     "the normal distribution (it takes 'mean' and 'std')"),
    (["x: {dtype: uint8, shape: [4], random: {distribution: integers, low: -1, high: 3}}"],
     "            expected: {values: [0, 0, 0, 0]}\n",
     "10:53: $.libraries[0].ops[0].vectors[0].inputs.x.random: integers in [-1, 3) do not "
     "fit uint8 (0..255)"),
    (["x: {dtype: float32, shape: [4], random: {low: 2, high: 1}}"],
     "            expected: {values: [0, 0, 0, 0]}\n",
     "10:55: $.libraries[0].ops[0].vectors[0].inputs.x.random: low (2) must not exceed high (1)"),
    (["x: {dtype: float32, shape: [4]}"], "            expected: {values: [0, 0, 0, 0]}\n",
     "10:18: $.libraries[0].ops[0].vectors[0].inputs.x: a tensor input needs one of "
     "'random', 'values' or 'npy'"),
    (["x: {random: {}}"], "            expected: {values: [0, 0, 0, 0]}\n",
     "10:18: $.libraries[0].ops[0].vectors[0].inputs.x: missing required key 'dtype' "
     "(a tensor input needs dtype and shape unless it reads npy)\n"
     "{path}:10:18: $.libraries[0].ops[0].vectors[0].inputs.x: missing required key 'shape' "
     "(a tensor input needs dtype and shape unless it reads npy)"),
    (["x: {dtype: float32, shape: [4], random: {}}"],
     "            expected: {values: [1], npy: a.npy}\n",
     "11:23: $.libraries[0].ops[0].vectors[0].expected: expected needs exactly one of "
     "'reference', 'values' or 'npy'; got 'values' and 'npy'"),
    (["x: {dtype: float32, shape: [4], random: {}}"],
     "            expected: {reference: kernels/ref.txt:f}\n",
     "11:35: $.libraries[0].ops[0].vectors[0].expected.reference: reference file "
     "'kernels/ref.txt' is not a .py file"),
    (["x: {dtype: float32, shape: [4], random: {}}"],
     "            expected: {reference: numpy}\n",
     "11:35: $.libraries[0].ops[0].vectors[0].expected.reference: 'numpy' is not a "
     "reference: write 'path/file.py:function' or 'dotted.module:function'"),
    (["x: {npy: nowhere.npy}"], "            expected: {values: [0]}\n",
     "10:24: $.libraries[0].ops[0].vectors[0].inputs.x.npy: .npy file 'nowhere.npy' not "
     "found (resolved to manifests/case/nowhere.npy)"),
    # a duplicate key or a schema error hides nothing else of the file (every
    # independent problem in one run): the vector has no expected result either
    (["x: {dtype: float32, shape: [4], random: {}}", "x: {dtype: float32, shape: [4], random: {}}"],
     "", "8:13: $.libraries[0].ops[0].vectors[0]: " + CHECKS_ONLY_NEEDS_SHAPE + "\n"
     "{path}:11:15: $.libraries[0].ops[0].vectors[0].inputs.x: duplicate key 'x' "
     "(first defined at line 10)"),
    # (a misspelt key hides the checks-only vector's want of an output shape)
    (["x: {dtype: float32, shape: [4], random: {}}"], "            outptu: {dtype: float32}\n",
     "11:13: $.libraries[0].ops[0].vectors[0].outptu: unknown key 'outptu' "
     "(did you mean 'output'?)"),
    (["x: {dtype: float32, shape: [4], random: {}}"],
     "            expected: {values: [1, 2, 3, 4]}\n            rtol: -1\n",
     "12:19: $.libraries[0].ops[0].vectors[0].rtol: rtol must not be negative, got -1"),
    (["x: abc"], "            expected: {values: [0]}\n",
     "10:18: $.libraries[0].ops[0].vectors[0].inputs.x: expected a number or a mapping, "
     "got a string ('abc')"),
])
def test_bad_vector(case, inputs, extra, message):
    path = case(vector_doc(inputs, extra))
    assert errors_of(path) == f"{path}:{message}".replace("{path}", path).split("\n")


def test_scalar_checks(case):
    path = case(vector_doc(
        ["x: {dtype: float32, shape: [1], random: {}}", "k: 3000000000",
         "s: {value: 1.5, dtype: int64}", "f: 1e39"],
        "            expected: {values: [0]}\n",
        schema="f(Tensor x, int k, Scalar s, float f) -> Tensor"))
    assert errors_of(path) == [
        f"{path}:11:18: $.libraries[0].ops[0].vectors[0].inputs.k: 3000000000 is out of "
        "range for int32 (-2147483648..2147483647)",
        f"{path}:12:26: $.libraries[0].ops[0].vectors[0].inputs.s.value: argument 's' has "
        "type Scalar (int64): 1.5 is not an integer",
        f"{path}:13:18: $.libraries[0].ops[0].vectors[0].inputs.f: 1e+39 is out of range "
        "for float32",
    ]


def test_op_level_checks(case):
    path = case(HEAD + "    ops:\n"
                "      - schema: \"relu(Tensor x) -> Tensor\"\n"
                "        name: switch\n"
                "        stack_size: 500000\n"
                "        vectors:\n          - name: v\n            inputs: {x: {npy: a.npy}}\n"
                "      - schema: \"relu2(Tensor x) -> Tensor\"\n"
                "        name: output\n"
                "        reference: kernels/none.py:f\n"
                "        vectors:\n          - name: v\n            inputs: {x: 1}\n")
    # the schema error of ops[0] (stack_size) hides none of its other problems
    assert errors_of(path) == [
        f"{path}:7:15: $.libraries[0].ops[0].name: op name 'switch' is a reserved C++ keyword; "
        "the kernel is a C++ function of that name",
        f"{path}:8:21: $.libraries[0].ops[0].stack_size: stack_size 500000 is larger than "
        "409600 bytes, the 400 KB the device allows (docs/kernel-api.md, Limits)",
        f"{path}:10:13: $.libraries[0].ops[0].vectors[0]: {CHECKS_ONLY_NEEDS_SHAPE}",
        f"{path}:11:31: $.libraries[0].ops[0].vectors[0].inputs.x.npy: .npy file 'a.npy' not "
        "found (resolved to manifests/case/a.npy)",
        f"{path}:13:15: $.libraries[0].ops[1].name: op name 'output' clashes with a name the "
        "generated wrapper.cpp uses",
        f"{path}:14:20: $.libraries[0].ops[1].reference: reference file 'kernels/none.py' not "
        "found (resolved to manifests/case/kernels/none.py)",
        f"{path}:17:25: $.libraries[0].ops[1].vectors[0].inputs.x: argument 'x' has type "
        "Tensor: give a tensor input (a mapping with dtype, shape and one of random, values, "
        "npy), not a scalar",
    ]


def test_schema_error_in_escaped_or_block_scalar_points_at_its_start(case):
    path = case(HEAD + "    ops:\n"
                "      - schema: \"relu(Tensor x,\\tfoo y) -> Tensor\"\n"
                "        vectors: [{name: v}]\n"
                "      - schema: >-\n          relu2(Tensor x,\n          bar y) -> Tensor\n"
                "        vectors: [{name: v}]\n")
    no_expected = CHECKS_ONLY_NEEDS_SHAPE
    assert errors_of(path) == [
        f"{path}:6:17: $.libraries[0].ops[0].schema: invalid op schema: unknown type 'foo'; "
        "supported types are Tensor, Scalar, int, float, long long",
        f"{path}:7:19: $.libraries[0].ops[0].vectors[0]: {no_expected}",
        f"{path}:8:17: $.libraries[0].ops[1].schema: invalid op schema: unknown type 'bar'; "
        "supported types are Tensor, Scalar, int, float, long long",
        f"{path}:11:19: $.libraries[0].ops[1].vectors[0]: {no_expected}",
    ]


def test_output_dtype_must_be_known(case):
    path = case(vector_doc(["k: 1"], "            expected: {values: [1]}\n",
                           schema="f(int k) -> Tensor"))
    assert errors_of(path) == [
        f"{path}:8:13: $.libraries[0].ops[0].vectors[0]: cannot tell the output dtype: give "
        "output: {dtype: ...} on the vector or the op (no tensor input with a known dtype)"]


def test_npy_checks(case):
    pathlib.Path("manifests/case/junk.npy").write_bytes(b"not numpy")
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }".ljust(118) + b"\n"
    pathlib.Path("manifests/case/f8.npy").write_bytes(
        b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(16))
    path = case(vector_doc(["x: {npy: junk.npy}"], "            expected: {values: [0]}\n")
                + "          - name: v2\n"
                "            inputs: {x: {npy: f8.npy}}\n            expected: {values: [0]}\n")
    assert errors_of(path) == [
        f"{path}:10:24: $.libraries[0].ops[0].vectors[0].inputs.x.npy: "
        "'junk.npy' is not a readable .npy file (no .npy magic)",
        f"{path}:13:31: $.libraries[0].ops[0].vectors[1].inputs.x.npy: the array in "
        "'f8.npy' has numpy dtype '<f8', which is not a device dtype (float32, float16, "
        "bfloat16, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float8_e3m4, "
        "float8_e4m3, float8_e5m2)",
    ]


@pytest.mark.parametrize("text", [
    "3", "~", "[]", "libraries: 3", "version: 1\nlibraries: [3]\n",
    "version: 1\nlibraries: [{ops: [3]}]\n",
    "version: 1\nlibraries: [{name: a, sources: [], ops: [{schema: 3, vectors: []}]}]\n",
    "version: 1\nlibraries: [{name: a, sources: [x], ops: [{schema: 'f(Tensor x) -> Tensor', "
    "vectors: [{name: v, inputs: {x: [1]}, expected: {values: [[1], 2]}}]}]}]\n",
    "a: &a [*a]\n", "a: !!python/object:os.system x\n", "? [1, 2]\n: 3\n", "a: !!int 1.5\n",
    "version: 1\n\x00", "'" * 3, "{" * 3000,
    "version: 1\nlibraries:\n  - {name: a, sources: [x], ops: [{schema: 'f(Tensor x, int k) -> "
    "Tensor', vectors: [{name: v, inputs: {x: {value: 1}, k: {dtype: float32, shape: [1], "
    "values: [1]}}}]}]}\n",
])
def test_never_a_traceback(case, text):
    path = case(text)
    lines = errors_of(path)
    assert lines and all(line.startswith(f"{path}:") for line in lines)


def test_fuzzed_manifests_never_traceback(case):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-3, 70000), st.floats(allow_nan=False),
                       st.sampled_from(["x", "float32", "relu(Tensor x) -> Tensor", "numpy:neg",
                                        "../kernels/relu/relu.cpp", "uniform", "builtin",
                                        "case0.yaml", "*.yaml", "../**/*.yaml", "/abs.yaml"]))
    keys = st.sampled_from(["version", "libraries", "name", "sources", "ops", "schema", "vectors",
                            "inputs", "x", "dtype", "shape", "random", "values", "npy",
                            "expected", "reference", "output", "value", "distribution",
                            "include", "defaults", "cflags", "includes", "multicore", "rtol"])
    docs = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(keys, inner, max_size=4)),
                        max_leaves=25)
    path = case("version: 1\n")

    @hypothesis.settings(max_examples=150, deadline=None, database=None)
    @hypothesis.given(docs)
    def check(doc):
        pathlib.Path(path).write_text(json.dumps(doc), encoding="utf-8")
        try:
            load_manifest(path)
        except ManifestError as err:
            assert err.diagnostics

    check()


# ---------------------------------------------------------------------------
# Good manifests: exact model values
# ---------------------------------------------------------------------------


def test_minimal_manifest_model():
    path = f"{GOOD}/minimal.yaml"
    loc = lambda line, col: Location(path, line, col)  # noqa: E731
    ref = Reference(file=f"{GOOD}/kernels/relu/reference.py", module=None, function="relu_forward")
    seed = zlib.crc32(b"relu/relu_forward/n1000/x")
    expected = Collection(manifest=path, libraries=(Library(
        name="relu", multicore=False, sources=("tests/manifests/kernels/relu/relu.cpp",),
        includes=(), cflags=(), location=loc(3, 5), manifest=path,
        ops=(Op(name="relu_forward", schema=parse_schema("my_ops::relu_forward(Tensor x) -> Tensor"),
                schema_text="my_ops::relu_forward(Tensor x) -> Tensor", stack_size=4196,
                location=loc(6, 9), kernel="relu_forward",
                vectors=(Vector(
                    name="n1000",
                    inputs=(TensorInput(name="x", dtype="float32", shape=(1000,),
                                        random=m.Random("uniform", seed, low=-1.0, high=1.0),
                                        values=None, npy=None, location=loc(11, 15)),),
                    output_dtype="float32", output_shape=None,
                    expected=Expected(reference=ref, values=None, npy=None),
                    rtol=1.3e-6, atol=1e-5, location=loc(9, 13),
                    output_dtype_defaulted=True),)),)),),
        manifests=(path,))
    assert load_manifest(path) == expected
    assert seed == m.default_seed("relu", "relu_forward", "n1000", "x")


def test_full_manifest_model():
    col = load_manifest(f"{GOOD}/full.yaml")
    relu, axpy = col.libraries
    assert col.manifest == f"{GOOD}/full.yaml"
    assert relu.sources == ("tests/manifests/kernels/relu/relu.cpp",
                            "tests/manifests/kernels/relu/extra.cpp")
    assert relu.includes == ("tests/manifests/kernels/common",)
    assert relu.cflags == ("-DFOO=1", "-O3")
    assert (relu.multicore, axpy.multicore) == (False, True)
    (op,) = relu.ops
    assert (op.name, op.schema.name, op.stack_size) == ("relu_fwd", "relu_forward", 8192)
    uniform, normal, npy = op.vectors
    # op-level output dtype and rtol; dtype default atol
    assert (uniform.output_dtype, uniform.rtol, uniform.atol) == ("float16", 1e-2, 1e-5)
    assert not uniform.output_dtype_defaulted       # (given by the op)
    assert uniform.inputs[0].random == m.Random("uniform", 3, low=-2.0, high=2.0)
    assert normal.name == "normal-1.0"
    assert normal.inputs[0].random == m.Random(
        "normal", zlib.crc32(b"relu/relu_fwd/normal-1.0/x"), mean=0.0, std=1.0)
    assert (normal.rtol, normal.atol) == (1e-2, 0.5)
    assert normal.expected.reference == Reference(f"{GOOD}/kernels/relu/reference.py", None,
                                                  "relu_forward")
    assert npy.inputs[0] == TensorInput("x", "float32", (2, 3), None, None,
                                        f"{GOOD}/data/z.npy", Location(f"{GOOD}/full.yaml", 25, 15))
    assert (npy.output_dtype, npy.output_shape, npy.rtol) == ("float32", (2, 3), 0.0)
    assert npy.expected == Expected(None, None, f"{GOOD}/data/expected.npy")

    (aop,) = axpy.ops
    assert aop.name == "axpy" and aop.schema.namespace is None
    ints, fp8 = aop.vectors
    x, y, alpha, n, k, f, s = ints.inputs
    assert x == TensorInput("x", "int8", (2, 2), None, [[1, -2], [3, 4]], None,
                            Location(f"{GOOD}/full.yaml", 37, 15))
    assert y.random == m.Random("integers", zlib.crc32(b"axpy/axpy/ints/y"), low=0, high=10)
    assert [(i.name, i.value, i.dtype) for i in (alpha, n, k, f, s)] == [
        ("alpha", 0.5, "float32"), ("n", 3, "int32"), ("k", 4, "int64"), ("f", 2.0, "float32"),
        ("s", 7, "int64")]
    assert all(isinstance(i, ScalarInput) for i in (alpha, n, k, f, s))
    assert isinstance(f.value, float) and isinstance(s.value, int)
    assert (ints.output_dtype, ints.rtol, ints.atol) == ("int8", 0.0, 0.0)
    assert ints.expected == Expected(None, [1, 2, 3, 4], None)
    x, y, alpha, n, k, f, s = fp8.inputs
    assert (x.dtype, x.shape, x.values) == ("float8_e4m3", (0,), [])
    assert (y.dtype, y.shape, y.npy) == ("bfloat16", (4,), f"{GOOD}/data/bf16.npy")
    assert [(i.value, i.dtype) for i in (alpha, n, k, f, s)] == [
        (1.0, "float32"), (16, "int32"), (-1, "int64"), (-0.25, "float32"), (1000.0, "float32")]
    assert fp8.expected.reference == Reference(None, "numpy", "negative")
    assert (fp8.output_dtype, fp8.rtol, fp8.atol) == ("float8_e4m3", 2.0**-3, 2.0**-9)
    assert fp8.location == Location(f"{GOOD}/full.yaml", 45, 13)


def test_model_paths_are_relative_to_root_not_to_how_the_manifest_was_named(tmp_path):
    by_relative = load_manifest(f"{GOOD}/minimal.yaml")
    by_absolute = load_manifest(str(ROOT / GOOD / "minimal.yaml"), root=str(ROOT))
    assert by_relative == by_absolute
    # (a relative path is relative to the root)
    other = load_manifest("manifests/good/minimal.yaml", root="tests")
    assert other.libraries[0].sources == ("manifests/kernels/relu/relu.cpp",)
    assert other.manifest == "manifests/good/minimal.yaml"
    assert other.libraries[0].ops[0].vectors[0].location.file == "manifests/good/minimal.yaml"


def test_an_op_may_have_no_vectors(tmp_path):
    # left out or an empty list: the op builds, and its plan has none
    (tmp_path / "k.cpp").write_text("// a kernel\n")
    head = ("version: 1\nlibraries:\n  - name: relu\n    sources: [k.cpp]\n    ops:\n"
            "      - schema: \"my_ops::relu_forward(Tensor x) -> Tensor\"\n")
    for tail in ("", "        vectors: []\n"):
        (tmp_path / "ops.yaml").write_text(head + tail)
        lib = load_manifest("ops.yaml", root=str(tmp_path)).libraries[0]
        assert [len(op.vectors) for op in lib.ops] == [0]


def test_default_tolerances_cover_every_dtype():
    assert set(m.DEFAULT_TOLERANCES) == set(m.DTYPES)
    assert m.DEFAULT_TOLERANCES["float32"] == (1.3e-6, 1e-5)
    assert m.DEFAULT_TOLERANCES["float16"] == (1e-3, 1e-5)
    assert m.DEFAULT_TOLERANCES["bfloat16"] == (1.6e-2, 1e-5)
    assert m.DEFAULT_TOLERANCES["int32"] == (0.0, 0.0)
    assert m.DEFAULT_TOLERANCES["float8_e5m2"] == (0.25, 2.0**-16)


# ---------------------------------------------------------------------------
# The JSON Schema file
# ---------------------------------------------------------------------------


def load_schema_file():
    return json.loads((ROOT / "schema" / "ops.schema.json").read_text(encoding="utf-8"))


def test_schema_is_valid_draft_2020_12():
    schema = load_schema_file()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert os.path.samefile(m.SCHEMA_PATH, ROOT / "schema" / "ops.schema.json")


def test_every_schema_property_has_a_description():
    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if not (isinstance(sub, dict) and sub.get("description")):
                    missing.append(f"{where}.properties.{name}")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(load_schema_file(), "$")
    assert missing == []


def test_schema_lists_match_the_python_constants():
    defs = load_schema_file()["$defs"]
    assert tuple(defs["dtype"]["enum"]) == m.DTYPES
    assert tuple(defs["scalarDtype"]["enum"]) == m.SCALAR_DTYPES
    assert defs["shape"]["maxItems"] == m.MAX_DIMS
    # rank <= 4: dimensions up to 2**32 - 1; rank 5..8: up to 65535
    assert defs["shape"]["items"]["maximum"] == m.MAX_DIM_SIZE_4D == 2 ** 32 - 1
    assert defs["shape"]["if"] == {"minItems": m.MAX_DIMS_4D + 1}
    assert defs["shape"]["then"]["items"]["maximum"] == m.MAX_DIM_SIZE == 65535
    assert defs["library"]["properties"]["ops"]["maxItems"] == m.MAX_OPS_PER_LIBRARY
    assert defs["op"]["properties"]["stack_size"]["default"] == m.DEFAULT_STACK_SIZE
    assert defs["op"]["properties"]["stack_size"]["maximum"] == m.MAX_STACK_SIZE
    assert defs["op"]["properties"]["name"]["maxLength"] == m.MAX_NAME_LENGTH - 1
    assert load_schema_file()["properties"]["version"]["const"] == m.MANIFEST_VERSION


def test_good_manifests_pass_the_schema_alone():
    validator = jsonschema.Draft202012Validator(load_schema_file())
    for path in sorted((ROOT / GOOD).glob("*.yaml")):
        doc = load_yaml_text(path.read_text(encoding="utf-8"), str(path)).value
        assert list(validator.iter_errors(doc)) == [], path


# ---------------------------------------------------------------------------
# yamlloc and diagnostics
# ---------------------------------------------------------------------------


def test_yaml_1_2_core_scalars_and_text_keys():
    doc = load_yaml_text(
        "a: 1e-6\nb: on\nc: 010\nd: 0x1F\ne: .5\nf: ~\ng: True\nh: '3'\non: 1\n1: x\n"
        "i: !!str 5\nj: !!float 2\nk: -.inf\nl: 1_000\n", "f.yaml")
    v = doc.value
    assert v["a"] == 1e-6 and v["b"] == "on" and v["c"] == 10 and v["d"] == 31
    assert v["e"] == 0.5 and v["f"] is None and v["g"] is True and v["h"] == "3"
    assert v["on"] == 1 and v["1"] == "x" and v["i"] == "5" and v["j"] == 2.0
    assert v["k"] == float("-inf") and v["l"] == "1_000"


def test_yaml_positions():
    doc = load_yaml_text('top:\n  - k: "ab(c"\n    p: ab(c\n    q: "a\\tb(c"\n', "f.yaml")
    assert doc.span(("top",)).kind == "sequence"
    assert (doc.span(("top", 0)).line, doc.span(("top", 0)).column) == (2, 5)
    assert doc.position(("top", 0, "k"), 2) == (2, 11)   # quoted: skip the quote
    assert doc.position(("top", 0, "p"), 2) == (3, 10)   # plain
    assert doc.position(("top", 0, "q"), 4) == (4, 8)    # escape: the scalar's start
    assert doc.location(("top", 0, "q"), key=True) == Location("f.yaml", 4, 5)
    assert doc.location(("top", 0, "missing")) == Location("f.yaml", 2, 5)


@pytest.mark.parametrize("text,line", [
    ("a: 1\na: 2\n", "f.yaml:2:1: $.a: duplicate key 'a' (first defined at line 1)"),
    ("a: !foo 1\n", "f.yaml:1:4: $.a: unsupported YAML tag '!foo'"),
    ("a: &x [*x]\n", "f.yaml:1:4: $.a[0]: recursive alias (a node that contains itself)"),
    ("a: \x07\n", "f.yaml:1:4: $: character U+0007 is not allowed in YAML "
                  "(special characters are not allowed)"),
    ("# only a comment\n", "f.yaml:1:1: $: empty document (the file holds no YAML value)"),
    ("---\n", "f.yaml:1:1: $: empty document (the file holds no YAML value)"),
])
def test_yaml_errors(text, line):
    with pytest.raises(YamlError) as info:
        load_yaml_text(text, "f.yaml")
    assert str(info.value) == line


def test_json_path_rendering_matches_jsonschema():
    path = ("libraries", 0, "inputs", "long long", "it's", "a1")
    assert render_json_path(path) == "$.libraries[0].inputs['long long']['it\\'s'].a1"
    err = next(jsonschema.Draft202012Validator(
        {"properties": {"libraries": {"items": {"properties": {"inputs": {"properties": {
            "long long": {"properties": {"it's": {"properties": {"a1": {"type": "string"}}}}}}}}}}}}
    ).iter_errors({"libraries": [{"inputs": {"long long": {"it's": {"a1": 1}}}}]}))
    assert err.json_path == render_json_path(path)


# ---------------------------------------------------------------------------
# Composition: include:, defaults:, names YAML 1.1 would read as booleans
# ---------------------------------------------------------------------------


def test_composed_manifest_precedence():
    """vector > op > library defaults > nearest manifest defaults > including
    manifest defaults > built-in; paths relative to each manifest's folder;
    a diamond include (team_b through the glob and through team_a) loads once."""
    col = load_manifest(f"{GOOD}/composed.yaml")
    team_a, team_b = f"{GOOD}/composed/team_a", f"{GOOD}/composed/team_b"
    assert col.manifest == f"{GOOD}/composed.yaml"
    assert col.manifests == (f"{GOOD}/composed.yaml", f"{team_a}/ops.yaml", f"{team_b}/ops.yaml")
    assert [(lib.name, lib.manifest) for lib in col.libraries] == [
        ("top_lib", f"{GOOD}/composed.yaml"), ("a_lib", f"{team_a}/ops.yaml"),
        ("a_single", f"{team_a}/ops.yaml"), ("b_lib", f"{team_b}/ops.yaml")]
    top, a_lib, a_single, b_lib = col.libraries
    common = ("tests/manifests/kernels/common",)
    assert (top.multicore, top.cflags, top.includes) == (False, ("-DTOP=1",), common)
    assert (a_lib.multicore, a_lib.cflags, a_lib.includes) == (True, ("-DTOP=1",), common)
    assert a_lib.sources == (f"{team_a}/kernels/a.cpp",)
    assert (a_single.multicore, a_single.cflags, a_single.includes) == (
        False, (), (f"{team_a}/kernels",))
    assert (b_lib.multicore, b_lib.cflags, b_lib.includes) == (False, ("-DTEAM_B",), common)
    tol = lambda op: [(v.name, v.rtol, v.atol) for v in op.vectors]  # noqa: E731
    (top_op,) = top.ops
    assert top_op.stack_size == 5000 and tol(top_op) == [("v", 0.25, 1e-5)]
    a_op, a_op2 = a_lib.ops
    assert a_op.stack_size == 6000
    assert tol(a_op) == [("lib_default", 0.125, 0.5), ("own", 0.0, 0.0)]
    assert a_op.vectors[0].expected.reference == Reference(f"{team_a}/kernels/ref.py", None, "a_op")
    assert a_op2.stack_size == 5000 and tol(a_op2) == [("v", 0.0625, 0.5)]
    assert tol(a_single.ops[0]) == [("v", 0.25, 0.5)]
    # a top-level tolerance applies to integer outputs too (it is what the user wrote)
    assert tol(b_lib.ops[0]) == [("v", 0.25, 0.001)]


def test_composed_manifest_names_included_files_from_the_given_path():
    by_absolute = load_manifest(str(ROOT / GOOD / "composed.yaml"), root=str(ROOT))
    assert by_absolute == load_manifest(f"{GOOD}/composed.yaml")


def test_glob_includes_are_sorted_and_skip_the_including_file(case):
    for team in ("zeta", "alpha", "mid"):
        pathlib.Path(f"manifests/case/{team}").mkdir()
        pathlib.Path(f"manifests/case/{team}/ops.yaml").write_text(
            HEAD.replace("relu", team).replace("../kernels/", "../../kernels/")
            .replace(f"{team}/{team}.cpp", "relu/relu.cpp")
            + OP.replace("relu", team) + "        vectors: [{name: v, inputs: {x: {dtype: "
            "float32, shape: [1], values: [1]}}, expected: {values: [1]}}]\n")
    path = case("version: 1\ninclude: ['**/ops.yaml', '[m]*/ops.yaml']\n")
    pathlib.Path("manifests/case/ops.yaml").write_text(pathlib.Path(path).read_text())
    col = load_manifest("manifests/case/ops.yaml")
    assert [lib.name for lib in col.libraries] == ["alpha", "mid", "zeta"]
    assert col.manifests == ("manifests/case/ops.yaml", "manifests/case/alpha/ops.yaml",
                             "manifests/case/mid/ops.yaml", "manifests/case/zeta/ops.yaml")


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "y", "n"])
def test_yaml_1_1_boolean_words_are_the_names_written(case, word):
    """The loader reads YAML 1.2 (the YAML language server's default too), so
    a library, op or vector named ``on``/``no``/... is that string, never a
    boolean; only where a boolean is expected is the word an error (with a
    hint), see the bad manifests yaml11_boolean_multicore/defaults_wrong_type."""
    path = case(f"version: 1\nlibraries:\n  - name: {word}\n"
                "    sources: [../kernels/relu/relu.cpp]\n    ops:\n"
                f"      - schema: \"{word}(Tensor {word}) -> Tensor\"\n"
                f"        name: {word}\n        vectors:\n          - name: {word}\n"
                f"            inputs: {{{word}: {{dtype: float32, shape: [1], values: [1]}}}}\n"
                "            expected: {values: [1]}\n")
    (lib,) = load_manifest(path).libraries
    (op,) = lib.ops
    assert (lib.name, op.name, op.vectors[0].name, op.vectors[0].inputs[0].name) == (word,) * 4


# ---------------------------------------------------------------------------
# Property test: random valid collections load; random mutations give located
# errors, never a traceback
# ---------------------------------------------------------------------------

_ARG_TYPES = ("Tensor", "int", "float", "long long", "Scalar")


def _collections():
    """A hypothesis strategy of (top manifest, included manifest or None):
    valid documents (dicts) whose sources are ``k.cpp`` beside the top."""
    st = pytest.importorskip("hypothesis").strategies
    ident = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
        lambda s: s not in m.CPP_KEYWORDS and s not in m.WRAPPER_RESERVED_NAMES
        and s != "builtin")
    tol = st.sampled_from([0, 0.5, 1e-3, 2])

    @st.composite
    def tensor(draw):
        dtype = draw(st.sampled_from(["float32", "float16", "bfloat16", "int8", "int32",
                                      "uint16", "float8_e4m3"]))
        shape = draw(st.lists(st.integers(1, 3), max_size=3))
        spec = {"dtype": dtype, "shape": shape}
        if draw(st.booleans()):
            spec["random"] = ({"distribution": "integers", "low": 0, "high": 5}
                              if dtype.startswith(("int", "uint")) else {})
        else:
            count = 1
            for d in shape:
                count *= d
            spec["values"] = [1] * count if shape else 1
        return spec

    @st.composite
    def op(draw, name):
        types = ["Tensor"] + draw(st.lists(st.sampled_from(_ARG_TYPES), max_size=2))
        args = [f"a{i}" for i in range(len(types))]
        schema = f"ns::{name}(" + ", ".join(f"{t} {a}" for t, a in zip(types, args)) + ") -> Tensor"
        vec_names = draw(st.lists(ident, min_size=1, max_size=2, unique=True))
        vectors = []
        for vname in vec_names:
            inputs = {}
            for t, a in zip(types, args):
                if t == "Tensor":
                    inputs[a] = draw(tensor())
                elif t in ("int", "long long"):
                    inputs[a] = draw(st.integers(-5, 5))
                else:
                    inputs[a] = draw(st.sampled_from([0.5, -2, 3.0]))
            vec = {"name": vname, "inputs": inputs}
            if draw(st.booleans()):
                vec["rtol"] = draw(tol)
            vectors.append(vec)
        body = {"schema": schema, "reference": "numpy:negative", "vectors": vectors}
        if draw(st.booleans()):
            body["atol"] = draw(tol)
        return body

    @st.composite
    def library(draw, name):
        op_names = draw(st.lists(ident, min_size=1, max_size=3, unique=True))
        lib = {"name": name, "sources": ["k.cpp"], "ops": [draw(op(n)) for n in op_names]}
        if draw(st.booleans()):
            lib["multicore"] = draw(st.booleans())
        if draw(st.booleans()):
            lib["cflags"] = ["-DX=1"]
        if draw(st.booleans()):
            lib["defaults"] = {"rtol": draw(tol), "stack_size": 8192}
        return lib

    @st.composite
    def collection(draw):
        names = draw(st.lists(ident, min_size=1, max_size=3, unique=True))
        libs = [draw(library(n)) for n in names]
        split = draw(st.integers(0, len(libs)))
        top = {"version": 1}
        if draw(st.booleans()):
            top["defaults"] = {"cflags": ["-O2"], "multicore": draw(st.booleans()),
                               "atol": draw(tol)}
        if split:
            top["libraries"] = libs[:split]
        if split == len(libs):
            return top, None
        top["include"] = ["inc/*.yaml"]
        for lib in libs[split:]:
            lib["sources"] = ["../k.cpp"]
        return top, {"version": 1, "libraries": libs[split:]}

    return collection()


def _write_collection(top, included):
    """Write a generated collection as JSON (a subset of YAML 1.2) to
    ``gen/ops.yaml`` (+ ``gen/inc/part.yaml``); return the files by key."""
    files = {"top": ("gen/ops.yaml", top)}
    inc = pathlib.Path("gen/inc/part.yaml")
    if inc.exists():
        inc.unlink()
    if included is not None:
        files["inc"] = ("gen/inc/part.yaml", included)
    for path, doc in files.values():
        pathlib.Path(path).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return files


@pytest.fixture
def gen_dir(tmp_path, monkeypatch):
    (tmp_path / "gen" / "inc").mkdir(parents=True)
    (tmp_path / "gen" / "k.cpp").write_text("// placeholder\n")
    monkeypatch.chdir(tmp_path)


def test_random_valid_collections_load(gen_dir):
    hypothesis = pytest.importorskip("hypothesis")

    @hypothesis.settings(max_examples=50, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(_collections())
    def check(docs):
        top, included = docs
        _write_collection(top, included)
        col = load_manifest("gen/ops.yaml")
        libs = top.get("libraries", []) + (included or {}).get("libraries", [])
        assert [lib.name for lib in col.libraries] == [lib["name"] for lib in libs]
        for lib, model in zip(libs, col.libraries):
            inherited = top.get("defaults", {})
            assert model.multicore == lib.get("multicore", inherited.get("multicore", False))
            assert model.cflags == tuple(lib.get("cflags", inherited.get("cflags", [])))
            assert [o.stack_size for o in model.ops] == [
                lib.get("defaults", {}).get("stack_size", 4196)] * len(lib["ops"])

    check()


def _nodes(doc, path=()):
    """Every (path, value) of a document, depth first."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _nodes(value, path + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _nodes(value, path + (i,))


def _get(doc, path):
    for elem in path:
        doc = doc[elem]
    return doc


#: Keys whose deletion always breaks a generated manifest (inputs' argument
#: keys "a0".. too: an argument without input).
# (an op's vectors may be left out: it then has none, and builds)
_REQUIRED = {"version", "name", "sources", "ops", "schema", "dtype", "shape",
             "a0", "a1", "a2"}
_WRONG = {str: 42, list: "text", dict: [1], bool: "yes", int: "x", float: "x"}


def _related(a, b):
    n = min(len(a), len(b))
    return tuple(a[:n]) == tuple(b[:n])


@pytest.mark.parametrize("mutation", ["delete", "wrong_type", "duplicate_key",
                                      "duplicate_library"])
def test_random_mutations_give_located_errors(gen_dir, mutation):
    """A deleted required key, a value of the wrong type, a duplicated
    mapping key, a library name used twice (in one file or across the
    include): always a ManifestError whose diagnostics are located in the
    generated files, one of them at (or above, or below) the mutated node."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=35, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(_collections(), st.data())
    def check(docs, data):
        top, included = docs
        files = {"top": top} if included is None else {"top": top, "inc": included}
        where = data.draw(st.sampled_from(sorted(files)))
        doc = files[where]
        target = None
        if mutation == "delete":
            choices = [p for p, _ in _nodes(doc) if p and p[-1] in _REQUIRED
                       and not (len(p) >= 2 and p[-2] == "random")]
            target = data.draw(st.sampled_from(choices))
            del _get(doc, target[:-1])[target[-1]]
            target = target[:-1]
        elif mutation == "wrong_type":
            choices = [p for p, v in _nodes(doc) if p and type(v) in _WRONG
                       and p[-1] not in ("rtol", "atol", "low", "high") and "values" not in p
                       and not (isinstance(v, float) and p[-2] == "inputs")]
            target = data.draw(st.sampled_from(choices))
            _get(doc, target[:-1])[target[-1]] = _WRONG[type(_get(doc, target))]
        elif mutation == "duplicate_library":
            owner = data.draw(st.sampled_from([k for k in sorted(files)
                                               if files[k].get("libraries")]))
            lib = dict(data.draw(st.sampled_from(files[owner]["libraries"])))
            if where != owner:
                lib["sources"] = ["k.cpp" if where == "top" else "../k.cpp"]
            doc.setdefault("libraries", []).append(lib)
        written = _write_collection(files["top"], files.get("inc"))
        path = written[where][0]
        if mutation == "duplicate_key":
            lines = pathlib.Path(path).read_text().split("\n")
            scalar = [i for i, line in enumerate(lines)
                      if re.fullmatch(r'\s*"[^"]+": ("[^"]*"|[-0-9.e+]+|true|false),', line)]
            i = data.draw(st.sampled_from(scalar))
            lines.insert(i + 1, lines[i])
            pathlib.Path(path).write_text("\n".join(lines))
        with pytest.raises(ManifestError) as info:
            load_manifest("gen/ops.yaml")
        diags = info.value.diagnostics
        assert diags
        for d in diags:
            assert d.file in ("gen/ops.yaml", "gen/inc/part.yaml") and d.line >= 1 \
                and d.column >= 1, d
        mine = [d for d in diags if d.file == path]
        assert mine, (mutation, [str(d) for d in diags])
        if mutation == "duplicate_key":
            assert any(d.line == i + 2 and "duplicate key" in d.message for d in mine)
        elif mutation == "duplicate_library":
            assert sum("duplicate library name" in d.message for d in diags) >= 2
        else:
            assert any(_related(d.path, target) for d in mine), (target, [str(d) for d in diags])

    check()


def test_include_depth_is_bounded(case):
    for i in range(m.MAX_INCLUDE_DEPTH + 2):
        pathlib.Path(f"manifests/case/d{i}.yaml").write_text(
            f"version: 1\ninclude: [d{i + 1}.yaml]\n")
    pathlib.Path(f"manifests/case/d{m.MAX_INCLUDE_DEPTH + 2}.yaml").write_text(
        HEAD + OP + "        vectors: [{name: v, inputs: {x: {dtype: float32, shape: [1], "
        "values: [1]}}, expected: {values: [1]}}]\n")
    assert errors_of("manifests/case/d0.yaml") == [
        f"manifests/case/d{m.MAX_INCLUDE_DEPTH - 1}.yaml:2:11: $.include[0]: includes nested "
        f"more than {m.MAX_INCLUDE_DEPTH} deep"]


def test_a_manifest_reached_through_two_paths_is_loaded_once(case):
    """Files are identified by real path: a symlinked folder or a second
    spelling through another manifest adds nothing (and no duplicate-library
    error), as long as both places give the same defaults."""
    pathlib.Path("manifests/case/team").mkdir()
    pathlib.Path("manifests/case/team/ops.yaml").write_text(
        HEAD.replace("../kernels/", "../../kernels/") + OP
        + "        vectors: [{name: v, inputs: {x: {dtype: float32, shape: [1], values: [1]}}, "
        "expected: {values: [1]}}]\n")
    os.symlink("team", "manifests/case/alias")
    pathlib.Path("manifests/case/other.yaml").write_text(
        "version: 1\ninclude: [alias/ops.yaml]\n")
    path = case("version: 1\ninclude: [team/ops.yaml, other.yaml]\n")
    col = load_manifest(path)
    assert [lib.name for lib in col.libraries] == ["relu"]
    assert col.manifests == (path, "manifests/case/team/ops.yaml", "manifests/case/other.yaml")


def test_a_relative_manifest_path_is_relative_to_the_root_not_the_cwd(tmp_path, monkeypatch):
    """(the pytest plugin loads the manifest from any working directory,
    without changing it)"""
    from gpsimd_build.manifest import load_manifest
    here = load_manifest("ops.yaml", root=str(ROOT))
    monkeypatch.chdir(tmp_path)
    there = load_manifest("ops.yaml", root=str(ROOT))
    assert [l.name for l in there.libraries] == [l.name for l in here.libraries]
    assert there.libraries[0].sources == here.libraries[0].sources == ("kernels/relu/relu.cpp",)
    assert there.reads == here.reads
