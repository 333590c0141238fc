"""The control block (gpsimd_emu.control): what a vector's processes write
and what the worker accepts; anything else is a corrupt record naming the
field, never a crash of the model."""
import ctypes
import mmap
import struct

import pytest

from gpsimd_emu import control
from gpsimd_emu.binding import header_struct
from gpsimd_emu.control import Block, ControlBlock, RecordError

# (the offsets of gpsimd_host/zygote.h's gz_control, as leader.c writes it)
_PASSES, _SLOTS, _JOBS = Block.passes.offset, Block.slots.offset, Block.jobs.offset
_SLOT = header_struct("zygote.h", "gz_slot")


def _block(npasses=2, ncores=8, nonce=42):
    mm = mmap.mmap(-1, control.SIZE)
    ctl = ControlBlock(mm)
    ctl.init(nonce, npasses, ncores, [list(range(ncores)), list(range(ncores))[::-1]][:npasses])
    return mm, ctl


def test_a_fresh_record_validates():
    mm, ctl = _block()
    rec = ctl.validate(42, 2, 8)
    assert rec["error"] is None and not rec["leader_done"] and rec["jobs"] == []
    assert [p["order"] for p in rec["passes"]] == [list(range(8)), list(range(8))[::-1]]
    assert [p["state"] for p in rec["passes"]] == [control.PASS_PENDING] * 2


def test_what_a_run_writes_reads_back():
    # (as leader.c writes it: gz_control's fields by name)
    mm, ctl = _block()
    blk = Block.from_buffer(mm)
    run0, slot, job = blk.passes[0], blk.slots[3], blk.jobs[2]
    run0.state, run0.faulted, run0.claimed, run0.ncores = control.PASS_DONE, 1, 8, 8
    run0.t_start, run0.t_end = 100, 200
    slot.state, slot.status, slot.bind_rc, slot.job = control.SLOT_DONE, 1, 0, 2
    slot.t_start, slot.t_end = 10, 30
    job.pid, job.state = 1234, control.JOB_EXITED
    text = b"device model error: boom"
    blk.error = text
    blk.error_pass, blk.error_core, blk.error_len = 0, 3, len(text)
    blk.leader_done = 1
    del blk, run0, slot, job            # (the mmap may close with no view left)
    rec = ctl.validate(42, 2, 8)
    assert rec["passes"][0]["state"] == control.PASS_DONE and rec["passes"][0]["faulted"] == 1
    assert (rec["passes"][0]["t_start"], rec["passes"][0]["t_end"]) == (100, 200)
    assert rec["slots"][0][3] == {"state": 2, "status": 1, "bind_rc": 0, "job": 2,
                                  "t_start": 10, "t_end": 30}
    assert rec["jobs"] == [{"pid": 1234, "pass": 0, "wait_status": 0, "state": 2, "index": 2}]
    assert rec["error"] == (0, 3, "device model error: boom") and rec["leader_done"]


@pytest.mark.parametrize("offset,data,field", [
    (0, b"XXXXXXXX", "magic"),
    (Block.nonce.offset, struct.pack("<Q", 7), "another run"),
    (Block.leader_done.offset, struct.pack("<I", 9), "leader state"),
    (_SLOTS, struct.pack("<I", 77), "run 0, core 0"),
    (_SLOTS + ctypes.sizeof(_SLOT) * (control.MAX_CORES + 1) + _SLOT.bind_rc.offset,
     struct.pack("<i", 0) + struct.pack("<I", 999), "run 1, core 1"),
    (_PASSES, struct.pack("<I", 42), "run 0: its pass record"),
    (_JOBS, struct.pack("<iIiI", 5, 3, 0, 2), "process record 0"),
])
def test_garbage_is_a_named_record_error(offset, data, field):
    mm, ctl = _block()
    mm[offset:offset + len(data)] = data
    with pytest.raises(RecordError, match=field):
        ctl.validate(42, 2, 8)


def _finished(slot_states):
    """A record whose leader finished run 0 (done, no fault) and run 1
    (done, no fault), with run 0's slots in ``slot_states`` and run 1's
    all done."""
    from gpsimd_emu.judge import check_runs     # (the worker's check of a finished record)
    mm, ctl = _block()
    blk = Block.from_buffer(mm)
    for p in range(2):
        run = blk.passes[p]
        run.state, run.claimed, run.ncores = control.PASS_DONE, 8, 8
        for k in range(8):
            blk.slots[p * control.MAX_CORES + k].state = \
                slot_states[k] if p == 0 else control.SLOT_DONE
    blk.leader_done = 1
    del blk, run
    return check_runs, ctl.validate(42, 2, 8)


def test_a_finished_run_whose_core_was_never_launched_is_a_corrupt_record():
    """A run marked done without a fault whose core was never launched
    (slot never started: a helper ended, exit 0, between its claim or its
    launches and the next, by a kernel's thread): the vector must fail,
    not be judged on the cores that ran."""
    check_runs, rec = _finished([control.SLOT_DONE] * 8)
    check_runs(rec)                             # (every core launched: nothing to say)
    check_runs, rec = _finished([control.SLOT_DONE] * 3 + [0] + [control.SLOT_DONE] * 4)
    with pytest.raises(RecordError, match=r"^run 0 is done, but core 3 was never launched in it"):
        check_runs(rec)
    check_runs, rec = _finished([control.SLOT_DONE] * 7 + [control.SLOT_STARTED])
    with pytest.raises(RecordError, match=r"^run 0 is done, but core 7 was never launched in it"):
        check_runs(rec)
