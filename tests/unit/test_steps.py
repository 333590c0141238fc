"""Our own build steps (gpsimd_build.steps): atomic writes that leave no
temporary file behind, and errors that name the path and the errno."""
import errno
import os
import subprocess
import sys
import time

import pytest

from conftest import fill
from gpsimd_build import steps
from gpsimd_device.atomic import write_atomically
from gpsimd_device.pack import parse_pack

ELF = b"\x7fELF" + bytes(60)


def test_write_atomically_replaces_whole_files(tmp_path):
    out = tmp_path / "f.bin"
    out.write_bytes(b"old")
    write_atomically(str(out), b"new contents")
    assert out.read_bytes() == b"new contents"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "f.bin"
    out.write_bytes(b"old")

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", dst)
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError) as e:
        write_atomically(str(out), b"new")
    assert e.value.errno == errno.ENOSPC
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_text_is_written_as_utf8_and_a_folder_made_on_request(tmp_path):
    out = tmp_path / "new" / "r.json"
    with pytest.raises(FileNotFoundError):
        write_atomically(str(out), "x")
    write_atomically(str(out), "caf\u00e9\n", make_folder=True)
    assert out.read_bytes() == b"caf\xc3\xa9\n"
    assert sorted(os.listdir(out.parent)) == ["r.json"]


def test_one_writer_for_the_build_and_the_emulator():
    """The build's steps, the results and the record share one function."""
    from gpsimd_build.steps import digests, pack, registration, stack_report, summary
    from gpsimd_device import results
    for module in (digests, pack, registration, stack_report, summary, results):
        assert module.write_atomically is write_atomically


def _fake_strip(tmp_path, body='cp "$4" "$3"'):
    """A strip stand-in: ``strip --strip-unneeded -o OUT IN`` copies IN."""
    tool = tmp_path / "fake-strip"
    tool.write_text(f"#!/bin/sh\n[ \"$1 $2\" = \"--strip-unneeded -o\" ] || exit 9\n{body}\n")
    tool.chmod(0o755)
    return str(tool)


def test_pack_step_strips_then_writes_the_container(tmp_path):
    (tmp_path / "x.so").write_bytes(ELF)
    assert steps.main(["pack", "--strip", _fake_strip(tmp_path), "--library", "l", "--member",
                       "lsp_fll_load_cpu3", "3", str(tmp_path / "x.so"),
                       str(tmp_path / "x.packed.so"), str(tmp_path / "x.stripped.so")]) == 0
    assert (tmp_path / "x.stripped.so").read_bytes() == ELF
    meta, payload = parse_pack((tmp_path / "x.packed.so").read_bytes())
    assert payload == ELF and (meta["core"], meta["lsp"], meta["library"]) == (
        3, "lsp_fll_load_cpu3", "l")


def test_one_pack_step_packs_every_core_of_a_library(tmp_path):
    members = []
    for core in range(8):
        (tmp_path / f"l_cpu{core}.so").write_bytes(ELF + bytes([core]))
        members += ["--member", f"lsp_fll_load_cpu{core}", str(core), str(tmp_path / f"l_cpu{core}.so"),
                    str(tmp_path / f"l_cpu{core}.packed.so"), str(tmp_path / f"l_cpu{core}.stripped.so")]
    assert steps.main(["pack", "--strip", _fake_strip(tmp_path), "--library", "l"] + members) == 0
    for core in range(8):
        meta, payload = parse_pack((tmp_path / f"l_cpu{core}.packed.so").read_bytes())
        assert payload == ELF + bytes([core])
        assert (meta["core"], meta["lsp"]) == (core, f"lsp_fll_load_cpu{core}")
        assert (tmp_path / f"l_cpu{core}.stripped.so").read_bytes() == ELF + bytes([core])


def test_a_failed_member_leaves_no_output_of_the_step(tmp_path, capsys):
    """The third core's strip fails: the step exits 1 naming it, and what it
    wrote for the first two cores is gone too (the action failed as one)."""
    strip = _fake_strip(tmp_path, 'case "$4" in *cpu2*) exit 3;; esac; cp "$4" "$3"')
    members = []
    for core in range(4):
        (tmp_path / f"l_cpu{core}.so").write_bytes(ELF)
        members += ["--member", f"lsp_fll_load_cpu{core}", str(core), str(tmp_path / f"l_cpu{core}.so"),
                    str(tmp_path / f"p{core}.so"), str(tmp_path / f"s{core}.so")]
    assert steps.main(["pack", "--strip", strip, "--library", "l"] + members) == 1
    err = capsys.readouterr().err
    assert err == (f"gpsimd: {tmp_path / 's2.so'}: {strip} --strip-unneeded -o "
                   f"{tmp_path / 's2.so'} {tmp_path / 'l_cpu2.so'} failed (exit status 3)\n")
    assert sorted(os.listdir(tmp_path)) == ["fake-strip"] + [f"l_cpu{c}.so" for c in range(4)]


