"""Inputs, references and expected outputs from the plan (gpsimd_emu.vectors)."""
import os
import ml_dtypes
import numpy as np
import pytest

from gpsimd_emu import dtypes as dt
from gpsimd_device.plan import OpPlan, ReferenceSpec, ScalarSpec, TensorSpec, VectorPlan
from gpsimd_emu import vectors
from gpsimd_emu.sourceonly import load_reference
from gpsimd_emu.vectors import PlanError


# The plan's JSON forms, read into the typed plan as the emulator reads a file.
def make_tensor(spec, root=".", what="input"):
    return vectors.make_tensor(TensorSpec.from_json("x", spec, "x"), root, what)


def make_scalar(spec, what="input"):
    return vectors.make_scalar(ScalarSpec.from_json("s", spec, "s"), what)


def make_inputs(op, vector, root="."):
    return vectors.make_inputs(OpPlan.from_json(op, "op"), VectorPlan.from_json(vector, "v"), root)


def expected_output(vector, inputs, out_dtype, root="."):
    return vectors.expected_output(VectorPlan.from_json(vector, "v"), inputs, out_dtype, root, 60.0)


def output_shape(vector, expected):
    return vectors.output_shape(VectorPlan.from_json(vector, "v"), expected)


def tolerances(vector, out_dtype):
    return vectors.tolerances(VectorPlan.from_json(vector, "v"), out_dtype)


def test_random_uniform_is_deterministic_and_generated_in_float64():
    spec = {"kind": "tensor", "dtype": "float32", "shape": [2, 5],
            "random": {"seed": 7, "distribution": "uniform", "low": -1.0, "high": 1.0}}
    a, b = make_tensor(spec), make_tensor(spec)
    assert a.dtype == np.float32 and a.shape == (2, 5)
    assert np.array_equal(a, b)
    ref = np.random.default_rng(7).uniform(-1.0, 1.0, size=(2, 5)).astype(np.float32)
    assert np.array_equal(a, ref)
    assert a.min() >= -1 and a.max() < 1
    other = make_tensor({**spec, "random": {**spec["random"], "seed": 8}})
    assert not np.array_equal(a, other)


def test_random_normal_and_integers():
    n = make_tensor({"dtype": "bfloat16", "shape": [1000],
                     "random": {"seed": 1, "distribution": "normal", "mean": 5, "std": 0.5}})
    assert n.dtype == ml_dtypes.bfloat16
    ref = np.random.default_rng(1).normal(5, 0.5, size=(1000,)).astype(ml_dtypes.bfloat16)
    assert n.tobytes() == ref.tobytes()
    i = make_tensor({"dtype": "int8", "shape": [3, 4],
                     "random": {"seed": 3, "distribution": "integers", "low": -4, "high": 4}})
    assert i.dtype == np.int8 and i.min() >= -4 and i.max() <= 3
    ref = np.random.default_rng(3).integers(-4, 4, size=(3, 4), dtype=np.int64).astype(np.int8)
    assert np.array_equal(i, ref)


def test_values_and_npy(tmp_path):
    v = make_tensor({"dtype": "int32", "shape": [2, 2], "values": [1, 2, 3, 4]})
    assert v.tolist() == [[1, 2], [3, 4]] and v.dtype == np.int32
    v = make_tensor({"dtype": "float16", "shape": None, "values": [[1.5], [2.5]]})
    assert v.shape == (2, 1) and v.dtype == np.float16
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float64).reshape(2, 3))
    x = make_tensor({"dtype": "float32", "shape": [2, 3], "npy": "x.npy"}, root=str(tmp_path))
    assert x.dtype == np.float32 and x[1, 2] == 5.0
    with pytest.raises(PlanError, match=r"x.npy has shape \[2, 3\], the plan says \[6\]"):
        make_tensor({"dtype": "float32", "shape": [6], "npy": "x.npy"}, root=str(tmp_path))
    with pytest.raises(PlanError, match="cannot load missing.npy"):
        make_tensor({"dtype": "float32", "shape": [6], "npy": "missing.npy"}, root=str(tmp_path))


