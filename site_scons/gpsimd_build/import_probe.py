"""What an imported library's kernels accept, asked of the kernels: the
importer's probe (``gpsimd-import`` without ``--no-probe``).

:func:`probe_library` writes the imported manifest without vectors to
``BUILD_DIR/import/ops.yaml``, builds the library and runs the probe phase
of explore on every op (``gpsimd-build explore-<lib> EXPLORE_EXAMPLES=0``,
in the folder the manifest is for: the project root), and reads back what
each op's kernel accepted (``BUILD_DIR/host/<lib>/explore.json``: per
tensor argument its rank and dtype, learned from the kernel's SHAPE and
DTYPE faults). :func:`vectors_text` then writes, per op, vectors of those
ranks and dtypes whose sizes expose partition bugs (:data:`SIZES`).
"""

from __future__ import annotations

import json
import os
from typing import Callable, Dict, List, Optional, Tuple

from gpsimd_device.atomic import write_atomically
from gpsimd_emu.client.process import run_group

from .command import SCONSTRUCT, scons_argv
from .report_files import EXPLORE_RECORD

__all__ = ["ProbeError", "SIZES", "probe_library", "vectors_text", "shape_of"]

#: The imported vectors: (name, element count). One element, and 999: a
#: count that no core count from 2 to 8 divides, large enough that each of
#: 8 cores gets more than a hundred (a remainder bug shows on the last).
SIZES: Tuple[Tuple[str, int], ...] = (("one", 1), ("uneven", 999))
#: 999's factors, for shapes of rank 2 to 4 (the leading dimensions of a
#: higher rank are 1).
_FACTORS = {1: (999,), 2: (27, 37), 3: (3, 9, 37), 4: (3, 3, 3, 37)}
#: Seconds the probe's build and runs may take.
TIMEOUT = 900
#: Lines of a failed build's output the error keeps.
_TAIL = 15


class ProbeError(Exception):
    """The probe could not run (message: why, with the build's last lines)."""


def shape_of(rank: int, elements: int) -> List[int]:
    """A shape of ``rank`` dimensions and ``elements`` elements (1 or 999)."""
    if elements == 1:
        return [1] * rank
    dims = _FACTORS[min(rank, 4)]
    return [1] * (rank - len(dims)) + list(dims)


def probe_library(library: str, manifest_for: Callable[[str], str], root: str,
                  build_dir: str = "build") -> Dict[str, dict]:
    """Build ``library`` and probe its ops; per op name, the explore
    record (``status``, ``text``, and after a probe ``ranks``, ``dtypes``,
    ``lessons``, ``problem``).

    Args:
        manifest_for: the manifest text (without vectors) with paths
            relative to the folder given (the probe's manifest's).
        root: the project root (the folder the build runs in).
        build_dir: ``BUILD_DIR``, relative to ``root``.

    Raises:
        ProbeError: the manifest cannot be written, the build or the probe
            failed (the message has the output's last lines), or its record
            is missing.
    """
    folder = os.path.join(root, build_dir, "import")
    manifest = os.path.join(folder, "ops.yaml")
    try:
        write_atomically(manifest, manifest_for(folder), make_folder=True)
    except OSError as e:
        raise ProbeError(str(e)) from None
    record = os.path.join(root, build_dir, "host", library, EXPLORE_RECORD)
    try:
        os.unlink(record)
    except FileNotFoundError:
        pass
    args = scons_argv(["-Q", "QUIET=1", f"MANIFEST={os.path.relpath(manifest, root)}",
                       f"BUILD_DIR={build_dir}", "TOOLCHAIN=host", "EXPLORE_EXAMPLES=0",
                       f"explore-{library}"])
    returncode, output = _run(args, root)
    if returncode != 0:
        tail = output.strip().splitlines()[-_TAIL:]
        raise ProbeError("the probe's build failed:\n" + "\n".join("  " + l for l in tail))
    try:
        with open(record, encoding="utf-8") as f:
            return json.load(f)["ops"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProbeError(f"the probe wrote no record ({record}: {e})") from None


def _run(args: List[str], root: str) -> Tuple[int, str]:
    """Run the build (SCons reading the packaged SConstruct on its standard
    input) in ``root``, in a process group of its own
    (``gpsimd_emu.client.process``: ended whole on the time limit or an
    interrupt): ``(exit status, output)``.

    Raises:
        ProbeError: it cannot start, or the time limit passed.
    """
    try:
        ended = run_group(args, TIMEOUT, cwd=root, stdin_path=SCONSTRUCT)
    except OSError as e:
        raise ProbeError(f"cannot run the build: {e}") from None
    if ended.status is None:
        raise ProbeError(f"the probe's build: {ended.err}")
    return ended.status, ended.out


def vectors_text(params: List[Tuple[str, str]], probed: Optional[dict],
                 scalar_values: Dict[str, object]) -> Tuple[List[str], Optional[str]]:
    """The YAML lines (indented for an op's ``vectors:``) of an op's
    imported vectors, and None; or ``([], why)`` when the probe learned
    nothing for it. ``params``: ``(name, schema type)`` in order."""
    if not probed or "ranks" not in probed or probed.get("problem"):
        why = (probed or {}).get("problem") or (probed or {}).get("text") or "not probed"
        return [], why.splitlines()[0]
    lines = []
    for name, elements in SIZES:
        lines += [f"          - name: {name}", "            inputs:" + ("" if params else " {}")]
        for arg, t in params:
            if t == "Tensor":
                shape = ", ".join(str(d) for d in shape_of(probed["ranks"][arg], elements))
                value = f"{{dtype: {probed['dtypes'][arg]}, shape: [{shape}], random: {{}}}}"
            else:
                value = repr(scalar_values[t])
            lines.append(f"              {arg}: {value}")
    return lines, None