def test_pack_step_rejects_a_core_that_is_not_one(tmp_path, capsys):
    (tmp_path / "x.so").write_bytes(ELF)
    assert steps.main(["pack", "--strip", _fake_strip(tmp_path), "--library", "l", "--member",
                       "s", "8", str(tmp_path / "x.so"), str(tmp_path / "p.so"),
                       str(tmp_path / "s.so")]) == 1
    assert capsys.readouterr().err == (f"gpsimd: pack: core '8' of {tmp_path / 'x.so'}: "
                                       "a core is 0..7 or none\n")
    assert not (tmp_path / "p.so").exists() and not (tmp_path / "s.so").exists()


def test_pack_step_reports_a_failed_strip(tmp_path, capsys):
    (tmp_path / "x.so").write_bytes(ELF)
    strip = _fake_strip(tmp_path, "exit 3")
    assert steps.main(["pack", "--strip", strip, "--library", "l", "--member", "s",
                       "none", str(tmp_path / "x.so"), str(tmp_path / "p.so"),
                       str(tmp_path / "s.so")]) == 1
    err = capsys.readouterr().err
    assert err == (f"gpsimd: {tmp_path / 's.so'}: {strip} --strip-unneeded -o "
                   f"{tmp_path / 's.so'} {tmp_path / 'x.so'} failed (exit status 3)\n")
    assert not (tmp_path / "p.so").exists()


def test_step_errors_name_the_path_and_exit_1(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-S", "-m", "gpsimd_build.steps", "pack", "--strip",
                           "strip", "--library", "l", "--member", "s", "none",
                           str(tmp_path / "missing.so"), str(tmp_path / "out.so"),
                           str(tmp_path / "out.stripped.so")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    stripped = tmp_path / "out.stripped.so"
    assert proc.stderr == (f"gpsimd: {stripped}: strip --strip-unneeded -o {stripped} "
                           f"{tmp_path / 'missing.so'} failed (exit status 1): strip: "
                           f"'{tmp_path / 'missing.so'}': No such file\n")
    assert os.listdir(tmp_path) == []


def _gone(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def test_a_strip_that_hangs_fails_the_step_and_is_ended_whole(tmp_path, capsys, monkeypatch):
    """A strip that outlives the time limit fails its step, naming the limit,
    and its process group (a child it started included) is ended. (The
    limit doubles until the fake strip had time to start its child: a
    loaded machine may not start it within the first.)"""
    from gpsimd_build import objgraph
    (tmp_path / "x.so").write_bytes(ELF)
    strip = _fake_strip(tmp_path, f'sleep 600 & echo $! > {tmp_path}/child; wait')
    limit = 0.25
    child = tmp_path / "child"
    while not (child.exists() and child.read_text().strip()):
        child.unlink(missing_ok=True)
        limit *= 2
        monkeypatch.setattr(objgraph, "TOOL_TIMEOUT", limit)
        assert steps.main(["pack", "--strip", strip, "--library", "l", "--member", "s",
                           "none", str(tmp_path / "x.so"), str(tmp_path / "p.so"),
                           str(tmp_path / "s.so")]) == 1
        assert capsys.readouterr().err == (
            f"gpsimd: {tmp_path / 's.so'}: {strip} --strip-unneeded -o {tmp_path / 's.so'} "
            f"{tmp_path / 'x.so'} failed (it took more than {limit:g} s; its processes were "
            f"ended)\n")
        assert limit < 60
    assert _gone(int(child.read_text()))
    assert sorted(os.listdir(tmp_path)) == ["child", "fake-strip", "x.so"]


def test_a_full_disk_names_the_file_and_leaves_the_old_one_whole(small_disk):
    """ENOSPC comes from the write (or the close), which names no file: the
    error names the file asked for, the old file is kept whole and no
    temporary file is left (a real full tmpfs, not a stand-in)."""
    disk = small_disk("64k")
    out = disk / "results.json"
    out.write_bytes(b"old")
    filler = fill(disk)
    with pytest.raises(OSError) as e:
        write_atomically(str(out), b"x" * 200000)
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, str(out))
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(disk)) == ["filler", "results.json"]
    filler.unlink()
    write_atomically(str(out), b"new")
    assert out.read_bytes() == b"new"


def test_a_step_on_a_full_disk_names_the_file_it_could_not_write(small_disk, tmp_path, capsys):
    disk = small_disk("64k")
    (disk / "x.so").write_bytes(ELF)
    # strip writes its output, then the disk is full for the pack
    strip = _fake_strip(tmp_path, 'cp "$4" "$3" && cat /dev/zero > "${3%/*}/filler" 2>/dev/null; :')
    status = steps.main(["pack", "--strip", strip, "--library", "l", "--member",
                         "lsp_fll_load_cpu3", "3", str(disk / "x.so"),
                         str(disk / "x.packed.so"), str(disk / "x.stripped.so")])
    assert status == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"gpsimd: {disk / 'x.packed.so'}: No space left on device")
    assert sorted(os.listdir(disk)) == ["filler", "x.so"]     # (nothing half-made)