def test_tensor_plan_errors():
    with pytest.raises(PlanError, match="do not fit shape"):
        make_tensor({"dtype": "int32", "shape": [3], "values": [1, 2, 3, 4]})
    with pytest.raises(PlanError, match="unknown dtype 'float64'"):
        make_tensor({"dtype": "float64", "shape": [1], "values": [1]})
    with pytest.raises(PlanError, match="unknown distribution 'poisson'"):
        make_tensor({"dtype": "float32", "shape": [1], "random": {"distribution": "poisson"}})
    with pytest.raises(PlanError, match="exactly one of"):
        make_tensor({"dtype": "float32", "shape": [1], "values": [1], "npy": "a.npy"})
    with pytest.raises(PlanError, match="bad shape"):
        make_tensor({"dtype": "float32", "shape": [-1], "values": [1]})


def test_scalars_as_the_device_sees_them():
    arr, v = make_scalar({"kind": "scalar", "type": "float", "dtype": "float32", "value": 0.1})
    assert arr.shape == () and arr.dtype == np.float32
    assert v == float(np.float32(0.1)) and isinstance(v, float)
    arr, v = make_scalar({"kind": "scalar", "type": "long long", "dtype": "int64",
                          "value": 5_000_000_000})
    assert arr.dtype == np.int64 and v == 5_000_000_000 and isinstance(v, int)
    with pytest.raises(PlanError) as e:
        make_scalar({"kind": "scalar", "type": "int", "dtype": "int32", "value": 2 ** 31}, "input 'n'")
    assert str(e.value) == ("input 'n' value 2147483648 is out of range for int32 (its dtype, "
                            "-2147483648..2147483647)")
    with pytest.raises(PlanError) as e:
        make_scalar({"kind": "scalar", "type": "int", "dtype": "int32", "value": 1.5}, "input 'n'")
    assert str(e.value) == "input 'n' value 1.5 is not an int32 (its dtype)"
    # an int past 64 bits, and one past float64's range: out of range, no OverflowError
    for big in (2 ** 64, 10 ** 400):
        with pytest.raises(PlanError, match=f"^input 'n' value {big} is out of range for int64"):
            make_scalar({"kind": "scalar", "type": "long long", "dtype": "int64", "value": big},
                        "input 'n'")
    # a float written past float32's range is refused, an infinity written is kept
    with pytest.raises(PlanError) as e:
        make_scalar({"kind": "scalar", "type": "float", "dtype": "float32", "value": 1e39}, "input 'a'")
    assert str(e.value) == ("input 'a' value 1e+39 is out of range for float32 (its dtype, largest "
                            "finite 3.40282e+38; write .inf for an infinity)")
    arr, v = make_scalar({"kind": "scalar", "type": "float", "dtype": "float32",
                          "value": float("-inf")})
    assert v == float("-inf") and arr.dtype == np.float32


OP = {"name": "axpy", "args": [{"name": "x", "type": "Tensor"}, {"name": "y", "type": "Tensor"},
                                {"name": "alpha", "type": "float"}]}


def vector(**over):
    v = {"name": "v", "where": "ops.yaml:1:1",
         "inputs": {"alpha": {"kind": "scalar", "type": "float", "dtype": "float32", "value": 2.0},
                    "y": {"kind": "tensor", "dtype": "float32", "shape": [3], "values": [1, 2, 3]},
                    "x": {"kind": "tensor", "dtype": "float32", "shape": [3], "values": [10, 20, 30]}},
         "output": {"dtype": "float32", "shape": None},
         "expected": {"reference": {"file": "ref.py", "function": "axpy"}},
         "rtol": None, "atol": None}
    v.update(over)
    return v


def test_inputs_come_in_schema_order():
    ins = make_inputs(OP, vector())
    assert [i.name for i in ins] == ["x", "y", "alpha"]
    assert [i.kind for i in ins] == ["tensor", "tensor", "scalar"]
    assert ins[2].value == 2.0 and ins[2].array.shape == ()
    with pytest.raises(PlanError, match="no input for argument 'alpha'"):
        v = vector()
        del v["inputs"]["alpha"]
        make_inputs(OP, v)
    with pytest.raises(PlanError, match="inputs z are not arguments"):
        v = vector()
        v["inputs"]["z"] = v["inputs"]["x"]
        make_inputs(OP, v)


