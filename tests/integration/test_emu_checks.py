"""The emulator's checks (docs/checks.md), each shown by a deliberately
broken kernel of kernels/broken/ (built once per session with
``scons -k MANIFEST=kernels/broken/ops.yaml EMU_TIMEOUT=2 EMU_MEMORY=256M test``) and asserted
exactly: which library, op and vector, which core, which offsets, which
elements; plus the switch that turns the checks off (``--no-checks``,
``EMU_CHECKS=0``) and the shipped collection passing every check.

Check (issue "The emulator finds the bugs the device hides") -> vectors:
1 SPMD write sets: remainder_bug, overlap, idle_core
2 out-of-range accesses: accessor_oob, read_stream_oob, write_stream_oob,
  stream_after_close, tcm_oob (and remainder_bug's core 7); writes before
  the output through a raw pointer: write_before, write_before_mc; a read
  before the first input through a raw pointer: read_before, read_before_mc
3 uninitialised output: empty_uninit
4 capacity: tcm_null_deref, tcm_double_free, tcm_too_small, dataram_exhausted, hbm_window,
  stack_overflow, printf_flood (warning)
5 multicore rules: std_accessor_multicore, stream_multicore, no_dst_tensor,
  coherence_error, coherence_verbose (warning)
6 argument dtypes: next_int_on_float, writeback_dtype
7 containment: segfault, abort_kernel, cxx_exception, infinite_loop,
  spin_on_second (its second call's time limit is the second call's),
  core3_abort, fork_sleeper, fd_forger (passes: its writes reach nothing),
  memory_hog; every library's test node fails in SCons; the model's records
  out of reach: readmap_eraser (a stray write before the output, which
  erased the first run's read map, faults in a gap), report_forger (a
  report written over is refused)
8 cross-core races (issue "Eight cores as the device runs them"):
  reduce_partials (a read of other cores' output, and order dependence),
  last_writer and neighbour_carry (order dependence), block_writeback (a
  lost update: another core's element read through a raw pointer and stored
  back unwritten through the TCM accessor), own_readback (the control:
  reading back what a core wrote itself is no race), second_race (a read
  of another core's output made from the second call on), input_scratch
  (its own slice of the input as scratch, restored), and its single-core
  control broken_args's input_restore; both_done (a result on two other
  cores being done, which neither fixed order shows); second_overlap (an
  element another core writes, written from the second call on)
9 uninitialised TCM: tcm_uninit; HBM scratch, heap (malloc, new[]) and
  stack: scratch_uninit, malloc_uninit, new_uninit, stack_uninit, and the
  control that zeroes each first, zeroed_partials
10 state kept between calls (the second call of the same loaded objects):
  call_counter, first_call_only, kept_scratch, cached_scale (its second vector's second
  call has the first vector's arguments), stale_or_fault (a second call
  that faults is the second call's failure: the vector's first call is
  right, and the next vector's second call takes its arguments), and the
  control that fills a
  table on its first call only, lazy_table
11 where the device is stricter than a host build: make_uint16 (a dtype
  a kernel cannot create), stale_accessor, stale_quiet, stale_verbose,
  stale_tcm (a write stream's unflushed writes; control flushed_when_full),
  memcpy_static, tcm_static, tcm_moved_stack (a dataram buffer that is not
  dataram: a static array, a local array on a stack_size above the default;
  control tcm_stack, a local array on the default stack)
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, copy_built, run_scons
from render import render, rgb
from gpsimd_emu.merge import written_mask
from emu_run import load_plan, prepare_cores, run_vector

LIBS = ("broken_spmd", "broken_access", "broken_memory", "broken_args", "broken_crash",
        "broken_race", "broken_race2", "broken_hostile", "broken_uninit", "broken_model",
        "broken_memory2", "broken_shared")
#: What the broken kernels are built and run with (the manifest's header).
BROKEN_OPTIONS = ("MANIFEST=kernels/broken/ops.yaml", "EMU_TIMEOUT=2", "EMU_MEMORY=256M")
RACE = "a cross-core race on the device: cores do not wait for each other"
STATE = ("state the kernel keeps between calls in static or global variables: on the device "
         "the library stays loaded, and each call starts from what the calls before it left")
SECOND_CALL = f"differ on a second call of the op ({STATE})"
ORDER = ("the result depends on the order the cores run in: output elements {ranges} differ "
         "between running them in the orders 0..7 and 7..0 against one shared output ({who} "
         "involved; on the device they run at the same time)")
NEVER = "; elements never written: [0, 10)"
INPUT_RACE = ("in a multicore op every core reads the inputs while the others run, so a core "
              "that writes one, even to restore it, races with their reads (docs/kernel-api.md "
              "\"Multicore (SPMD) libraries\")")
MC_NEVER = "; elements never written by any core: [0, 64); cores 0-7 wrote nothing"
MC_ACCESSOR = ("used in multicore mode: only the TCM accessor is allowed there, the standard and "
               "stream accessors race between cores (docs/kernel-api.md \"Accessors and memory\")")

COHERENT_RULE = (" (coherence policy COHERENT: many read streams or one write stream per tensor at a time, "
                 "and no other access while a write stream is open)")
UNFLUSHED = ("on a tensor with 1 write_stream_accessor open (its unflushed writes are not in memory yet: "
             "close() the stream first)")
STALE = ("10 of 10 elements differ (rtol=1.3e-06, atol=1e-05): [0] actual -1 expected 3.0818381, [1] actual -1 "
         "expected -6.11133, [2] actual -1 expected -0.16380233, [3] actual -1 expected -2.1355391, [4] actual -1 "
         "expected -1.9052986, ... (5 more); max_abs_err 6.646")
NOT_DATARAM = ("of 40 bytes: the pointer is a static or global variable (the kernel's loaded object), not dataram: "
               "it must lie in the dataram window [0x80000, 0x90000) (tcm_malloc, neuron_dataram_allocate) or on "
               "the default stack")

STACK_OR_HEAP = ("cores 0-7: output elements [0, 32) depend on never-written stack or heap (their values "
                 "change with the poison of local variables and malloc / new blocks: read before the kernel "
                 "wrote it)")

PAST_BLOCK = ("core 0: output elements [15, 16) depend on never-written memory (their values change with the "
              "poison of tcm_malloc memory, local variables, malloc / new blocks and output elements the kernel "
              "read before writing them through a standard or stream accessor or a raw pointer)")


def _hbm_window():
    parts = []
    for i in range(8):
        lo = 0x84000000 + i * 0x200000
        parts.append(f"core {i}: fault SCRATCH_FULL in op hbm_window: scratch window full: cannot "
                     f"allocate 1048576 bytes in lsp_fll_load_cpu{i} [{lo:#x}, {lo + 0x200000:#x}) "
                     "(2097152 bytes, 2097152 in use, largest free block 0)")
    return "; ".join(parts) + MC_NEVER


#: (library, op) -> (status, message, warnings) of its one vector.
EXPECTED = {
    # 1. SPMD write sets; the classic remainder bug: partition 125, the last
    # core's 126 start at 126 * 7 = 882 instead of 875; its 64-element TCM
    # chunks run [882, 946) then [946, 1008), past the 1001 elements.
    ("broken_spmd", "remainder_bug"): (
        "fail", "core 7: fault OUT_OF_RANGE in op remainder_bug: tensor_to_tcm<float> out of range: "
        "offset 946, count 62, numel 1001; elements never written by any core: [875, 882), [946, 1001)", []),
    ("broken_spmd", "overlap"): (
        "fail", "elements written by more than one core: [125, 126) by cores 0-1, [250, 251) by cores 1-2, "
        "[375, 376) by cores 2-3, [500, 501) by cores 3-4, [625, 626) by cores 4-5, [750, 751) by cores 5-6, "
        "[875, 876) by cores 6-7", []),
    # (the other cores wrote every element: not a wrong result, a warning)
    ("broken_spmd", "idle_core"): ("pass", "", ["core 7 wrote nothing (the other cores wrote "
                                                "every element)"]),
    # 5. multicore rules; 4. the per-core 2 MiB HBM window; 7. one core crashing
    ("broken_spmd", "std_accessor_multicore"): (
        "fail", f"cores 0-7: fault MULTICORE in op std_accessor_multicore: accessor<float,1> {MC_ACCESSOR}"
        + MC_NEVER, []),
    ("broken_spmd", "stream_multicore"): (
        "fail", f"cores 0-7: fault MULTICORE in op stream_multicore: read_stream_accessor<float> {MC_ACCESSOR}"
        + MC_NEVER, []),
    ("broken_spmd", "no_dst_tensor"): (
        "fail", "cores 0-7: fault MULTICORE in op no_dst_tensor: multicore op returned a result without calling "
        "get_dst_tensor(): in multicore mode each core must write its own part of the output it claims with "
        "get_dst_tensor(), or every core copies a whole result over the same output (docs/kernel-api.md "
        "\"Multicore (SPMD) libraries\")" + MC_NEVER, []),
    ("broken_spmd", "hbm_window"): ("fail", _hbm_window(), []),
    ("broken_spmd", "core3_abort"): ("fail", "core 3 crashed with SIGABRT", []),
    # writes before the output through a raw pointer: the guard before each
    # copy (core 3's were taken for core 2's past the end, single-core passed)
    ("broken_spmd", "write_before_mc"): (
        "fail", "core 3 wrote before the start of the output: elements [-1024, 0)", []),
    ("broken_access", "write_before"): (
        "fail", "core 0 wrote before the start of the output: elements [-50, -49), [-1, 0)", []),
    # a read before the first input through a raw pointer: the bytes before
    # it hold the run's poison, as those after it (both passed, reading 0)
    ("broken_spmd", "read_before_mc"): (
        "fail", "core 0: output elements [0, 1) depend on never-written memory around an input, TCM, stack "
        "or heap (their values change with the poison of the bytes around each input that a raw pointer "
        "reads outside it, tcm_malloc memory, local variables and malloc / new blocks: read before the "
        "kernel wrote it)", []),
    ("broken_access", "read_before"): (
        "fail", "core 0: output elements [0, 1) depend on never-written memory (their values change with the "
        "poison of the bytes around each input that a raw pointer reads outside it, local variables, malloc "
        "/ new blocks and output elements the kernel read before writing them through a standard or stream "
        "accessor or a raw pointer)", []),
    # 2. out-of-range through every accessor kind, a stream after close()
    ("broken_access", "accessor_oob"): (
        "fail", "core 0: fault OUT_OF_RANGE in op accessor_oob: accessor<float,1> out of range: offset 10, "
        "count 1, numel 10" + NEVER, []),
    ("broken_access", "read_stream_oob"): (
        "fail", "core 0: fault OUT_OF_RANGE in op read_stream_oob: read_stream_accessor<float> out of range: "
        "offset 10, count 1, numel 10" + NEVER, []),
    ("broken_access", "write_stream_oob"): (
        "fail", "core 0: fault OUT_OF_RANGE in op write_stream_oob: write_stream_accessor<float> out of range: "
        "offset 10, count 1, numel 10" + NEVER, []),
    ("broken_access", "stream_after_close"): (
        "fail", "core 0: fault BAD_ARGUMENT in op stream_after_close: write_stream_accessor<float> used after "
        "close()" + NEVER, []),
    ("broken_access", "tcm_oob"): (
        "fail", "core 0: fault OUT_OF_RANGE in op tcm_oob: tensor_to_tcm<float> out of range: offset 4, count 8, "
        "numel 10" + NEVER, []),
    # 3. uninitialised output through the copy path
    ("broken_access", "empty_uninit"): (
        "fail", "uninitialised elements reached the output through the copy path (the returned tensor, copied "
        "by customop_return_tensor, was never written there; e.g. torch::empty() storage): [7, 10)", []),
    # 5. coherence: an error under COHERENT, a warning under INCOHERENT_VERBOSE
    ("broken_access", "coherence_error"): (
        "fail", "core 0: fault COHERENCE in op coherence_error: read_stream_accessor<float> opened on a tensor "
        "with 1 write_stream_accessor already open" + COHERENT_RULE + NEVER, []),
    ("broken_access", "coherence_verbose"): (
        "pass", "", ["core 0: read_stream_accessor<float> opened on a tensor with 1 write_stream_accessor already "
                     "open (coherence policy INCOHERENT_VERBOSE)"]),
    # the input as scratch, restored, single-core: nothing else reads it meanwhile
    ("broken_args", "input_restore"): ("pass", "", []),
    # 4. capacity
    ("broken_memory", "tcm_null_deref"): (
        "fail", "core 0: fault TCM_NULL in op tcm_null_deref: null TCM pointer dereferenced: SIGSEGV at address "
        "0x0, within the 4096 bytes of a tcm_malloc that returned null (the 16384-byte TCM pool had 16384 bytes "
        "in use); check tcm_malloc's result" + NEVER, []),
    ("broken_memory", "tcm_double_free"): (
        "fail", "core 0: fault TCM in op tcm_double_free: tcm_free(0x80000): double free (TCM pool offset 0)"
        + NEVER, []),
    ("broken_memory", "tcm_too_small"): (
        "fail", "core 0: fault TCM in op tcm_too_small: tensor_to_tcm<float> of 32 bytes at 0x80000 runs 24 bytes "
        "past the end of its 8-byte tcm_malloc block at 0x80000; elements never written: [0, 16)", []),
    ("broken_memory", "dataram_exhausted"): (
        "fail", "core 0: fault DATARAM in op dataram_exhausted: UTensor::copy: no dataram for the staging "
        "buffer: the kernel holds 49152 of the 49152 bytes of dataram staging in 1 block(s) (largest free "
        "block 0 bytes, an element is 4; docs/checks.md)" + NEVER, []),
    ("broken_memory", "stack_overflow"): (
        "fail", "core 0: fault STACK_OVERFLOW in op stack_overflow: stack overflow: the wrapper's stack of 4196 "
        "bytes (host: 69632 bytes = 4196 x stack_scale 16, page-rounded) is exhausted; raise STACK_SIZE "
        "(-DSTACK_SIZE=N)" + NEVER, []),
    ("broken_memory", "printf_flood"): (
        "pass", "", ["core 0: printf output wrapped: 186000 bytes printed, the 131072-byte buffer kept the last "
                     "131072 (the oldest 54928 dropped; docs/kernel-api.md \"Limits\")"]),
    # 6. argument dtypes: the pull side and the writeback gate
    ("broken_args", "next_int_on_float"): (
        "fail", "core 0: fault DTYPE in op next_int_on_float: customop_next_int reads argument index 1 "
        "(s: float) of 2 as int (INT32), but its descriptor dtype is FP32 (float32): the device would "
        "reinterpret the bytes silently (docs/checks.md)" + NEVER, []),
    ("broken_args", "writeback_dtype"): (
        "fail", "core 0: fault DTYPE in op writeback_dtype: utypes.hpp:65: assertion "
        "'aten_t.dtype().toScalarType() == isa_to_torch_dtype(t_.dtype)' failed (result tensor is int32, the "
        "output descriptor is float32)" + NEVER, []),
    # 7. containment
    ("broken_crash", "segfault"): (
        "fail", "core 0: fault SEGV in op segfault: SIGSEGV: invalid memory access at address 0x10" + NEVER, []),
    ("broken_crash", "abort_kernel"): ("fail", "core 0 crashed with SIGABRT", []),
    ("broken_crash", "cxx_exception"): (
        "fail", "core 0: fault CXX_EXCEPTION in op cxx_exception: C++ exception: broken kernel: boom" + NEVER, []),
    ("broken_crash", "infinite_loop"): ("fail", "timed out after 2 s (core 0 was running)", []),
    # 8. cross-core races: the exact message of the issue, then the runs in
    # two core orders; a race through a raw pointer shows in the orders only
    ("broken_race", "reduce_partials"): (
        "fail", f"core 0 read output elements [8, 64) before writing them; cores 1-7 write them ({RACE}); "
        + ORDER.format(ranges="[0, 8)", who="cores 0-7"), []),
    ("broken_race", "last_writer"): (
        "fail", "elements written by more than one core: [0, 1) by cores 0-7; "
        + ORDER.format(ranges="[0, 1)", who="cores 0-7"), []),
    ("broken_race", "neighbour_carry"): (
        "fail", ORDER.format(ranges="[125, 126), [250, 251), [375, 376), [500, 501), [625, 626), "
                                    "[750, 751), [875, 876)", who="cores 1-7"), []),
    # a block read through a raw pointer and stored back whole: each core
    # stores back the next core's first element as it read it, unwritten
    ("broken_race", "block_writeback"): (
        "fail", "; ".join(f"core {k} read output elements [{125 * (k + 1)}, {125 * (k + 1) + 1}) "
                          f"before writing them; core {k + 1} writes them ({RACE})"
                          for k in range(7)), []),
    ("broken_race", "own_readback"): ("pass", "", []),
    # a read of the next core's element made on the second call only
    ("broken_race", "second_race"): (
        "fail", "; ".join(f"core {k} read output elements [{125 * (k + 1)}, {125 * (k + 1) + 1}) "
                          f"before writing them on a second call of the op; core {k + 1} writes "
                          f"them ({RACE})" for k in range(7)), []),
    # core 3 writes core 0's element 0 too, from its second call on (b's second
    # call, with a's arguments, is judged by the merged output: it was right)
    ("broken_race", "second_overlap"): (
        "fail", "elements written by more than one core on a second call of the op: [0, 1) by "
                "cores 0, 3", []),
    # core 4 on cores 2 and 6 both done: neither order shows it, every other
    # core done does
    ("broken_race", "both_done"): (
        "fail", "the result depends on which other cores are done when a core runs: output elements "
                "[500, 501) differ between running core 4 with every other core's part of one shared "
                "output written and in the order 0..7 (on the device the cores run at the same time: "
                "any of them may be done first)", []),
    # the same through a pointer stepped back from the output's end, made
    # from the input's address, taken only in the runs without the read
    # check (the shared ones)
    ("broken_race", "both_done_hidden"): (
        "fail", "the result depends on which other cores are done when a core runs: output elements "
                "[500, 501) differ between running core 4 with every other core's part of one shared "
                "output written and in the order 0..7 (on the device the cores run at the same time: "
                "any of them may be done first)", []),
    # the same through reads the runtime follows, made only in the runs
    # without the read check; and a core that skips its shortcut where its
    # own part is already written
    **{("broken_race2", f"both_done_{how}"): (
        "fail", "the result depends on which other cores are done when a core runs: output elements "
                "[500, 501) differ between running core 4 with every other core's part of one shared "
                "output written and in the order 0..7 (on the device the cores run at the same time: "
                "any of them may be done first)", []) for how in ("tcm", "memcpy", "spot", "distance")},
    ("broken_race2", "both_done_poison_valued"): (
        "fail", "the result depends on which other cores are done when a core runs: output elements "
                "[501, 502) differ between running core 4 with every other core's part of one shared "
                "output written and in the order 0..7 (on the device the cores run at the same time: "
                "any of them may be done first)", []),
    # its own slice of the input as scratch, restored: a fault at the write
    ("broken_race", "input_scratch"): (
        "fail", "; ".join(f"core {k}: fault MULTICORE in op input_scratch: a write to input 'x' at "
                          f"byte offset {500 * k}: {INPUT_RACE}" for k in range(8))
        + "; elements never written by any core: [0, 1000); cores 0-7 wrote nothing", []),
    # 7. containment of a hostile kernel; 9. uninitialised TCM
    ("broken_hostile", "fork_sleeper"): ("fail", "timed out after 2 s (core 0 was running)", []),
    ("broken_hostile", "fd_forger"): ("pass", "", []),
    ("broken_hostile", "tcm_uninit"): (
        "fail", "core 0: output elements [0, 10) depend on never-written TCM, stack or heap (their values "
        "change with the poison of tcm_malloc memory, local variables and malloc / new blocks: read before "
        "the kernel wrote it)", []),
    ("broken_hostile", "memory_hog"): ("fail", "core 0 exceeded the 256 MiB memory limit", []),
    # the model's records out of a kernel's reach: a stray write that would
    # erase the first run's read map (a PASS before the gaps) faults in a gap
    # and names the output; a report written over far away is refused
    ("broken_hostile", "readmap_eraser"): (
        "fail", "core 0: fault SEGV in op readmap_eraser: SIGSEGV: invalid memory access at address ADDR "
        "(12288 bytes before the output); core 0 read output elements [0, 10) before writing them (an "
        "output element holds no defined value until it is written)", []),
    ("broken_hostile", "report_forger"): (
        "fail", "core 0: its report was overwritten (status 1109917696: no runtime writes that): a stray "
        "write of op report_forger reached the model's records", []),
    # 9. never-written HBM scratch, heap and stack: every core's 4 partial sums
    # (the stack and the heap are poisoned in every launch: both are named)
    ("broken_uninit", "scratch_uninit"): (
        "fail", "cores 0-7: output elements [0, 32) depend on never-written HBM scratch, stack or heap (their "
        "values change with the poison of neuron_hbm_allocate blocks, local variables and malloc / new "
        "blocks: read before the kernel wrote it)", []),
    ("broken_uninit", "malloc_uninit"): ("fail", STACK_OR_HEAP, []),
    ("broken_uninit", "new_uninit"): ("fail", STACK_OR_HEAP, []),
    ("broken_uninit", "stack_uninit"): ("fail", STACK_OR_HEAP, []),
    ("broken_uninit", "zeroed_partials"): ("pass", "", []),
    # 10. state kept between calls: a counter, a flag that skips every call
    # but the first; a table filled once is right on every call
    ("broken_memory", "call_counter"): ("fail", f"core 0: output elements [0, 10) {SECOND_CALL}", []),
    ("broken_memory", "lazy_table"): ("pass", "", []),
    # (s3's second call is made with s1's arguments, after s3's call: the
    # scale kept from s1's call was right for s1, s3's is not)
    ("broken_memory", "cached_scale"): (
        "fail", "a second call of the op, with the arguments of vector 's1' after a call with this "
                f"vector's, is wrong ({STATE}): 2 of 2 elements differ (rtol=1.3e-06, atol=1e-05): "
                "[0] actual 5 expected 3, [1] actual 10 expected 6; max_abs_err 4", []),
    # (b's second call is made with a's arguments: a failed on its second call
    # alone, a fault, so its first call is right; b returns its own first result)
    ("broken_memory", "stale_or_fault"): (
        "fail", "a second call of the op, with the arguments of vector 'a' after a call with this "
                f"vector's, is wrong ({STATE}): 2 of 2 elements differ (rtol=1.3e-06, atol=1e-05): "
                "[0] actual 4 expected 2, [1] actual 14 expected 10; max_abs_err 4", []),
    ("broken_crash", "spin_on_second"): (
        "fail", "timed out after 2 s (core 0 was running (a second call of the op, from the "
                "state the first call left))", []),
    ("broken_uninit", "first_call_only"): (
        "fail", f"cores 0-7: output elements [0, 32) {SECOND_CALL}", []),
    # (a scratch block kept from the first call comes back poisoned, as the
    # device hands it out again: it passed, zeroed still)
    ("broken_uninit", "kept_scratch"): (
        "fail", f"cores 0-7: output elements [0, 32) {SECOND_CALL}", []),
    # the results keep what the kernel wrote as it wrote it (the printed line shows it
    # visible: test_emu_containment.py)
    ("broken_hostile", "terminal_forger"): (
        "fail", "core 0: fault CXX_EXCEPTION in op terminal_forger: C++ exception: \x1b[1A\x1b[2J\rPASS "
        "broken_hostile::terminal_forger[n10]: max_abs_err 0\ntotal: 1 passed, 0 failed\n\x1b[8m\x1b[30;40m"
        + NEVER, []),
    # expected values an int32 output cannot hold: never truncated to what the kernel returns
    ("broken_hostile", "halve_int"): (
        "fail", "expected value 0.9 at [0] is not an int32 (the output's dtype), from the vector's expected "
        "values (and 2 more)", []),
    # 11. where the device is stricter: a dtype a kernel cannot create, a write
    # stream's unflushed writes read by another access (an error under
    # COHERENT, a warning under INCOHERENT_VERBOSE, and under every policy the
    # device's data: the stale zeros), a dataram buffer that is not dataram
    ("broken_model", "make_uint16"): (
        "fail", "core 0: fault DTYPE in op make_uint16: torch::zeros: a kernel cannot create a uint16 tensor on "
        "the device (it may create float32, bfloat16, float16, int32, int8, int16, uint8, int64)" + NEVER, []),
    ("broken_model", "stale_accessor"): (
        "fail", "core 0: fault COHERENCE in op stale_accessor: accessor<float,1> " + UNFLUSHED + COHERENT_RULE
        + NEVER, []),
    ("broken_model", "stale_quiet"): ("fail", STALE, []),
    ("broken_model", "stale_verbose"): (
        "fail", STALE, ["core 0: accessor<float,1> " + UNFLUSHED + " (coherence policy INCOHERENT_VERBOSE)"]),
    ("broken_model", "stale_tcm"): (
        "fail", "core 0: fault COHERENCE in op stale_tcm: tensor_to_tcm<float> " + UNFLUSHED + COHERENT_RULE
        + NEVER, []),
    ("broken_model", "flushed_when_full"): ("pass", "", []),
    ("broken_model", "memcpy_static"): (
        "fail", "core 0: fault DATARAM in op memcpy_static: neuron_memcpy (dataram source) " + NOT_DATARAM + NEVER,
        []),
    ("broken_model", "tcm_static"): (
        "fail", "core 0: fault DATARAM in op tcm_static: tensor_to_tcm<float> " + NOT_DATARAM + NEVER, []),
    ("broken_model", "tcm_stack"): ("pass", "", []),
    ("broken_model", "tcm_moved_stack"): (
        "fail", "core 0: fault DATARAM in op tcm_moved_stack: tensor_to_tcm<float> of 40 bytes: the pointer is a "
        "local variable on a 8192-byte stack, which the device keeps in device memory (only the default 4196-byte "
        "stack is in the core's local memory), not dataram: it must lie in the dataram window [0x80000, 0x90000) "
        "(tcm_malloc, neuron_dataram_allocate) or on the default stack" + NEVER, []),
    # every byte from an output copy to the next copy's guard zone or the gap
    # after the last one is poisoned and checked, in every private run (a
    # store in the page's rounding bytes after run 0's 64 KiB guard zone, or
    # 8000 bytes past the end in the second run only, passed); past it a 1 GiB
    # gap faults (a store 1.2 MB past the end landed in the scratch window)
    ("broken_memory2", "stray_rounding"): (
        "fail", "core 0 wrote past the end of the output: elements [16400, 16401) (the output has 16 "
        "elements); core 0: fault SEGV in op stray_rounding: SIGSEGV: invalid memory access at address ADDR "
        "(65536 bytes past the end of the output) (a second call of the op, from the state the first call "
        "left)", []),
    ("broken_memory2", "stray_second_run"): (
        "fail", "core 0 wrote past the end of the output: elements [2000, 2001) (the output has 16 elements)",
        []),
    ("broken_memory2", "stray_far"): (
        "fail", "core 0: fault SEGV in op stray_far: SIGSEGV: invalid memory access at address ADDR "
        "(1199936 bytes past the end of the output)", []),
    # the free bytes after a TCM or dataram block hold the run's poison (a
    # read one past the block read 0 in both runs: the reference's padding)
    ("broken_memory2", "stencil_tcm"): ("fail", PAST_BLOCK, []),
    ("broken_memory2", "stencil_dataram"): ("fail", PAST_BLOCK, []),
    # the runs against one shared output: their guard zones are checked, and
    # the run most like the device (0..7) is compared with the reference
    ("broken_shared", "past_end_race"): (
        "fail", "a core wrote past the end of the output only in a run against one shared output (cores in "
        "the order 7..0, one shared output): elements [64, 65) (the output has 64 elements)", []),
    ("broken_shared", "before_start_race"): (
        "fail", "a core wrote before the start of the output only in a run against one shared output (cores "
        "in the order 7..0, one shared output): elements [-1, 0)", []),
    ("broken_shared", "skip_on_zero"): (
        "fail", "the output is wrong in the run most like the device (cores in the order 0..7, one shared "
        "output), which starts from a zero-filled output: 64 of 64 elements differ (rtol=1.3e-06, atol=1e-05): "
        "[0] actual 0 expected 4.0818381, [1] actual 0 expected -5.11133, [2] actual 0 expected 0.83619767, "
        "[3] actual 0 expected -1.1355392, [4] actual 0 expected -0.90529859, ... (59 more); max_abs_err 6.646",
        []),
}


@pytest.fixture(scope="session")
def broken(built_project, tmp_path_factory):
    """A copy of the shared build with kernels/broken/ops.yaml built and run once
    (its ``test`` alias only, so the default collection's outputs stay as
    they are): ``(project, CompletedProcess, {lib: results JSON})``."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("broken") / "p")
    proc = run_scons(proj, "-k", *BROKEN_OPTIONS, "test")
    results = {}
    for lib in LIBS:
        # a library with a failing vector leaves its results as .failed.json
        path = proj / "build/host" / lib / "test-results.failed.json"
        if not path.exists():
            path = proj / "build/host" / lib / "test-results.json"
        assert path.exists(), proc.stdout + proc.stderr
        results[lib] = json.loads(path.read_text())
    return proj, proc, results


