"""A library's vectors, run one at a time on request: the process of
:class:`gpsimd_emu.client.vectors.VectorClient` (the pytest plugin), which
bounds each request's time and kills this process's group when it is over.

``python -m gpsimd_emu.vector_service PLAN [--root DIR] [--timeout S]
[--no-checks] [--zygote PROGRAM]``: opens the plan's library session
(``gpsimd_emu.session.LibrarySession``), writes ``{"ready": true}`` on
stdout, then reads one request per line on stdin, ``{"op": NAME,
"vector": NAME, "verdicts": {NAME: FIRST_CALL_RIGHT}}`` (``verdicts``: those the
client had of the op's vectors, from this process or one before it,
``LibrarySession.record_verdicts``), and answers each with one line, the vector's result
(``VectorResult.to_json`` with its ``elements`` and ``printf``), or
``{"error": TEXT}`` for an op or vector the plan does not have. It ends
at end of input. A plan that cannot be read is one line ``{"error":
TEXT}`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from gpsimd_device.plan import PlanError, TestPlan

from .settings import add_run_options, one_blas_thread, run_options

__all__ = ["main"]


def main(argv: Optional[List[str]] = None) -> int:
    """Serve the plan's vectors (module text); returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_emu.vector_service")
    p.add_argument("plan")
    add_run_options(p)
    args = p.parse_args(argv)
    # The answers go to the stdout this process was given; fd 1 itself
    # becomes stderr, so that nothing a kernel or a reference writes to its
    # stdout can reach them.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)

    def answer(doc: dict) -> None:
        answers.write(json.dumps(doc, sort_keys=True) + "\n")
        answers.flush()
    one_blas_thread()
    try:
        plan = TestPlan.load(args.plan)
    except PlanError as e:
        answer({"error": str(e)})
        return 2
    from .session import LibrarySession
    options = run_options(args, args.zygote)
    with LibrarySession(plan, root=args.root, options=options) as session:
        answer({"ready": True})
        for line in sys.stdin:
            try:
                req = json.loads(line)
                session.record_verdicts(str(req["op"]), req.get("verdicts") or {})
                result = session.run_vector(str(req["op"]), str(req["vector"]))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                answer({"error": f"bad request {line.strip()[:200]!r}: {e}"})
                continue
            # (with what the JSON of a result leaves out: the PASS line's
            # element count and what core 0 printed)
            answer(dict(result.to_json(), elements=result.elements, printf=result.printf))
    return 0


if __name__ == "__main__":
    sys.exit(main())