def test_reference_called_in_schema_order_and_cast(tmp_path):
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def axpy(x, y, alpha):\n"
        "    assert isinstance(alpha, float)\n"
        "    return x + alpha * y.astype(np.float64)\n")
    v = vector()
    ins = make_inputs(OP, v)
    out = expected_output(v, ins, dt.by_name("float32"), root=str(tmp_path))
    assert out.dtype == np.float32 and out.tolist() == [12.0, 24.0, 36.0]
    assert output_shape(v, out) == (3,)
    with pytest.raises(PlanError, match=r"expected output has shape \[3\], the plan's output shape is \[4\]"):
        output_shape(vector(output={"dtype": "float32", "shape": [4]}), out)


def test_integers_for_an_output_whose_float_dtype_was_defaulted_are_refused(tmp_path):
    """A reference that returns int8 for an op whose output dtype the
    manifest leaves to the first tensor input (float32): the kernel that
    returns float32 passed and the int8 one failed on the descriptor. The
    vector fails and asks which it is; a dtype given anywhere is used."""
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "def axpy(x, y, alpha):\n"
        "    return np.clip(np.rint(x + alpha * y), -128, 127).astype(np.int8)\n")
    ins = make_inputs(OP, vector())
    defaulted = vector(output={"dtype": "float32", "shape": None, "defaulted": True})
    with pytest.raises(PlanError, match=r"^the reference ref.py:axpy gives int8 values, but the "
                                        r"output's dtype is float32 only as the first tensor "
                                        r"input's: say which the kernel returns \(output: "
                                        r"\{dtype: \.\.\.\} on the op or the vector\)$"):
        expected_output(defaulted, ins, dt.by_name("float32"), root=str(tmp_path))
    given = expected_output(vector(), ins, dt.by_name("float32"), root=str(tmp_path))
    assert given.dtype == np.float32 and given.tolist() == [12.0, 24.0, 36.0]
    as_int8 = expected_output(defaulted, ins, dt.by_name("int8"), root=str(tmp_path))
    assert as_int8.dtype == np.int8 and as_int8.tolist() == [12, 24, 36]


def test_a_0_d_tensor_stays_0_d(tmp_path):
    """A vector's 0-D input, and a 0-D expected output, reach the kernel and
    the comparison as 0-D (not as a tensor of shape [1], where a kernel
    that writes nothing for a 0-D tensor passed)."""
    x = make_tensor({"kind": "tensor", "dtype": "float32", "shape": [], "values": 1.5})
    assert x.shape == () and x.tolist() == 1.5
    drawn = make_tensor({"kind": "tensor", "dtype": "float32", "shape": [],
                         "random": {"seed": 1, "distribution": "normal"}})
    assert drawn.shape == ()
    (tmp_path / "ref.py").write_text("import numpy as np\ndef twice(x):\n    return 2 * x\n")
    op = {"name": "twice", "args": [{"name": "x", "type": "Tensor"}]}
    v = vector(inputs={"x": {"kind": "tensor", "dtype": "float32", "shape": [], "values": 1.5}},
               expected={"reference": {"file": "ref.py", "function": "twice"}})
    ins = make_inputs(op, v)
    assert ins[0].value.shape == ()
    out = expected_output(v, ins, dt.by_name("float32"), root=str(tmp_path))
    assert out.shape == () and out.tolist() == 3.0 and out.flags.c_contiguous


def test_an_expected_output_is_not_the_reference_s_buffer(tmp_path):
    """A reference that returns one buffer it fills at every call: each
    vector's expected output keeps its own values after later calls."""
    (tmp_path / "ref.py").write_text(
        "import numpy as np\n"
        "_out = np.zeros(3, np.float32)\n"
        "def axpy(x, y, alpha):\n"
        "    return np.add(x, alpha * y, out=_out)\n")
    f32 = dt.by_name("float32")
    first = vector()
    out = expected_output(first, make_inputs(OP, first), f32, root=str(tmp_path))
    alpha = {"kind": "scalar", "type": "float", "dtype": "float32", "value": 1.0}
    second = vector(inputs={**first["inputs"], "alpha": alpha})
    again = expected_output(second, make_inputs(OP, second), f32, root=str(tmp_path))
    assert out.tolist() == [12.0, 24.0, 36.0] and again.tolist() == [11.0, 22.0, 33.0]