def test_every_broken_op_has_its_expected_diagnostic():
    import yaml
    manifest = yaml.safe_load((ROOT / "kernels/broken/ops.yaml").read_text())
    ops = {(lib["name"], op["schema"].split("::")[1].split("(")[0])
           for lib in manifest["libraries"] for op in lib["ops"]}
    assert ops == set(EXPECTED)
    # the broken kernels are not part of the default build
    assert "broken" not in (ROOT / "ops.yaml").read_text()


@pytest.mark.parametrize("lib,op", sorted(EXPECTED))
def test_exact_diagnostic(broken, lib, op):
    _, _, results = broken
    vec = [v for v in results[lib]["vectors"] if v["op"] == op][-1]   # (its last vector)
    # (a host address in the image, which changes from run to run, as ADDR)
    message = re.sub(r"address 0x[0-9a-f]{8,}", "address ADDR", vec["message"])
    assert (vec["status"], message, vec["warnings"]) == EXPECTED[(lib, op)]


def test_a_value_kept_from_the_first_call_passes_on_that_vector(broken):
    # cached_scale's first vector: its second call repeats its own arguments
    # (no vector before it), with which the kept scale is right
    _, _, results = broken
    first = [v for v in results["broken_memory"]["vectors"] if v["op"] == "cached_scale"][0]
    assert (first["vector"], first["status"], first["message"]) == ("s1", "pass", "")


