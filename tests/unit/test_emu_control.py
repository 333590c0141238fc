"""The control block (gpsimd_emu.control): what a vector's processes write
and what the worker accepts; anything else is a corrupt record naming the
field, never a crash of the model."""
import mmap
import os
import struct

import pytest

from gpsimd_emu import control
from gpsimd_emu.control import ControlBlock, RecordError


def _block(npasses=2, ncores=8, nonce=42):
    mm = mmap.mmap(-1, control.SIZE)
    import ctypes
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    ctl = ControlBlock(mm, 0, base)
    ctl.init(nonce, npasses, ncores, [list(range(ncores)), list(range(ncores))[::-1]][:npasses])
    ctl.init_semaphores()
    return mm, ctl


def test_a_fresh_record_validates_and_claims_follow_the_order():
    mm, ctl = _block()
    rec = ctl.validate(42, 2, 8)
    assert rec["error"] is None and not rec["leader_done"] and rec["jobs"] == []
    assert [ctl.claim(1) for _ in range(9)] == [7, 6, 5, 4, 3, 2, 1, 0, None]
    assert [ctl.claim(0, shared=False) for _ in range(3)] == [0, 1, 2]
    assert ctl.unclaimed(0) == 5


def test_what_a_run_writes_reads_back():
    mm, ctl = _block()
    ctl.set_pass(0, control.PASS_RUNNING, 100)
    ctl.set_slot(0, 3, control.SLOT_DONE, status=1, job=2, t_start=10, t_end=30)
    ctl.set_job(2, 1234, 0, 0, control.JOB_EXITED)
    ctl.set_pass(0, control.PASS_DONE, 200)
    ctl.mark_faulted(0)
    ctl.set_error(0, 3, "device model error: boom")
    ctl.set_error(1, 1, "a second error is not kept")
    ctl.set_leader_done()
    rec = ctl.validate(42, 2, 8)
    assert rec["passes"][0]["state"] == control.PASS_DONE and rec["passes"][0]["faulted"] == 1
    assert (rec["passes"][0]["t_start"], rec["passes"][0]["t_end"]) == (100, 200)
    assert rec["slots"][0][3] == {"state": 2, "status": 1, "bind_rc": 0, "job": 2,
                                  "t_start": 10, "t_end": 30}
    assert rec["jobs"] == [{"pid": 1234, "pass": 0, "wait_status": 0, "state": 2, "index": 2}]
    assert rec["error"] == (0, 3, "device model error: boom") and rec["leader_done"]


@pytest.mark.parametrize("offset,data,field", [
    (0, b"XXXXXXXX", "magic"),
    (8, struct.pack("<Q", 7), "another run"),
    (40, struct.pack("<I", 9), "leader state"),
    (1408, struct.pack("<I", 77), "run 0, core 0"),
    (1408 + 32 * 9 + 8, struct.pack("<i", 0) + struct.pack("<I", 999), "run 1, core 1"),
    (1088, struct.pack("<I", 42), "run 0: its pass record"),
    (2432, struct.pack("<iIiI", 5, 3, 0, 2), "process record 0"),
])
def test_garbage_is_a_named_record_error(offset, data, field):
    mm, ctl = _block()
    mm[offset:offset + len(data)] = data
    with pytest.raises(RecordError, match=field):
        ctl.validate(42, 2, 8)


def test_protect_makes_the_page_read_only_in_this_process():
    mm, ctl = _block()
    pid = os.fork()
    if pid == 0:
        import faulthandler
        faulthandler.disable()          # (the crash is the test's: no traceback printed)
        ctl.protect(False)
        try:
            ctl.set_leader_done()       # SIGSEGV: the page is read-only
        finally:
            os._exit(0)
    _, st = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(st) and os.WTERMSIG(st) == 11