def test_reference_problems_are_plan_errors(tmp_path):
    (tmp_path / "broken.py").write_text("import numpy as np\nx = = 1\n")
    (tmp_path / "raises.py").write_text("def f(*a):\n    raise ValueError('nope')\n")
    (tmp_path / "imports.py").write_text("import no_such_module_here\n")
    ins = make_inputs(OP, vector())
    f32 = dt.by_name("float32")
    cases = [({"file": "broken.py", "function": "f"}, r"broken.py cannot be imported: SyntaxError.*\(at broken.py:2\)"),
             ({"file": "raises.py", "function": "f"}, r"raises.py:f raised ValueError: nope \(at raises.py:2\)"),
             ({"file": "imports.py", "function": "f"}, "imports.py cannot be imported: ModuleNotFoundError"),
             ({"file": "raises.py", "function": "g"}, "has no function 'g'"),
             ({"file": "absent.py", "function": "g"}, "absent.py: no such file"),
             ({"file": None, "module": "no_such_mod_xyz", "function": "g"}, "no_such_mod_xyz cannot be imported")]
    for ref, msg in cases:
        with pytest.raises(PlanError, match=msg):
            expected_output(vector(expected={"reference": ref}), ins, f32, root=str(tmp_path))



def test_a_reference_s_counted_imports_are_in_the_plan():
    """``imports``: the module files the build counted as the reference's
    dependencies, written only when given; a plan without them (not the
    build's) leaves what a reference loads unchecked (None)."""
    ref = ReferenceSpec("k/ref.py", None, "f", ("k/helpers.py", "pkg/__init__.py"))
    assert ref.to_json() == {"file": "k/ref.py", "module": None, "function": "f",
                             "imports": ["k/helpers.py", "pkg/__init__.py"]}
    assert ReferenceSpec.from_json(ref.to_json(), "r") == ref
    assert ReferenceSpec.from_json({"file": "k/ref.py", "function": "f", "imports": []},
                                   "r").imports == ()
    bare = ReferenceSpec.from_json({"file": "k/ref.py", "function": "f"}, "r")
    assert bare.imports is None and "imports" not in bare.to_json()
    for bad in ("k/helpers.py", [1]):
        with pytest.raises(PlanError, match=r"^r\.imports: expected a list of paths, got "):
            ReferenceSpec.from_json({"file": "k/ref.py", "function": "f", "imports": bad}, "r")

def test_reference_by_module_and_expected_values():
    fn = load_reference(ReferenceSpec.from_json({"file": None, "module": "numpy", "function": "maximum"}, "r"))
    assert fn(1, 2) == 2
    v = vector(expected={"values": [1, 2, 3, 4]}, output={"dtype": "int16", "shape": [2, 2]})
    out = expected_output(v, [], dt.by_name("int16"))
    assert out.dtype == np.int16 and out.shape == (2, 2)


def test_tolerances_default_per_dtype():
    assert tolerances(vector(), dt.by_name("float32")) == (1.3e-6, 1e-5)
    assert tolerances(vector(rtol=0.1, atol=0.2), dt.by_name("float16")) == (0.1, 0.2)
    assert tolerances(vector(rtol=0.1, atol=0.2), dt.by_name("int32")) == (0.0, 0.0)