def test_scons_fails_each_library_and_prints_located_lines(broken):
    _, proc, results = broken
    assert proc.returncode != 0
    for lib in LIBS:
        assert f"scons: *** [build/host/{lib}/test-results.json] Error 1" in proc.stderr, proc.stderr
        n = len(results[lib]["vectors"])
        passed = sum(1 for v in results[lib]["vectors"] if v["status"] == "pass")
        assert f"{lib}: {passed} passed, {n - passed} failed" in proc.stdout
    lines = proc.stdout.splitlines()
    # the FAIL line names library, op, vector, where it is written, core and offsets
    assert ("FAIL broken_spmd::remainder_bug[n1001] (kernels/broken/ops.yaml:16:13): core 7: fault "
            "OUT_OF_RANGE in op remainder_bug: tensor_to_tcm<float> out of range: offset 946, count 62, "
            "numel 1001; elements never written by any core: [875, 882), [946, 1001)") in lines
    # a warning rides on the PASS line
    assert ("PASS broken_access::coherence_verbose[n10] (kernels/broken/ops.yaml:123:13): max_abs_err 0 over "
            "10 elements; warning: core 0: read_stream_accessor<float> opened on a tensor with 1 "
            "write_stream_accessor already open (coherence policy INCOHERENT_VERBOSE)") in lines
    assert "Traceback" not in proc.stdout + proc.stderr


