"""The search (``python -m gpsimd_explore``): each op of a library searched
for a failing input, with no vector written for it, property-based
(Hypothesis is the engine).

``python -m gpsimd_explore PLAN --zygote PROGRAM [--root DIR]
[--examples N] [--seed S] [--max-elements N] [--time-limit S]
[--database DIR] [--save-dir DIR] [--save-prefix P] [--timeout S]
[--shapes LIB] [--record FILE] [--memory SIZE] [--parallel N]
[--no-checks]`` (``scons explore-<lib>``
runs it, with the test command's limits): for every op of the
plan, draws inputs (:func:`inputs_strategy`), runs each as a vector
through the library's session (``gpsimd_emu.session``: every check of the
emulator, and the reference compared as a vector's is) and prints one
line per op:

* ``EXPLORED lib::op: N examples, every check passed``;
* ``FALSIFIED lib::op: <the FAIL line of the smallest failing example>``,
  then that example as a YAML vector to paste under the op's ``vectors:``
  (values written out when they are few and finite, else an ``.npy`` file
  per input in ``--save-dir``, named ``--save-prefix`` + file name in the
  YAML, relative to the manifest);
* ``SKIPPED lib::op: <why>`` for an op this cannot draw for.

What is drawn (``gpsimd_explore.draw``): each tensor argument's dtype
and rank and the reference come from the op's vectors (the first of each
set of dtypes); every scalar argument is drawn from its dtype's whole
range (or the op's ``explore: scalars:`` range); an op
without vectors is probed first (``gpsimd_explore.probe``: its kernel's SHAPE
and DTYPE faults teach each tensor's rank and dtype; scalars are 1 in the
probe) and compared with its reference or explored checks-only, its
output from its shape function (``--shapes``: the library's shape
library; without one it is ``SKIPPED``). When the tensors share a shape,
every tensor gets one drawn shape (each dimension from sizes that catch
partition bugs: 1, primes, counts that do not divide by the core count,
or any up to the cap; ``--max-elements`` elements at most), else each
tensor draws its dimensions, sizes equal in the vector drawn equal
(``explore: keep_shape`` keeps a tensor's). Values cover the
dtype's whole range: ±0, subnormals, the largest finite values, ±inf and
NaN (the comparison counts NaN against NaN as equal), unless the op's
``explore: {low, high}`` narrows them to finite values in that range.
With a shape library, each drawn input's output comes from the shape
function, as the runtime allocates it (a fault there fails the example).
``--examples 0`` runs the probe only (``PROBED lib::op: ...`` lines);
``--record FILE`` writes what each op's search or probe found (JSON:
per op, in the plan's order, ``status``, ``text``, a falsified op's
``result`` (the failing example's vector result, with its layout) and,
after a probe, ``ranks``, ``dtypes``, ``lessons``, ``runs``, ``problem``,
``last_failure`` (the probe's last run's failure that no lesson explains,
"" when it passed); ``plan_sha256``, the plan's digest; and ``inputs``,
the SHA-256 of each file it ran, the core objects, the shape library and
the emulator's program, by path relative to the record's folder), which
``gpsimd-import`` and the HTML report read. The probe alone
(``--examples 0``) needs no Hypothesis.

Deterministic and bounded: ``--examples`` per op (default 100), the seed
``--seed`` (default 0), failing examples kept in Hypothesis's example
database ``--database`` (a folder per op) and replayed first next time (the line says
``replayed``), and ``--time-limit`` seconds per op of search (the line
says ``time limit``; a failure found within them is shrunk and replayed
however long that takes). The drawn inputs' files go to a folder of the
run's own under the plan's ``explore/``, removed at its end (two runs of
one library at once never meet). A failing example is reported unless
the kernel refuses a rank it drew other than its vector's
(``gpsimd_explore.verdict``). Exit status: 0 when no op was falsified, 1 when one was, 2 when
the plan or the program cannot be used or Hypothesis is not installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from gpsimd_device.atomic import file_digest, write_atomically
from gpsimd_device.plan import ExploreSpec, OutputSpec, PlanError, TestPlan, VectorPlan
from gpsimd_device.planinputs import SCALAR_ARG_TYPES
from gpsimd_device.printable import visible
from gpsimd_device.results import format_line
from gpsimd_device.zygote import default_path

from .draw import inputs_strategy, sweep_all
from .example import example_vector, vector_yaml
from .probe import probe
from .verdict import refused
from gpsimd_emu.settings import add_run_options, run_options

__all__ = ["main", "explore_op"]

class _Falsified(Exception):
    """An example failed (raised inside the property, so that Hypothesis
    shrinks it)."""


def _blank_vector(op, shapes: Dict[str, Tuple[int, ...]], dtypes: Dict[str, str],
                  name: str = "probe") -> VectorPlan:
    """A vector of ``op`` (no vectors of its own): each tensor argument
    random with its shape and dtype, each scalar 1 (of its schema type's
    dtype, ``gpsimd_device.planinputs.SCALAR_ARG_TYPES``), its output of
    the first tensor's dtype, compared with the op's reference when it has
    one, else checks-only."""
    inputs = {}
    for arg in op.args:
        if arg.type == "Tensor":
            inputs[arg.name] = {"kind": "tensor", "dtype": dtypes[arg.name],
                                "shape": list(shapes[arg.name]), "random": {}}
        else:
            dtype = SCALAR_ARG_TYPES.get(arg.type) or "float32"
            inputs[arg.name] = {"kind": "scalar", "type": arg.type, "dtype": dtype,
                                "value": 1.0 if dtype == "float32" else 1}
    expected = {"reference": op.reference.to_json()} if op.reference is not None else {}
    # (the output's dtype as the manifest defaults a vector's: the first
    # tensor's; a shape function or explore: output: replaces it)
    first = next((a.name for a in op.args if a.type == "Tensor"), None)
    output = {"dtype": dtypes[first]} if first is not None else {}
    return VectorPlan.from_json({"name": name, "inputs": inputs, "expected": expected,
                                 "output": output, "where": "explored"}, name)


def _output_like(explore: ExploreSpec) -> Callable:
    """``shaped(vector)`` for an op whose ``explore:`` block gives its
    output: the shape of tensor argument ``output_like``, its dtype (or
    ``output_dtype``)."""
    def shaped(vector: VectorPlan) -> VectorPlan:
        like = vector.inputs[explore.output_like]
        return dataclasses.replace(vector, output=OutputSpec(
            explore.output_dtype or like.dtype, tuple(like.shape)))
    return shaped


def _probed_template(session, op, shaped: Callable, record: Optional[dict],
                     explore: ExploreSpec):
    """``(template, None)``: a vector of ``op`` with the ranks and dtypes
    the probe learned (``gpsimd_explore.probe``; it starts from the dtypes of
    the op's ``explore:`` block), or ``(None, why)``."""
    if not op.args:
        return None, "no vector, and no schema to draw its arguments from"
    tensors = [a.name for a in op.args if a.type == "Tensor"]

    def run(shapes, dtypes):
        result = session.run_vector(op, shaped(_blank_vector(op, shapes, dtypes)))
        return result.passed or result.checked, result.message

    probed = probe(tensors, run, dtypes={t: explore.dtype_of(t) for t in tensors
                                         if explore.dtype_of(t)})
    if record is not None:
        record.update(ranks=probed.ranks, dtypes=probed.dtypes, lessons=probed.lessons,
                      runs=probed.runs, problem=probed.problem,
                      last_failure=visible(probed.last_message.split("; ")[0][:500],
                                           newlines=False))   # (a YAML comment's, a warning's)
    if probed.problem:
        return None, f"the probe phase: {probed.problem}"
    return _blank_vector(op, probed.shapes(), probed.dtypes), None


def _digest(arrays: Dict[str, object]) -> str:
    """12 hex digits of the example's inputs (names, dtypes, shapes, bytes):
    its files' names, so that a later example never overwrites the files
    of one already pasted."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        value = arrays[name]
        h.update(name.encode() + b"\0")
        if isinstance(value, np.ndarray):
            h.update(f"{value.dtype.str}{value.shape}".encode() + value.tobytes())
        else:
            h.update(repr(value).encode())
    return h.hexdigest()[:12]


def _templates(vectors) -> List[VectorPlan]:
    """The vectors a search draws from: the first of each signature (its
    tensors' and output's dtypes, in the op's order) among those with a
    reference or checks only (a drawn input has no expected values)."""
    seen: Dict[tuple, VectorPlan] = {}
    for vector in vectors:
        if vector.expected.reference is None and not vector.expected.checks_only:
            continue
        key = tuple((k, getattr(v, "dtype", None)) for k, v in vector.inputs.items()
                    if getattr(v, "kind", None) == "tensor") + (vector.output.dtype,)
        seen.setdefault(key, vector)
    return list(seen.values())


def _probe_text(record: Optional[dict]) -> str:
    """What the probe learned, in words (``PROBED`` lines)."""
    if not record or "ranks" not in record:
        return "its vector gives the ranks and dtypes"
    return ", ".join(f"{t}: rank {r} {record['dtypes'][t]}" for t, r in record["ranks"].items()) \
        + f" ({record['runs']} run{'' if record['runs'] == 1 else 's'})"


def explore_op(session, plan: TestPlan, op, *, examples: int, seed: int, max_elements: int,
               time_limit: Optional[float], database: Optional[str], work: str, root: str,
               save_dir: str, save_prefix: str, shaped: Optional[Callable] = None,
               record: Optional[dict] = None) -> Tuple[str, str]:
    """Search ``op`` (of ``plan``, run by ``session``) for a failing input:
    ``(status, text)``, status ``EXPLORED``, ``FALSIFIED``, ``SKIPPED`` or
    (``examples`` 0: the probe only) ``PROBED``, text the printed lines
    (module text). ``work``: a folder for the drawn inputs' files;
    ``shaped(vector)``: the vector with its output from the op's shape
    function (None: the library has none); ``record``: a dict this fills
    with what the probe learned (``ranks``, ``dtypes``, ``lessons``)."""
    label = f"{plan.library}::{op.name}"
    explore = op.explore or ExploreSpec()
    if shaped is None and explore.output_like:
        shaped = _output_like(explore)
    if shaped is None and (op.vectors[0].expected.checks_only if op.vectors
                           else op.reference is None):
        return "SKIPPED", (f"SKIPPED {label}: nothing gives the output of a drawn input (no "
                           "shape function, no vector with a reference, and no explore: "
                           "output: {like: <argument>})")
    shaped = shaped or (lambda vector: vector)     # (outputs from the reference)
    if op.vectors:
        templates = _templates(op.vectors)
        if not templates:
            return "SKIPPED", (f"SKIPPED {label}: its vectors give expected values, not a "
                               "reference, so no drawn input has an expected result")
    else:
        template, why = _probed_template(session, op, shaped, record, explore)
        if template is None:
            return "SKIPPED", f"SKIPPED {label}: {why}"
        templates = [template]
    if examples <= 0:       # (the probe only: no Hypothesis needed)
        return "PROBED", f"PROBED {label}: {_probe_text(record)}"
    from hypothesis import HealthCheck, given, reject, seed as hseed, settings, strategies as st
    from hypothesis.database import DirectoryBasedExampleDatabase
    state = {"count": 0, "rejected": 0, "failed": None, "start": time.monotonic(),
             "timed_out": False}

    folder = os.path.join(work, op.name)

    def run(drawn, refuse=None) -> None:
        index, arrays = drawn
        if state["failed"] is None and time_limit is not None and \
                time.monotonic() - state["start"] > time_limit:
            # (the limit ends the search for a failure, never the shrinking
            # or the replay of one found: those run every example)
            state["timed_out"] = True
            return
        state["count"] += 1
        template = templates[index]
        vector = shaped(example_vector(template, arrays, "explore", folder, root))
        result = session.run_vector(op, vector)
        if not (result.passed or result.checked):
            if refused(session, op, template, vector, arrays, result.message):
                # (the kernel refuses a rank its vectors do not use: not
                # its bug, and not one of the examples counted)
                state["count"] -= 1
                state["rejected"] += 1
                (refuse or reject)()
                return
            state["failed"] = (template, arrays, result)
            state.setdefault("first_failure", state["count"])
            raise _Falsified(result.message)

    # the sweep past the device's buffers, after the search: of every
    # template, by turns, a quarter of the examples at most, taken from
    # the search's
    sweep = sweep_all(templates, max_elements, explore, seed)[:examples // 4]

    # (one folder per op: the search functions of a library's ops look
    # alike to Hypothesis, which keys its database by the function, and one
    # op's failure would be replayed, and called so, for the next)
    database = os.path.join(database, op.name) if database else None
    # (the seed inside the settings: outside, it would turn the database off)
    # (the first dtype signature first: an example shrinks towards it)
    drawn = st.sampled_from(range(len(templates))).flatmap(
        lambda i: inputs_strategy(templates[i], max_elements, explore).map(lambda a: (i, a)))
    def searched(example) -> None:
        run(example)
    prop = hseed(seed)(given(drawn)(searched))
    prop = settings(max_examples=examples - len(sweep), deadline=None, print_blob=False,
                    database=DirectoryBasedExampleDatabase(database) if database else None,
                    suppress_health_check=list(HealthCheck))(prop)
    held = bool(database) and os.path.isdir(database) and any(os.scandir(database))
    try:
        prop()
        for index, arrays in sweep:
            run((index, arrays), refuse=lambda: None)
    except _Falsified:
        template, arrays, result = state["failed"]
        stem = f"{plan.library}.{op.name}.{_digest(arrays)}"
        first = next((a for a in arrays.values() if isinstance(a, np.ndarray)), None)
        shapes = "scalars" if first is None else "x".join(str(d) for d in first.shape) or "scalar"
        name = f"explored_{shapes}"
        text = vector_yaml(template, arrays, name, save_dir, save_prefix, stem,
                           order=[a.name for a in op.args])
        result = dataclasses.replace(result, vector=name, where="explored")
        if record is not None:      # (the report draws its picture)
            record["result"] = result.to_json()
        replayed = held and state.get("first_failure") == 1
        note = " (replayed from the example database)" if replayed else ""
        return "FALSIFIED", (f"FALSIFIED {label}{note}: {format_line(plan.library, result)}\n"
                             + "".join("    " + line + "\n" for line in text.splitlines()))
    if record is not None:
        record["rejected"] = state["rejected"]
    limit = " (time limit)" if state["timed_out"] else ""
    return "EXPLORED", (f"EXPLORED {label}: {state['count']} example"
                        f"{'' if state['count'] == 1 else 's'}, every check passed{limit}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gpsimd_explore",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("plan")
    add_run_options(p)
    p.add_argument("--examples", type=int, default=100, help="per op; 0: the probe phase only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-elements", type=int, default=1 << 15)
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds per op of search (a failure found is still shrunk)")
    p.add_argument("--database", help="Hypothesis's example database (a folder)")
    p.add_argument("--save-dir", default=".", help="where the .npy of a failing example go")
    p.add_argument("--save-prefix", default="", help="their names' prefix in the YAML")
    p.add_argument("--shapes", help="the library's shape library (its outputs' shapes)")
    p.add_argument("--record", help="write what each op's exploration found here (JSON)")
    return p


def _shaper(plan: TestPlan, library: Optional[str]) -> Optional[Callable]:
    """``shaped(vector)`` for ``explore_op`` from the shape library (None:
    none given)."""
    if not library:
        return None
    from gpsimd_emu.shapes import read_registration, shaped_plan
    registration = read_registration(library)
    ops = {op.name: op for op in plan.ops}

    def shaped(vector: VectorPlan, op_name: str) -> VectorPlan:
        one = dataclasses.replace(plan, ops=(dataclasses.replace(ops[op_name],
                                                                 vectors=(vector,)),))
        return shaped_plan(one, library, registration).ops[0].vectors[0]
    return shaped


def _inputs(args: argparse.Namespace, plan: TestPlan, zygote: str) -> Dict[str, Optional[str]]:
    """``{path relative to the --record's folder: SHA-256 hex, None when
    unreadable}`` of the files the search runs besides the plan: its core
    objects, the shape library, the emulator's program (read before the
    search: the report compares them with the build's)."""
    folder = os.path.dirname(os.path.abspath(args.record))
    paths = [os.path.join(args.root, c.object) for c in plan.cores] + \
        ([args.shapes] if args.shapes else []) + [zygote]
    out: Dict[str, Optional[str]] = {}
    for path in paths:
        out[os.path.relpath(os.path.abspath(path), folder)] = file_digest(path)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m gpsimd_explore``: the exit status (module text)."""
    args = build_parser().parse_args(argv)
    if args.examples > 0:       # (the probe alone runs without it)
        try:
            import hypothesis  # noqa: F401
        except ImportError:
            print("gpsimd_explore: needs Hypothesis: python3 -m pip install "
                  "'gpsimd-build[explore]'", file=sys.stderr)
            return 2
    from gpsimd_emu.shapes import StepError
    from gpsimd_emu.zygote_client import program_problem
    try:
        plan = TestPlan.load(args.plan)
        shaper = _shaper(plan, args.shapes)
    except (PlanError, StepError) as e:
        print(f"gpsimd_explore: {e}", file=sys.stderr)
        return 2
    zygote = args.zygote or default_path(args.plan)
    problem = program_problem(zygote)
    if problem:
        print(f"gpsimd_explore: {problem}; build it: scons {zygote}", file=sys.stderr)
        return 2
    options = run_options(args, zygote)
    inputs = _inputs(args, plan, zygote) if args.record else {}
    # (the drawn inputs' files: a folder of this run's own, so that two
    # explores of one library at once, pytest-xdist's workers or two
    # shells, never run each other's; removed when it ends)
    scratch = os.path.join(os.path.dirname(os.path.abspath(args.plan)), "explore")
    os.makedirs(scratch, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=scratch)
    try:
        return _explore_all(args, plan, shaper, options, inputs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _explore_all(args: argparse.Namespace, plan: TestPlan, shaper: Optional[Callable],
                 options, inputs: Dict[str, Optional[str]], work: str) -> int:
    """Every op of ``plan`` explored (``options``: the session's, ``inputs``:
    the record's digests), its drawn inputs' files in ``work``: the exit
    status (module text)."""
    from gpsimd_emu.session import LibrarySession
    counts = {"FALSIFIED": 0, "SKIPPED": 0, "errors": 0}
    records: Dict[str, dict] = {}
    with LibrarySession(plan, root=args.root, options=options) as session:
        for op in plan.ops:
            record = records.setdefault(op.name, {})
            shaped = (lambda v, name=op.name: shaper(v, name)) if shaper else None
            try:
                status, text = explore_op(
                    session, plan, op, examples=args.examples, seed=args.seed,
                    max_elements=args.max_elements, time_limit=args.time_limit,
                    database=args.database, work=work, root=args.root, save_dir=args.save_dir,
                    save_prefix=args.save_prefix, shaped=shaped, record=record)
            except Exception as e:      # (a model bug, or Hypothesis refusing a strategy)
                status, text = "ERROR", (f"gpsimd_explore: {plan.library}::{op.name}: "
                                         f"cannot explore: {type(e).__name__}: {e}")
                print(visible(text), file=sys.stderr, flush=True)
                counts["errors"] += 1
            else:
                print(visible(text), flush=True)    # (a fault's message may hold a kernel's text)
                counts[status] = counts.get(status, 0) + 1
            record.update(status=status, text=text)
    if args.record:
        # (in the plan's order, the report's; the plan's digest says which
        # plan it explored)
        write_atomically(args.record, json.dumps(
            {"format": 1, "library": plan.library, "plan_sha256": file_digest(args.plan), "inputs": inputs,
             "ops": records},
            indent=1) + "\n", make_folder=True)
    explored = len(plan.ops) - counts["SKIPPED"] - counts["errors"]
    verb = "probed" if args.examples <= 0 else "explored"
    print(f"{plan.library}: {explored} op{'' if explored == 1 else 's'} {verb}, "
          f"{counts['FALSIFIED']} falsified"
          + (f", {counts['SKIPPED']} skipped" if counts["SKIPPED"] else ""), flush=True)
    return 2 if counts["errors"] else 1 if counts["FALSIFIED"] else 0

