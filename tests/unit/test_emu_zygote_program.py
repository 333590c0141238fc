"""The emulator's program, ``gpsimd-zygote``, against its one definition
(``gpsimd_host/zygote.h``): the structures the worker reads and writes
through ``binding.header_struct`` have the C structures' sizes and
offsets (a C program compiled from the same header says them), the
program carries the digest of its sources and is refused when it was
built from others, and it refuses what it cannot read."""
import contextlib
import ctypes
import os
import socket
import subprocess

import pytest

from c_layout import check_layouts
from conftest import build_zygote
from gpsimd_device import zygote as program
from gpsimd_device.headers import INCLUDE_DIR
from gpsimd_emu import abi, control, zygote_client
from gpsimd_emu.binding import header_struct
from gpsimd_emu.zygote_client import Ready, Reply, Vector, vector_message

pytestmark = pytest.mark.slow      # (the tests compile)

#: Every structure of zygote.h the worker reads (``binding.header_struct``),
#: by its C name.
_STRUCTS = {"struct gz_vector": Vector, "struct gz_run": header_struct("zygote.h", "gz_run"),
            "struct gz_ready": Ready, "struct gz_core": header_struct("zygote.h", "gz_core"),
            "struct gz_reply": Reply, "struct gz_output": header_struct("zygote.h", "gz_output"),
            "gz_control": control.Block, "gz_pass": header_struct("zygote.h", "gz_pass"),
            "gz_slot": header_struct("zygote.h", "gz_slot"),
            "gz_job": header_struct("zygote.h", "gz_job")}


def test_the_message_is_the_c_structure(tmp_path):
    """Every size and field offset of those structures, as a C program
    compiled from the same header says them; the semaphore fits its pass
    record, the magic its field, a vector's cores are the device's, and the
    core's linker spec and the binding are abi.py's."""
    pass_ = _STRUCTS["gz_pass"]
    checked = check_layouts(tmp_path, ["semaphore.h", "gpsimd_host/zygote.h"], _STRUCTS, {
        f"sizeof(sem_t) <= {pass_.sem.size}": 1,
        "sizeof(gpsimd_core_binding)": ctypes.sizeof(abi.GpsimdCoreBinding),
        "sizeof(GPSIMD_ZY_CB_MAGIC) - 1": control.Block.magic.size,
        "GPSIMD_ZY_MAX_CORES == GPSIMD_NUM_CORES": 1})
    # (gz_core's lsp: its 5 fields as well)
    assert sum(checked.values()) == 19 + 5 + 5 + (5 + 5) + 8 + 5 + 13 + 8 + 6 + 4
    assert (Vector.runs.size, Reply.output.size) == (
        ctypes.sizeof(_STRUCTS["struct gz_run"]) * control.MAX_PASSES,
        ctypes.sizeof(_STRUCTS["struct gz_output"]) * 2 * control.MAX_CORES)
    assert _STRUCTS["struct gz_core"].lsp.size == ctypes.sizeof(abi.GpsimdLspInfo)


def test_a_vector_message_holds_the_request():
    req = {"size": 1 << 20, "ncores": 8, "runs": [
        {"index": 0, "ordered": False, "poison": 0xA5},
        {"index": 3, "ordered": True, "poison": 0x5A}],
        "parallel": 2, "spread_now": True, "spread_after": 0.25, "timeout": 9.5,
        "binding_size": ctypes.sizeof(abi.GpsimdCoreBinding), "bindings_at": 8192,
        "args_at": 12288, "arg_len": 96, "page": 4096, "desc_len": 48,
        "op": "spmd_relu", "memory": 1 << 30,
        "image_total": 3 << 20, "prefilled": 1 << 20}
    v = Vector.from_buffer_copy(vector_message(req))
    assert (v.magic, v.memory, v.image_total, v.prefilled, v.op) == (
        control.ZY["MAGIC"], 1 << 30, 3 << 20, 1 << 20, b"spmd_relu")
    assert (v.size, v.ncores, v.nruns, v.parallel, v.spread_now, v.spread_after_ns,
            v.timeout_ns) == (1 << 20, 8, 2, 2, 1, 250_000_000, 9_500_000_000)
    assert (v.bindings_at, v.args_at, v.arg_len, v.page, v.desc_len) == (8192, 12288, 96,
                                                                        4096, 48)
    assert [(r.index, r.ordered) for r in v.runs[:2]] == [(0, 0), (3, 1)]
    with pytest.raises(ValueError, match="op name of 256 bytes"):
        vector_message(dict(req, op="x" * 256))
    many = control.ZY["MAX_RUNS"] + 1
    runs = [dict(req["runs"][0], index=i) for i in range(many)]
    with pytest.raises(ValueError, match=f"{many} runs of 8 cores do not fit the zygote"):
        vector_message(dict(req, runs=runs))


def test_a_program_of_other_sources_is_refused(zygote_program, tmp_path):
    assert zygote_client.program_problem(zygote_program) is None
    # the same program built from sources one byte away
    emu = tmp_path / "emu"
    emu.mkdir()
    here = os.path.dirname(zygote_client.__file__)
    for name in program.SOURCE_NAMES:
        text = open(os.path.join(here, name)).read()
        (emu / name).write_text(text + ("\n" if name == "leader.c" else ""))
    other = build_zygote(tmp_path, str(emu), INCLUDE_DIR)
    assert zygote_client.program_problem(other) == (
        f"{other} was built from other sources than this emulator's")
    assert zygote_client.program_problem(str(tmp_path / "none")) == (
        f"{tmp_path / 'none'} does not exist")
    assert "no zygote program was given" in zygote_client.program_problem(None)