def test_shipped_collection_passes_every_check(built_project):
    """The normal `scons` run (checks on by default) passes with no warning
    but the returned-shape one."""
    proj, proc = built_project
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--no-checks" not in proc.stdout
    import yaml
    for lib in yaml.safe_load((proj / "ops.yaml").read_text())["libraries"]:
        res = json.loads((proj / "build/host" / lib["name"] / "test-results.json").read_text())
        # (tcm_eltwise's kernels return 1-D tensors, copied by element count
        # into a rank-8 output: the one warning the collection shows)
        flat = ["core 0: the kernel returned a tensor of shape [72] for an output descriptor "
                "of shape [2, 1, 3, 1, 2, 1, 2, 3] (same 72 elements: the runtime copies by "
                "element count)"]
        assert [(v["op"], v["vector"], v["status"], v["warnings"]) for v in res["vectors"]] == [
            (v["op"], v["vector"], "pass",
             flat if (lib["name"], v["vector"]) == ("tcm_eltwise", "rank8") else [])
            for v in res["vectors"]]


def _vector(proj, lib, op_name, checks):
    plan = load_plan(str(proj / "build/host" / lib / "testplan.json"))
    cores, error = prepare_cores(plan, str(proj))
    assert error is None
    try:
        op = next(o for o in plan.ops if o.name == op_name)
        return run_vector(lib, op, op.vectors[0], cores, root=str(proj), timeout=20, checks=checks,
                          zygote=str(proj / "build/host/emu/gpsimd-zygote"))
    finally:
        for c in cores:
            c.close()


