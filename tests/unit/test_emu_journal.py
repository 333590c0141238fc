"""What the supervisor makes of a worker that ended while it made a vector
ready (``gpsimd_emu.cli._Journal``): the vector is blamed only once a new
worker that makes it ready first ends too, or the worker ends at it again;
a thread or timer an earlier reference left running ended a worker while it
made the next vector ready, and that vector failed for it."""
import json
import signal

from gpsimd_device.plan import TestPlan
from gpsimd_emu import cli

EXIT_5 = 5 << 8                 # (the wait status of exit status 5)


def journal() -> "cli._Journal":
    vectors = [{"name": n, "where": f"ops.yaml:{k}:3", "inputs": {},
                "output": {"dtype": "float32", "shape": [1]},
                "expected": {"values": [1]}} for k, n in enumerate("abc", 1)]
    plan = TestPlan.from_json({"format": 1, "library": "lib", "multicore": False, "cores": [
        {"core": None, "lsp": "lsp_fll_load_cpu_single", "object": "x.so"}], "ops": [
        {"name": "f", "schema": "my_ops::f() -> Tensor", "args": [], "stack_size": 4096,
         "vectors": vectors}]})
    return cli._Journal(plan, 1.0)


def lines(j, *docs) -> None:
    j._take(b"".join(json.dumps(d).encode() + b"\n" for d in docs))


def test_an_end_is_checked_by_a_new_worker_that_makes_the_vector_first(capsys):
    j = journal()
    lines(j, {"making": ["f", "a"]}, {"making": None}, {"making": ["f", "b"]})
    assert j.blame(EXIT_5) and j.rows == [] and j.probe == ["f", "b"]
    assert capsys.readouterr().out == ""            # (no verdict yet)
    lines(j, {"making": ["f", "b"]})                # the new worker's probe ends it too
    assert j.blame(EXIT_5) and j.probe is None
    assert [(r.vector, r.status) for r in j.rows] == [("b", "fail")]
    assert j.rows[0].message == (
        "this vector ended the emulator's worker (exit status 5) while it made its inputs "
        "and expected output, twice, the second time made ready first in a new worker (a "
        "reference that calls os._exit or crashes the process?); the vectors after it ran "
        "in a new worker")
    assert capsys.readouterr().out.startswith("FAIL lib::f[b] (ops.yaml:2:3): this vector")


def test_a_vector_whose_probe_passes_but_that_ends_a_worker_again_names_those_before():
    j = journal()
    lines(j, {"making": ["f", "b"]})
    assert j.blame(EXIT_5) and j.probe == ["f", "b"]
    # the probe ends, then a is made again and b after it: the worker ends there
    lines(j, {"making": ["f", "b"]}, {"making": None}, {"making": ["f", "a"]},
          {"making": None}, {"making": ["f", "b"]})
    assert j.probe is None and j.blame(int(signal.SIGKILL))     # (killed by it)
    assert [(r.vector, r.status) for r in j.rows] == [("b", "fail")]
    assert j.rows[0].message == (
        "this vector was being made ready when the emulator's worker ended (signal 9), "
        "twice, though made ready first in a new worker it did not end it: what a reference "
        "made ready before it left running (a thread, a timer, a child process) may have "
        "(made before it there: f[a]); the vectors after it ran in a new worker")


def test_an_end_before_any_result_while_no_vector_is_made_ready_blames_none():
    j = journal()
    lines(j, {"making": ["f", "a"]}, {"making": None})
    assert not j.blame(EXIT_5) and j.rows == []


def test_an_end_while_no_vector_is_made_ready_keeps_the_results_given(capsys):
    """A worker ended while it made no vector ready (a thread a reference
    left, a stream of its own a reference closed): every result it had
    given was lost with the run. They are kept, and a new worker runs the
    rest, as long as each worker ended so gave a result more."""
    j = journal()
    row = {"op": "f", "vector": "a", "where": "ops.yaml:1:3", "status": "pass", "message": ""}
    lines(j, {"making": ["f", "a"]}, {"making": None}, {"result": row},
          {"making": ["f", "b"]}, {"making": None})
    assert j.blame(EXIT_5)
    assert [(r.vector, r.status) for r in j.rows] == [("a", "pass")]
    assert capsys.readouterr().err == (
        "gpsimd_emu: lib: the emulator's worker ended (exit status 5) while it made no vector "
        "ready; its results (1) are kept and the vectors left run in a new worker\n")
    lines(j, {"making": ["f", "b"]}, {"making": None})
    assert not j.blame(EXIT_5) and len(j.rows) == 1    # (no result more: the run ends)


def test_the_run_s_status_is_the_results_file_s_not_the_worker_s(tmp_path, monkeypatch):
    """A thread a reference left running that ended the worker with
    ``os._exit(0)`` after it wrote failed results made the run exit 0: the
    status now follows the file written (and the other way round)."""
    import os
    plan = journal().plan
    for written, code, want in (("failed", 0, 1), ("results", 1, 0), ("failed", 1, 1)):
        args = cli.parse(["run", "p.json", "--results", str(tmp_path / "results"),
                          "--failed-results", str(tmp_path / "failed"), "--timeout", "5"])

        def worker(args, plan, options, journal, prior, probe=None, written=written, code=code):
            with open(tmp_path / written, "w") as f:
                f.write("{}")
            os._exit(code)
        monkeypatch.setattr(cli, "_run_worker", worker)
        assert cli.supervise(args, plan, None) == want, (written, code)