def test_only_a_program_of_its_user_alone_runs(zygote_program, tmp_path):
    """The program runs unconfined as whoever runs the vectors: one its
    group or others may write (the linker's mode under ``umask 002``, in a
    group-writable build folder), or with a second name, could have been
    written by someone else (a script carrying the digest runs anything),
    so it is refused; the one the build makes is not group-writable."""
    assert os.stat(zygote_program).st_mode & 0o022 == 0       # (protect_command)
    digest = zygote_client.source_digest()
    for mode in (0o775, 0o757):
        forged = tmp_path / f"forged{mode:o}"
        forged.write_text(f"#!/bin/sh\n# {program.MARKER.decode()}{digest}\n"
                          f"touch {tmp_path}/ran\n")
        forged.chmod(mode)
        problem = zygote_client.program_problem(str(forged))
        assert problem == (f"{forged} not a file of yours alone (another user or your group "
                           "could have written it): the build makes it yours, not group- or "
                           "other-writable (chmod go-w)")
        with pytest.raises(OSError, match="not a file of yours alone"):
            zygote_client.ZygoteClient(str(forged), 1)
    linked = tmp_path / "linked"
    os.link(zygote_program, linked)
    try:
        assert "not a file of yours alone" in zygote_client.program_problem(str(linked))
    finally:
        linked.unlink()
    assert not (tmp_path / "ran").exists()
    if os.geteuid() == 0:                  # (another user's, made by root)
        theirs = tmp_path / "theirs"
        theirs.write_bytes(open(zygote_program, "rb").read())
        theirs.chmod(0o755)
        os.chown(theirs, 65534, 65534)
        assert "not a file of yours alone" in zygote_client.program_problem(str(theirs))


def test_the_program_refuses_what_it_cannot_read(zygote_program, tmp_path):
    proc = subprocess.run([zygote_program, "3"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr
    # an object that does not load: its error in the ready message; a
    # message that is not a vector: an error reply, and the next is served
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF not really")
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    os.set_inheritable(theirs.fileno(), True)
    proc = subprocess.Popen([zygote_program, str(theirs.fileno()), str(os.getpid()), "1", "1"],
                            pass_fds=[theirs.fileno()])
    theirs.close()
    with open(bad, "rb") as f:
        socket.send_fds(mine, [os.fsencode(bad) + b"\0"], [f.fileno()])
    data, fds, _, _ = socket.recv_fds(mine, 1 << 16, 4)
    ready = zygote_client.read_ready(os.pread(fds[0], 1 << 20, 0), 1)
    for fd in fds:
        os.close(fd)
    assert data == control.ZY["READY"].encode() and ready["mode"] in ("pidns", "userns", "pgroup")
    assert list(ready["cores"][0]) == ["error"]
    assert ready["cores"][0]["error"].startswith(f"{bad}: cannot load: ")
    r, w = os.pipe()
    for _ in range(2):
        socket.send_fds(mine, [b"\x00" * 40], [r])
        assert zygote_client.read_reply(mine.recv(1 << 16), b"") == {
            "error": "a request the zygote cannot read"}
    mine.close()
    assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("names, nfds", [(b"a.so\0", 0), (b"a.so", 1), (b"a.so\0b.so\0", 2),
                                         (b"", 1)])
def test_the_program_ends_on_an_objects_message_that_is_not_whole(zygote_program, tmp_path,
                                                                   names, nfds):
    """The objects' message must hold one name (ending in a NUL) and one
    descriptor per object: else the program ends with status 2, before
    loading anything, its only answer why ("E" and the memfd of what it
    said), not a ready message."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    os.set_inheritable(theirs.fileno(), True)
    proc = subprocess.Popen([zygote_program, str(theirs.fileno()), str(os.getpid()), "1", "1"],
                            pass_fds=[theirs.fileno()])
    theirs.close()
    r, w = os.pipe()
    socket.send_fds(mine, [names], [r] * nfds)
    assert proc.wait(timeout=10) == 2
    said, fds, _, _ = socket.recv_fds(mine, 1 << 16, 1)
    assert said == control.ZY["NOT_READY"].encode() and len(fds) == 1
    assert os.pread(fds[0], 1 << 16, 0) == b"gpsimd-zygote: no whole message of 1 core objects\n"
    assert mine.recv(1 << 16) == b""     # (no ready message: its end closed)
    for fd in (r, w, *fds):
        os.close(fd)
    mine.close()


def test_an_answer_with_a_descriptor_that_cannot_be_read_is_a_zygote_error():
    # (a pipe where the kept output's memfd belongs: pread's ESPIPE went
    # out of receive as an OSError, which the session took for a
    # ZygoteError and asked its meaning: a traceback, the worker's end)
    client = object.__new__(zygote_client.ZygoteClient)
    client.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.pid, client._ended = None, "is gone"
    r, w = os.pipe()
    try:
        socket.send_fds(theirs, [bytes(ctypes.sizeof(Reply))], [r])
        with pytest.raises(zygote_client.ZygoteError, match="cannot be read"):
            client.receive(1.0)
    finally:
        for fd in (r, w):
            with contextlib.suppress(OSError):
                os.close(fd)
        client.sock.close()
        theirs.close()