def test_without_checks_the_device_hides_the_bugs(broken):
    proj, _, _ = broken
    # overlapping cores write equal values: the device's answer is right
    r = _vector(proj, "broken_spmd", "overlap", checks=False)
    assert (r.status, r.message, r.mismatches) == ("pass", "", 0)
    # a float read as int: bytes reinterpreted, only the values show it
    r = _vector(proj, "broken_args", "next_int_on_float", checks=False)
    assert r.status == "fail" and r.message.startswith("10 of 10 elements differ"), r.message
    # empty() not poisoned, no write sets: the scratch window's zeros compare
    r = _vector(proj, "broken_access", "empty_uninit", checks=False)
    assert r.status == "fail" and r.message.startswith("3 of 10 elements differ"), r.message
    # crashes and the runtime's own faults are still reported
    r = _vector(proj, "broken_spmd", "core3_abort", checks=False)
    assert r.message == "core 3 crashed with SIGABRT"
    r = _vector(proj, "broken_access", "accessor_oob", checks=False)
    assert r.message == ("core 0: fault OUT_OF_RANGE in op accessor_oob: accessor<float,1> out of range: "
                         "offset 10, count 1, numel 10")


def test_cli_no_checks_flag(broken, tmp_path):
    proj, _, _ = broken
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))
    cmd = [sys.executable, "-m", "gpsimd_emu", "run", "build/host/broken_args/testplan.json",
           "--results", str(tmp_path / "r.json")]
    with_checks = subprocess.run(cmd, cwd=str(proj), env=env, capture_output=True, text=True)
    without = subprocess.run(cmd + ["--no-checks"], cwd=str(proj), env=env, capture_output=True, text=True)
    assert with_checks.returncode == 1 and without.returncode == 1
    assert "fault DTYPE in op next_int_on_float" in with_checks.stdout
    assert "fault DTYPE in op next_int_on_float" not in without.stdout
    assert "utypes.hpp:65" in without.stdout   # the device's own gate stays


