"""The second call's arguments (gpsimd_emu.materials.second_call_of): the
vector before this one lends its arguments only when they and its output
take this vector's places; whether it passed is asked (which may run it on
its own) only then, and a vector known not to have passed (it hung in an
earlier process of a pytest run) has its reference run never."""

from gpsimd_device.plan import TestPlan
from gpsimd_emu import materials as m


def _plan(first_output_dtype="float32"):
    def vector(name, values, out_dtype):
        return {"name": name, "where": "ops.yaml:1:3",
                "inputs": {"x": {"kind": "tensor", "dtype": "float32", "shape": [2],
                                 "values": values}},
                "output": {"dtype": out_dtype, "shape": None},
                "expected": {"values": [-v for v in values]}, "rtol": 0, "atol": 0}
    return TestPlan.from_json({
        "format": 1, "library": "l", "multicore": False,
        "cores": [{"core": None, "lsp": "l", "object": "l.so"}],
        "ops": [{"name": "neg", "schema": "my_ops::neg(Tensor x) -> Tensor",
                 "args": [{"name": "x", "type": "Tensor"}],
                 "vectors": [vector("a", [1.0, 2.0], first_output_dtype),
                             vector("b", [3.0, 4.0], "float32")]}]})


def _second(plan, passed, failed=lambda name: False):
    op = plan.ops[0]
    inputs, out_dtype, _, shape, _, _, where = m.materials(op, op.vectors[1], ".", 60.0)
    sig = m.signature(inputs, out_dtype, shape, where)
    return m.second_call_of(op, op.vectors[1], sig, None, ".", 60.0, passed, failed)


def test_the_vector_before_lends_its_arguments_when_it_passed():
    asked = []
    got = _second(_plan(), lambda name: asked.append(name) or True)
    assert asked == ["a"] and got[1] == "a" and got[2][0].array.tolist() == [1.0, 2.0]
    assert got[3].tolist() == [-1.0, -2.0]
    assert _second(_plan(), lambda name: False) is None


def test_another_output_signature_asks_nothing():
    asked = []
    assert _second(_plan("float16"), lambda name: asked.append(name) or True) is None
    assert asked == []          # (a vector not asked for is not run for nothing)


def test_a_vector_known_to_have_failed_has_its_reference_run_never(monkeypatch):
    plan = _plan()
    op = plan.ops[0]
    inputs, out_dtype, _, shape, _, _, where = m.materials(op, op.vectors[1], ".", 60.0)
    sig = m.signature(inputs, out_dtype, shape, where)

    def no_reference(*args, **kwargs):
        raise AssertionError("the reference of a vector that did not pass was run")
    monkeypatch.setattr(m, "materials", no_reference)
    asked = []
    assert m.second_call_of(op, op.vectors[1], sig, None, ".", 60.0,
                            lambda name: asked.append(name) or True,
                            lambda name: name == "a") is None
    assert asked == []
