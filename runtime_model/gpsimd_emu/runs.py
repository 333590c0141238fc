"""The runs of a vector's cores (``runs_for``): with the checks on, run 0
and run 1 against private output copies (``POISON_A`` / ``POISON_B``), the
multicore fixed-order runs 2 and 3 against one shared zero-filled output,
the second call (``SECOND_CALL``), and multicore last the run of the
cores that read the output through a pointer with every other core's part
written (``ALL_WRITTEN``), as ARCHITECTURE.md "The checks" tells; without checks, one run, every core against one shared zero-filled
output, as on the device. (Stdlib only: the zygote reads the count too.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from . import abi

__all__ = ["POISON_A", "POISON_B", "TCM_POISON_A", "TCM_POISON_B", "RunSpec", "runs_for",
           "copies_for", "SECOND_CALL", "ALL_WRITTEN"]

#: Poison bytes of the output copies: pass A fills with 0xA5, pass B with
#: the complement 0x5A, so no value can equal the poison in both passes.
POISON_A = 0xA5
POISON_B = 0x5A
#: Poison bytes of the dataram/TCM window (abi.h ``tcm_poison``), run A and
#: run B: other bytes than the output's, so that a value made from
#: never-written TCM never looks like an unwritten element; as float32
#: 0.0115 and -391.5, as int8 60 and -61 (ordinary values that change
#: whatever is computed from them).
TCM_POISON_A = 0x3C
TCM_POISON_B = 0xC3


@dataclass(frozen=True)
class RunSpec:
    """One run of a vector's cores.

    Attributes:
        index: 0..3 (its slot in the control block).
        private: each core writes its own poisoned copy of the output
            (``out_poison``); else all write one shared zero-filled output.
        poison: the binding's ``poison`` byte (``empty()`` storage, the
            private copies).
        tcm_poison: the binding's ``tcm_poison`` (the dataram window).
        order: the cores (indices into the plan's core list) in the order
            they are claimed; one process at a time runs an ordered run
            (``ordered``), others may be shared by several processes.
        ordered: the order matters (the fixed-order runs).
        checks: the binding's ``GPSIMD_CHECK_*`` bits.
        label: how messages name the run (``" (second run)"``, ...).
        copy: the copy of the core objects it launches (its own index when
            -1: globals no launch touched).
        after: -1, or the run whose launch of each core this run's launch
            of it follows at once, in the same process (a second call).
        base: -1, or the run whose final shared output this shared run's
            starts from, made after every run before it, launching only
            the cores a run before it found reading the output through a
            pointer (``REPORT_OUTPUT_UNTRACKED``): each with every other
            core's part written (gpsimd_host/zygote.h ``gz_run``).
    """

    index: int
    private: bool
    poison: int
    tcm_poison: int
    order: Tuple[int, ...]
    ordered: bool = False
    checks: int = 0
    label: str = ""
    copy: int = -1
    after: int = -1
    base: int = -1

    @property
    def objects(self) -> int:
        """The copy of the core objects the run launches."""
        return self.index if self.copy < 0 else self.copy

    def to_json(self) -> dict:
        return {"index": self.index, "private": self.private, "poison": self.poison,
                "order": list(self.order), "ordered": self.ordered, "copy": self.objects,
                "after": self.after, "base": self.base}


#: The label of the second call (``runs_for``'s run after run 0).
SECOND_CALL = " (a second call of the op, from the state the first call left)"
#: The label of the run with every other core's part written (multicore, last).
ALL_WRITTEN = " (each core with every other core's part of one shared output written)"


def runs_for(num_cores: int, checks: bool) -> List[RunSpec]:
    """The runs of a vector (module text)."""
    cores = tuple(range(num_cores))
    if not checks:
        return [RunSpec(0, False, 0, 0, cores)]
    runs = [RunSpec(0, True, POISON_A, TCM_POISON_A, cores, checks=abi.CHECK_ALL),
            RunSpec(1, True, POISON_B, TCM_POISON_B, cores, checks=abi.CHECK_ALL,
                    label=" (second run)")]
    if num_cores > 1:
        # memory poisoned as in run 1: an element that matches run 1 in
        # both orders depends on never-written memory, not on the output
        shared = abi.CHECK_ALL & ~abi.CHECK_READS
        runs += [RunSpec(2, False, POISON_B, TCM_POISON_B, cores, ordered=True, checks=shared,
                         label=" (cores in the order 0..7, one shared output)"),
                 RunSpec(3, False, POISON_B, TCM_POISON_B, cores[::-1], ordered=True,
                         checks=shared, label=" (cores in the order 7..0, one shared output)")]
    runs.append(RunSpec(len(runs), True, POISON_A, TCM_POISON_A, cores, checks=abi.CHECK_ALL,
                        label=SECOND_CALL, copy=0, after=0))
    if num_cores > 1:
        # (a core whose result hangs on a combination of other cores being
        # done that neither order shows: both of its neighbours, say; its
        # own copy of the objects, the next one: the second call has none)
        runs.append(RunSpec(len(runs), False, POISON_B, TCM_POISON_B, cores, ordered=True,
                            checks=shared, label=ALL_WRITTEN,
                            copy=1 + max(r.objects for r in runs), base=2))
    return runs


def copies_for(num_cores: int, checks: bool) -> int:
    """Copies of the core objects the runs of ``runs_for`` launch."""
    return 1 + max(r.objects for r in runs_for(num_cores, checks))