def test_emu_checks_option_reaches_the_test_command(broken):
    proj, _, _ = broken
    proc = run_scons(proj, "-n", "VERBOSE=1", "MANIFEST=kernels/broken/ops.yaml", "EMU_CHECKS=0",
                     "EMU_TIMEOUT=3", "test-broken_args")
    line = next(l for l in proc.stdout.splitlines() if "-m gpsimd_emu run" in l)
    assert line.endswith("--locations build/host/broken_args/locations.json "
                         "--zygote build/host/emu/gpsimd-zygote --no-checks --timeout 3")


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 3])
def test_whole_element_written_mask_equals_the_byte_rule(itemsize):
    rng = np.random.default_rng(itemsize)
    buf = np.full(4001 * itemsize + 1, 0xA5, dtype=np.uint8)
    idx = rng.choice(buf.size, 900, replace=False)
    buf[idx] = rng.integers(0, 256, idx.size, dtype=np.uint8)   # some equal the poison again
    for view in (buf[:-1], buf[1:]):                             # aligned and unaligned
        want = (view[:4001 * itemsize] != 0xA5).reshape(4001, itemsize).any(axis=1)
        assert np.array_equal(written_mask(view, 0xA5, itemsize, 4001), want)


def _layout(results, lib, op):
    (vec,) = [v for v in results[lib]["vectors"] if v["op"] == op]
    return vec["layout"]


def test_layout_records_write_sets_as_ranges(broken):
    """The results JSON of a vector run with checks holds who wrote what,
    as ranges (for a report that draws it): per core written ranges,
    reads before writing, writes past the end, its fault; holes, overlaps,
    order-dependent ranges."""
    _, _, results = broken
    lay = _layout(results, "broken_spmd", "remainder_bug")
    assert (lay["elements"], lay["itemsize"], lay["truncated"]) == (1001, 4, False)
    assert [c["written"] for c in lay["cores"]] == [[[125 * k, 125 * (k + 1)]] for k in range(7)] + [
        [[882, 946]]]
    assert lay["cores"][7]["fault"] == {"kind": "OUT_OF_RANGE", "range": [946, 1008]}
    assert [c["fault"] for c in lay["cores"][:7]] == [None] * 7
    assert lay["holes"] == [[875, 882], [946, 1001]] and lay["overlaps"] == []
    lay = _layout(results, "broken_spmd", "overlap")
    assert lay["overlaps"][0] == {"range": [125, 126], "cores": [0, 1]} and len(lay["overlaps"]) == 7
    lay = _layout(results, "broken_race", "reduce_partials")
    assert lay["cores"][0]["read_before_write"] == [[8, 64]]
    assert lay["order_dependent"] == [[0, 8]]
    lay = _layout(results, "broken_hostile", "tcm_uninit")
    assert lay["cores"][0]["uninit"] == [[0, 10]] and lay["cores"][0]["written"] == [[0, 10]]


