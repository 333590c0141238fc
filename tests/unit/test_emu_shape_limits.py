"""The time limits of a shape library's child (gpsimd_emu.shapes): a load
that does not return and a call that does not return each fail their
vector with the limit that applied, and the vectors after them are asked
again in a new child. The child's work is replaced by one that hangs
(forked, so the replacement reaches it); the limits are cut to fractions
of a second where they are only waited out."""
import os
import time

import pytest

from gpsimd_build.manifest import load_manifest
from gpsimd_build.testplan import library_plan
from gpsimd_device.shapes import RegisteredLibrary, RegisteredOp, Registration
from gpsimd_emu import shapes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = "the shape function relu_fwd_shape (m.def at kernels/relu/shape.cpp:17)"


@pytest.fixture
def relu_plan():
    """The shipped relu library's plan and a registration of relu_forward
    only."""
    lib = next(x for x in load_manifest(os.path.join(ROOT, "ops.yaml"), root=ROOT).libraries
               if x.name == "relu")
    plan = library_plan(lib, [(None, "relu", "build/host/relu/relu.packed.so")])
    reg = Registration((RegisteredLibrary("my_ops", "kernels/relu/shape.cpp", 16),),
                       (RegisteredOp("relu_forward", "relu_forward", "my_ops",
                                     "kernels/relu/shape.cpp", 17, "relu_fwd_shape(at::Tensor)",
                                     (("TENSOR", "torch::Tensor"),), "torch::Tensor", True,
                                     True),))
    return plan, reg


def _outputs(plan, op="relu_forward"):
    return [v.output for v in next(o for o in plan.ops if o.name == op).vectors]


def test_a_load_that_does_not_return_fails_each_vector_by_the_load_limit(relu_plan, monkeypatch):
    plan, reg = relu_plan
    monkeypatch.setattr(shapes, "LOAD_TIMEOUT", 0.6)    # (only waited out: never too short)
    monkeypatch.setattr(shapes, "CALL_TIMEOUT", 0.3)

    def hangs(library, calls, emit):        # (the library's initialisers never return)
        time.sleep(60)
    monkeypatch.setattr(shapes, "_evaluate", hangs)
    shaped = shapes.shaped_plan(plan, "lib.so", reg)
    outputs = _outputs(shaped)
    assert len(outputs) == 6
    assert [o.error for o in outputs] == [
        f"{SOURCE} faulted: the call did not return within 0.6 s"] * 6
    # the op without a registration keeps its outputs
    assert _outputs(shaped, "relu_backward") == _outputs(plan, "relu_backward")


def test_a_call_that_does_not_return_fails_its_vector_by_the_call_limit(relu_plan, monkeypatch):
    plan, reg = relu_plan
    monkeypatch.setattr(shapes, "LOAD_TIMEOUT", 60.0)   # (the loads answer, on a loaded machine)
    monkeypatch.setattr(shapes, "CALL_TIMEOUT", 0.3)    # (only waited out)

    def second_hangs(library, calls, emit):     # (the first call answers, the next hangs)
        _, args = calls[0]
        emit({"dtype": "float32", "shape": args[0][2]})
        time.sleep(60)
    monkeypatch.setattr(shapes, "_evaluate", second_hangs)
    start = time.monotonic()
    outputs = _outputs(shapes.shaped_plan(plan, "lib.so", reg))
    took = time.monotonic() - start
    shapes_given = [list(v.inputs["x"].shape) for v in next(
        o for o in plan.ops if o.name == "relu_forward").vectors]
    for i, out in enumerate(outputs):
        if i % 2 == 0:      # (a new child's first call, after a load)
            assert out.error is None and list(out.shape) == shapes_given[i], out
            assert out.dtype == "float32" and out.source == SOURCE
        else:
            assert out.error == f"{SOURCE} faulted: the call did not return within 0.3 s"
    assert took >= 3 * 0.3, took        # (three calls waited out their limit)


def test_a_registration_that_does_not_load_in_time_is_a_step_error(monkeypatch):
    from gpsimd_emu import shapelib

    class Hangs:            # (the library's initialisers never return)
        def __init__(self, path):
            time.sleep(60)
    monkeypatch.setattr(shapelib, "ShapeLibrary", Hangs)
    monkeypatch.setattr(shapes, "LOAD_TIMEOUT", 0.5)     # (only waited out)
    with pytest.raises(shapes.StepError) as e:
        shapes.read_registration("lib.so")
    assert str(e.value) == ("loading the shape library took more than 0.5 s (its "
                            "NEURON_LIBRARY blocks or static initialisers do not return)")


def test_the_outputs_step_takes_the_registration_step_s_file(relu_plan, tmp_path, monkeypatch,
                                                             capsys):
    """``outputs LIB REGISTRATION PLAN``: the registration is the one the
    registration step wrote (and the check read), not read again from the
    library in a child of its own: the library loads once, in the child
    that calls its shape functions."""
    plan, reg = relu_plan

    def no_second_load(library):
        raise AssertionError("the library was loaded for its registration again")
    monkeypatch.setattr(shapes, "read_registration", no_second_load)

    def answers(library, calls, emit):
        for _, args in calls:
            emit({"dtype": "float32", "shape": args[0][2]})
    monkeypatch.setattr(shapes, "_evaluate", answers)
    (tmp_path / "reg.json").write_text(reg.dumps())
    (tmp_path / "plan.json").write_text(plan.dumps())
    out = tmp_path / "shaped.json"
    argv = ["outputs", "lib.so", str(tmp_path / "reg.json"), str(tmp_path / "plan.json"),
            "-o", str(out)]
    assert shapes.main(argv) == 0
    from gpsimd_device.plan import TestPlan
    assert [o.source for o in _outputs(TestPlan.load(str(out)))] == [SOURCE] * 6
    (tmp_path / "reg.json").write_text("{}")
    assert shapes.main(argv) == 1
    assert capsys.readouterr().err == (f"gpsimd: {tmp_path / 'reg.json'}: format None, "
                                       "expected 1\n")
