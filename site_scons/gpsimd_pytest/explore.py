"""The pytest plugin's explore items (``--gpsimd-explore``): one per op,
``lib::explore(op)``, from one run of explore per library."""

import os
from typing import Optional, Tuple

import pytest

from gpsimd_device.printable import visible

from .failure import VectorFailed, _FailLine

__all__ = ["run", "ExploredOp"]


def run(plugin, lib) -> Tuple[Optional[dict], str]:
    """``(record, "")``: ``python -m gpsimd_explore`` on ``lib``'s plan (its
    ``--record``), with the build's plan, program, shape library and limits,
    through the client (a process group of its own, bounded); or ``(None,
    why not)``."""
    import json
    import tempfile
    from gpsimd_emu.client.vectors import DEFAULT_TIMEOUT, run_explore
    plan, why = plugin._plan(lib)
    if plan is None:
        return None, why
    opt = plugin.config.getoption
    folder = os.path.join(plugin.root, plugin.build_dir, "host", lib.name)
    argv = ["--root", plugin.root, "--zygote", plugin.zygote()[0],
            "--examples", str(opt("gpsimd_explore_examples")),
            "--seed", str(opt("gpsimd_explore_seed")),
            "--database", os.path.join(folder, "explore-db"),
            "--save-dir", os.path.join(os.path.dirname(plugin.manifest), "explore"),
            "--save-prefix", "explore/", "--timeout",
            repr(float(opt("gpsimd_timeout") or DEFAULT_TIMEOUT))]
    if lib.shape_sources:
        argv += ["--shapes", os.path.join(folder, "shapes", f"{lib.name}_shapes.so")]
    if opt("gpsimd_no_checks"):
        argv.append("--no-checks")
    with tempfile.TemporaryDirectory(prefix="gpsimd-explore-") as tmp:
        record = os.path.join(tmp, "explore.json")
        # (bounded: every example is bounded by the timeout; the whole,
        # by that many of them per op, and an hour at most)
        limit = min(3600.0, 60.0 + len(lib.ops) * opt("gpsimd_explore_examples") *
                    float(opt("gpsimd_timeout") or DEFAULT_TIMEOUT))
        status, output = run_explore(plan, argv + ["--record", record], limit)
        try:
            with open(record, encoding="utf-8") as f:
                return json.load(f), ""
        except (OSError, ValueError):
            tail = "\n".join(output.strip().splitlines()[-10:])
            return None, f"explore wrote no record (exit status {status}): {tail}"


class ExploredOp(_FailLine, pytest.Item):
    """One op's search for a failing input (``scons explore``'s, through
    :meth:`_Vectors.explored`): passes when ``EXPLORED``, fails with the
    smallest failing example when ``FALSIFIED``, skips when ``SKIPPED``."""

    def __init__(self, *, op: str, **kwargs):
        super().__init__(**kwargs)
        self.op = op

    def runtest(self) -> None:
        plugin = self.config.pluginmanager.get_plugin("gpsimd-vectors")
        record, why = plugin.explored(self.parent.library)
        if record is None:
            raise VectorFailed(f"EXPLORE {self.parent.name}::{self.op}: {why}")
        rec = (record.get("ops") or {}).get(self.op) or {}
        status, text = rec.get("status"), visible(str(rec.get("text") or ""))
        if status == "SKIPPED":
            pytest.skip(text)
        if status != "EXPLORED":
            raise VectorFailed(text or f"EXPLORE {self.parent.name}::{self.op}: no result")
        print(text)


    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.name}"