def test_the_test_run_writes_a_report_that_draws_who_wrote_what(broken):
    """build/host/report.html of that run: every vector of every library
    with its status, and, rendered in Chromium, remainder_bug's strip: the
    cores' ranges in their colours, the holes, core 7's fault range."""
    from gpsimd_build.report import CORE_COLOURS, MARK_COLOURS
    proj, _, results = broken
    page = proj / "build/host/report.html"
    text = page.read_text()
    for lib, doc in results.items():
        for v in doc["vectors"]:
            assert f'<tr class="vector {v["status"]}" data-vector="{lib}::{v["op"]}[{v["vector"]}]"' \
                in text
    pic = render(str(page))
    segs = [s for s in pic.segs if s["vector"] == "broken_spmd::remainder_bug[n1001]"]
    strip = [s for s in segs if s["row"] == "strip"]
    x0, y = min(s["x"] for s in strip), strip[0]["y"] + strip[0]["h"] / 2
    width = sum(s["w"] for s in strip if s["kind"] == "beyond") * 1008 / 7   # [1001, 1008)

    def at(element):
        return x0 + width * (element + 0.5) / 1008
    for k in range(7):
        assert pic.pixel(at(125 * k + 60), y) == rgb(CORE_COLOURS[k])
    assert pic.pixel(at(900), y) == rgb(CORE_COLOURS[7])
    assert pic.pixel(at(878), y) == pic.pixel(at(970), y) == rgb(MARK_COLOURS["hole"])
    (fault,) = [s for s in segs if s["kind"] == "fault"]
    assert (fault["core"], fault["range"]) == ("7", "946,1008")
    assert pic.pixel(at(980), fault["y"] + fault["h"] / 2) == rgb(MARK_COLOURS["fault"])


def test_quiet_prints_failures_warnings_and_the_summary_only(broken):
    """QUIET=1 re-runs nothing it would not run anyway (broken_race failed,
    so its tests run again) and prints its FAIL lines and the summary: no
    action line, no PASS line, no SCons message."""
    proj, _, results = broken
    proc = run_scons(proj, *BROKEN_OPTIONS, "QUIET=1", "test-broken_race")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    doc = results["broken_race"]
    fails = [v for v in doc["vectors"] if v["status"] == "fail"]
    assert fails and len(fails) < len(doc["vectors"])      # some vector passes
    assert [line.split(" (")[0] for line in lines if line.startswith("FAIL ")] == [
        f"FAIL broken_race::{v['op']}[{v['vector']}]" for v in fails]
    assert lines[-2:] == [f"broken_race: {doc['passed']} passed, {doc['failed']} failed",
                          f"total: {doc['passed']} passed, {doc['failed']} failed"]
    others = [line for line in lines if not line.startswith(("FAIL ", "broken_race: ", "total: "))]
    assert others == ["scons: Reading SConscript files ..."], others
    assert not re.search(r"^(\[\d+/\d+\] |TEST |PASS )", proc.stdout, re.M)


def test_layout_is_only_in_results_of_runs_with_checks(broken, tmp_path):
    proj, _, _ = broken
    env = dict(os.environ, PYTHONPATH=str(ROOT / "runtime_model"))
    cmd = [sys.executable, "-m", "gpsimd_emu", "run", "build/host/broken_race/testplan.json",
           "--results", str(tmp_path / "r.json"), "--no-checks"]
    subprocess.run(cmd, cwd=str(proj), env=env, capture_output=True, text=True)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert all("layout" not in v for v in doc["vectors"])


def _alone(proj, plan, op_name, vector_name):
    """``vector_name`` of ``op_name`` run on its own in a new session, as
    the pytest plugin runs one vector of a ``-k`` selection, ``--lf``, a
    shard or an xdist worker."""
    from gpsimd_emu.session import LibrarySession
    from gpsimd_emu.settings import RunOptions
    options = RunOptions(timeout=20, zygote=str(proj / "build/host/emu/gpsimd-zygote"))
    with LibrarySession(plan, root=str(proj), options=options) as s:
        r = s.run_vector(op_name, vector_name)
    return r.status, r.message


def _op_plan_with(proj, tmp_path, op_name, index, change):
    """broken_memory's plan cut to op ``op_name``, with a copy of its vector
    ``index`` that ``change`` changes appended: ``(plan, RunOptions)``."""
    from gpsimd_emu.settings import RunOptions
    data = json.loads((proj / "build/host/broken_memory/testplan.json").read_text())
    op = next(o for o in data["ops"] if o["name"] == op_name)
    extra = json.loads(json.dumps(op["vectors"][index]))
    change(extra)
    op["vectors"].append(extra)
    data["ops"] = [op]
    (tmp_path / "plan.json").write_text(json.dumps(data))
    return load_plan(str(tmp_path / "plan.json")), RunOptions(
        timeout=20, zygote=str(proj / "build/host/emu/gpsimd-zygote"))


def test_a_vector_after_one_that_fails_on_its_second_call_has_its_own_judged_with_its_arguments(
        broken, tmp_path):
    """call_counter's n10 fails on its own second call; its first call is
    right, so n10b, the same form, makes its second call with n10's
    arguments, judged against n10's expected output: the same verdict in a
    whole run (which makes n10b ready while n10 runs), vector by vector,
    and with n10b alone (a pytest -k: n10 is run first, on its own). Two
    attackers found verdicts that hung on which vectors ran: n10b passed
    in a whole run when n10's failure dropped its second call's check, and
    a vector after one that failed on its second call alone was judged
    against its own arguments under -k or -n but against the previous
    vector's in a whole run."""
    from gpsimd_emu.session import LibrarySession
    proj, _, _ = broken

    def n10b(v):
        v["name"] = "n10b"
        v["inputs"]["x"]["random"]["seed"] = 4
    plan, options = _op_plan_with(proj, tmp_path, "call_counter", 0, n10b)
    with LibrarySession(plan, root=str(proj), options=options) as s:
        whole = [(r.vector, r.status, r.message) for r in s.run_all().vectors]
    with LibrarySession(plan, root=str(proj), options=options) as s:
        each = [(r.vector, r.status, r.message)
                for r in (s.run_vector("call_counter", name) for name in ("n10", "n10b"))]
    with LibrarySession(plan, root=str(proj), options=options) as s:
        alone = [(r.vector, r.status, r.message) for r in [s.run_vector("call_counter", "n10b")]]
    assert whole == each
    assert whole[0] == ("n10", "fail", f"core 0: output elements [0, 10) {SECOND_CALL}")
    assert alone == whole[1:]
    vector, status, message = whole[1]
    assert (vector, status) == ("n10b", "fail")
    assert message.startswith(f"a second call of the op, with the arguments of vector 'n10' after "
                              f"a call with this vector's, is wrong ({STATE}): 10 of 10 elements "
                              f"differ (rtol=1.3e-06, atol=1e-05): [0] actual "), message
    # (the second call is the counter's second: 4 x where n10's reference is 2 x)
    pairs = re.findall(r"\[\d\] actual (\S+) expected (\S+?),", message)
    assert len(pairs) == 5
    for actual, expected in pairs:
        assert float(actual) == pytest.approx(2 * float(expected), rel=1e-6)