def test_a_checks_only_vector_s_output_shape_is_judged_as_any_other():
    """A checks-only vector (no expected result) takes its output shape from
    the plan alone: one missing or not a list of non-negative ints is a plan
    error naming it (a bad one was a ValueError traceback, or a negative
    dimension left to the image's layout)."""
    from gpsimd_emu.materials import materials
    op = OpPlan.from_json({"name": "f", "args": [{"name": "x", "type": "Tensor"}]}, "op")

    def shape_of(output):
        v = VectorPlan.from_json({"name": "v", "output": {"dtype": "float32", **output},
                                  "inputs": {"x": {"kind": "tensor", "dtype": "float32",
                                                   "shape": [2], "values": [1, 2]}}}, "v")
        return materials(op, v, ".", 60.0)[3]
    assert shape_of({"shape": [2, 3]}) == (2, 3)
    with pytest.raises(PlanError, match=r"^a checks-only vector \(no expected result\) needs "
                                        r"output.shape$"):
        shape_of({})
    for bad in (["a"], [-1], [1.5]):
        with pytest.raises(PlanError) as e:
            shape_of({"shape": bad})
        assert str(e.value) == f"output: bad shape {tuple(bad)!r} (a list of non-negative ints)"


@pytest.mark.parametrize("source", [
    "def f(*a):\n    while True:\n        pass\n",                       # its call never returns
    "while True:\n    pass\n",                                          # nor its import
    "def f(*a):\n    while True:\n        try:\n            pass\n        except Exception:\n"
    "            pass\n",                                               # (Exception is not it)
])
def test_a_reference_that_never_returns_fails_its_vector_at_the_time_limit(tmp_path, source):
    """A reference runs in the worker, outside any run of the cores: one
    that never returned held the whole test run until the supervisor's
    limit (six runs per vector and more, an hour at the default 60 s), then
    lost every vector's result; now its vector fails at the vector's time
    limit, naming it, and the alarm is left as it was."""
    import signal
    (tmp_path / "loops.py").write_text(source)
    ins = make_inputs(OP, vector())
    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(PlanError, match=r"^reference loops\.py:f did not return within 0\.3 s "
                                        r"\(the vector's time limit\)$"):
        vectors.expected_output(VectorPlan.from_json(vector(expected={"reference": {
            "file": "loops.py", "function": "f"}}), "v"), ins, dt.by_name("float32"),
            str(tmp_path), 0.3)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def test_what_a_reference_writes_is_kept_bounded_and_shown_after_its_name(tmp_path, capfd):
    """A reference's stdout and stderr (its file descriptors, C code's
    too) are kept as the cores' are, the first and last 32 KiB, and shown
    on stderr after the reference's and the vector's names, their control
    characters visible: one that printed in a loop flooded the build's
    output, and its own PASS line reached the build's stdout."""
    from gpsimd_emu.control import ZY
    keep = ZY["OUTPUT_KEEP"]
    (tmp_path / "chatty.py").write_text(
        "import os, sys\n"
        "def f(x, y, alpha):\n"
        "    print('PASS lib::f[v]\\x1b[2J')\n"
        "    for i in range(200000):\n"
        "        print('line', i)\n"
        "    sys.stdout.flush()\n"
        "    os.write(2, b'the end\\r\\n')\n"
        "    return x + alpha * y\n")
    ins = make_inputs(OP, vector())
    capfd.readouterr()
    out = vectors.expected_output(VectorPlan.from_json(vector(expected={"reference": {
        "file": "chatty.py", "function": "f"}}), "v"), ins, dt.by_name("float32"),
        str(tmp_path), 30)
    assert out.tolist() == [12.0, 24.0, 36.0]
    got = capfd.readouterr()
    written = len("PASS lib::f[v]\x1b[2J\n") + sum(len(f"line {i}\n") for i in range(200000)) \
        + len("the end\r\n")
    lines = got.err.splitlines()
    assert got.out == ""
    assert all(line.startswith("[reference chatty.py:f, vector v] ") for line in lines)
    assert lines[0] == "[reference chatty.py:f, vector v] PASS lib::f[v]\\x1b[2J"
    assert lines[-1] == "[reference chatty.py:f, vector v] the end\\r"
    assert f"[... {written - 2 * keep} bytes dropped ...]" in got.err
    assert len(got.err) < 2 * keep + 40 * (2 * keep // 8)     # (the kept bytes and prefixes)


def test_the_folder_and_umask_a_reference_changes_are_given_back(tmp_path, monkeypatch):
    """A reference that changed the working folder (os.chdir to read its
    data) made every later vector's relative paths miss, and the results
    file was written under the other folder; one that set the umask made
    the results file as the reference chose."""
    (tmp_path / "moves.py").write_text(
        "import os\n"
        "def f(x, y, alpha):\n"
        "    os.chdir('/')\n"
        "    os.umask(0)\n"
        "    return x + alpha * y\n")
    monkeypatch.chdir(tmp_path)
    mask = os.umask(0o27)
    try:
        ins = make_inputs(OP, vector())
        out = vectors.expected_output(VectorPlan.from_json(vector(expected={"reference": {
            "file": "moves.py", "function": "f"}}), "v"), ins, dt.by_name("float32"), ".", 30)
        assert out.tolist() == [12.0, 24.0, 36.0]
        assert os.getcwd() == str(tmp_path) and os.umask(0o27) == 0o27
    finally:
        os.umask(mask)


def test_what_a_reference_leaves_to_be_written_after_its_call_is_not_the_emulators(
        tmp_path, capfd):
    """A reference's text that reached the worker's own streams after its
    call (in ``sys.__stdout__``'s buffer; printed by a thread it started
    that outlives the call) was written to the build's output as the
    emulator's text: a forged PASS line. Buffered text is its call's; a
    thread it left prints into the references' pipe, never the worker's."""
    (tmp_path / "leaves.py").write_text(
        "import sys, threading\n"
        "go, done = threading.Event(), threading.Event()\n"
        "def later():\n"
        "    go.wait()\n"
        "    print('PASS lib::f[thread]', flush=True)\n"
        "    print('PASS lib::f[thread err]', file=sys.stderr, flush=True)\n"
        "    done.set()\n"
        "def f(x, y, alpha):\n"
        "    sys.__stdout__.write('PASS lib::f[buffered]\\n')\n"
        "    threading.Thread(target=later, daemon=True).start()\n"
        "    return x + alpha * y\n")
    ins = make_inputs(OP, vector())
    capfd.readouterr()
    out = vectors.expected_output(VectorPlan.from_json(vector(expected={"reference": {
        "file": "leaves.py", "function": "f"}}), "v"), ins, dt.by_name("float32"),
        str(tmp_path), 30)
    assert out.tolist() == [12.0, 24.0, 36.0]
    from gpsimd_emu.sourceonly import _REF_CACHE
    leaves = next(m for m, *_ in _REF_CACHE.values() if m.__name__.endswith("_leaves"))
    leaves.go.set()
    assert leaves.done.wait(10)
    print("the worker's own line", flush=True)
    got = capfd.readouterr()
    assert got.out == "the worker's own line\n"
    assert got.err == "[reference leaves.py:f, vector v] PASS lib::f[buffered]\n"


def test_a_reference_that_closes_the_processs_streams_leaves_them_usable(
        tmp_path, capfd, monkeypatch):
    """A reference that closed ``sys.__stdout__`` and ``sys.__stderr__``
    (the worker's own streams) made the worker's next line raise: the
    whole run's results were lost, and nothing said why. They are opened
    again on their file descriptors after its call."""
    import sys
    mine = [open(os.dup(fd), "w", encoding="utf-8") for fd in (1, 2)]
    for name, stream in zip(("stdout", "stderr"), mine):
        monkeypatch.setattr(sys, name, stream)
        monkeypatch.setattr(sys, f"__{name}__", stream)
    (tmp_path / "closes.py").write_text(
        "import sys\n"
        "def f(x, y, alpha):\n"
        "    sys.__stdout__.close()\n"
        "    sys.__stderr__.close()\n"
        "    return x + alpha * y\n")
    ins = make_inputs(OP, vector())
    capfd.readouterr()
    out = vectors.expected_output(VectorPlan.from_json(vector(expected={"reference": {
        "file": "closes.py", "function": "f"}}), "v"), ins, dt.by_name("float32"),
        str(tmp_path), 30)
    assert out.tolist() == [12.0, 24.0, 36.0]
    assert not sys.stdout.closed and not sys.stderr.closed and sys.__stdout__ is sys.stdout
    print("PASS lib::f[v]", flush=True)
    print("a warning", file=sys.stderr, flush=True)
    assert capfd.readouterr() == ("PASS lib::f[v]\n", "a warning\n")