def test_a_vector_s_verdict_does_not_hang_on_which_vectors_run_with_it(broken, tmp_path):
    """cached_scale keeps the scale of its first call. s3 fails on its second
    call (with s1's arguments) alone; its first call is right, so s5's second
    call takes s3's arguments and fails, in a whole run as with s5 alone
    (pytest -k, -n: s3 is run first, on its own). The whole run used to
    pass s5 (s3 had failed, so s5's second call repeated its own
    arguments, which hide the bug) where s5 alone failed."""
    from gpsimd_emu.session import LibrarySession
    proj, _, _ = broken

    def s5(v):
        v["name"] = "s5"
        v["inputs"]["x"]["values"] = [3.0, -1.0]
        v["inputs"]["s"]["value"] = 5.0
    plan, options = _op_plan_with(proj, tmp_path, "cached_scale", 1, s5)
    with LibrarySession(plan, root=str(proj), options=options) as s:
        whole = [(r.vector, r.status, r.message) for r in s.run_all().vectors]
    with LibrarySession(plan, root=str(proj), options=options) as s:
        alone = [(r.vector, r.status, r.message) for r in [s.run_vector("cached_scale", "s5")]]
    # s3's arguments after s5's call: the scale 2 + 5 kept, where s3's reference scales by 2 + 3
    assert whole[2] == alone[0] == (
        "s5", "fail", f"a second call of the op, with the arguments of vector 's3' after a call "
                      f"with this vector's, is wrong ({STATE}): 2 of 2 elements differ "
                      f"(rtol=1.3e-06, atol=1e-05): [0] actual 3.5 expected 2.5, [1] actual 28 "
                      f"expected 20; max_abs_err 8")
    assert [v[:2] for v in whole] == [("s1", "pass"), ("s3", "fail"), ("s5", "fail")]


def test_a_second_call_that_faults_or_spins_leaves_the_first_call_right(broken, tmp_path):
    """stale_or_fault's a faults on its second call (z's arguments) alone:
    the fault is named as the second call's (it stopped the runs after it,
    which the record check used to call a kernel writing over the model's
    memory), a's first call is right, and b's second call takes a's
    arguments, in a whole run and with b alone (pytest -k, -n) alike: b
    passed in the whole run and failed alone."""
    from gpsimd_emu.session import LibrarySession
    from gpsimd_emu.settings import RunOptions
    proj, _, results = broken
    a = [v for v in results["broken_memory"]["vectors"]
         if (v["op"], v["vector"]) == ("stale_or_fault", "a")][0]
    assert a["message"].startswith(
        "core 0: fault OUT_OF_RANGE in op stale_or_fault: accessor<float,1> out of range: "
        "offset 5, count 1, numel 2 (a second call of the op, from the state the first call "
        "left)"), a["message"]
    assert a["second_call_only"] is True
    plan = load_plan(str(proj / "build/host/broken_memory/testplan.json"))
    options = RunOptions(timeout=20, zygote=str(proj / "build/host/emu/gpsimd-zygote"))
    with LibrarySession(plan, root=str(proj), options=options) as s:
        alone = s.run_vector("stale_or_fault", "b")
    assert (alone.status, alone.message) == EXPECTED[("broken_memory", "stale_or_fault")][:2]
    # a second call that spins: its time limit is the second call's (it was not
    # named so, and b passed alone where it failed in the whole run)
    a = [v for v in results["broken_crash"]["vectors"]
         if (v["op"], v["vector"]) == ("spin_on_second", "a")][0]
    assert (a["message"], a["second_call_only"]) == (
        EXPECTED[("broken_crash", "spin_on_second")][1], True)
    crash = load_plan(str(proj / "build/host/broken_crash/testplan.json"))
    with LibrarySession(crash, root=str(proj), options=RunOptions(
            timeout=2, zygote=str(proj / "build/host/emu/gpsimd-zygote"))) as s:
        alone = s.run_vector("spin_on_second", "b")
    assert (alone.status, alone.message) == EXPECTED[("broken_crash", "spin_on_second")][:2]


def test_a_vector_run_alone_has_its_second_call_judged_as_in_a_whole_run(broken, tmp_path):
    """The second call with the vector before it's arguments was judged
    only when that vector had passed earlier in the same session, so the
    pytest plugin passed ``cached_scale[s3]`` with ``-k``, ``--lf``, ``-n``
    or a shard, which scons fails. That vector is now run first, on its
    own; when it fails on its own, its expected output judges no other
    vector's second call (no false blame)."""
    proj, _, _ = broken
    path = proj / "build/host/broken_memory/testplan.json"
    assert _alone(proj, load_plan(str(path)), "cached_scale", "s3") == \
        EXPECTED[("broken_memory", "cached_scale")][:2]
    # s1's expected output made wrong: s1 fails, and s3's second call,
    # made with its own arguments then, finds nothing
    data = json.loads(path.read_text())
    op = next(o for o in data["ops"] if o["name"] == "cached_scale")
    op["vectors"][0]["expected"] = {"values": [9.0, 9.0]}
    (tmp_path / "plan.json").write_text(json.dumps(data))
    plan = load_plan(str(tmp_path / "plan.json"))
    assert _alone(proj, plan, "cached_scale", "s3") == ("pass", "")
    assert _alone(proj, plan, "cached_scale", "s1")[0] == "fail"
