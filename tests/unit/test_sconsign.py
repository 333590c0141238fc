"""SCons's ``.sconsign`` written whole or not at all (gpsimd_tool.sconsign),
and the record of outputs kept behind it when it cannot be written
(gpsimd_tool.integrity)."""
import errno
import os
import pickle

import pytest
import SCons.dblite
import SCons.Node

from conftest import fill
from site_tools.gpsimd_tool import integrity, sconsign


@pytest.fixture(autouse=True)
def _nothing_failed_yet(monkeypatch):
    monkeypatch.setattr(sconsign, "_failed", [])


def test_the_file_is_scons_own_format_both_ways(tmp_path):
    ours = sconsign.open(str(tmp_path / ".sconsign"), "c")
    ours["build/host"] = b"\x80entries"
    ours.close()
    assert sorted(os.listdir(tmp_path)) == [".sconsign.dblite"]
    theirs = SCons.dblite.open(str(tmp_path / ".sconsign"), "c")
    assert theirs["build/host"] == b"\x80entries"
    theirs["build/host/relu"] = b"more"
    theirs.close()
    again = sconsign.open(str(tmp_path / ".sconsign"), "r")
    assert dict(again) == {"build/host": b"\x80entries", "build/host/relu": b"more"}


def test_an_unreadable_file_is_said_and_nothing_is_trusted(tmp_path, capsys):
    (tmp_path / ".sconsign.dblite").write_bytes(b"\x80\x05half a pickle")
    db = sconsign.open(str(tmp_path / ".sconsign"), "c")
    assert dict(db) == {}
    assert capsys.readouterr().err == (
        f"scons: ignoring {tmp_path}/.sconsign.dblite: it cannot be read; every target is "
        "built again\n")


def test_a_full_disk_stops_the_build_naming_the_file_and_keeps_the_old_one(small_disk, capsys):
    disk = small_disk("64k")
    db = sconsign.open(str(disk / ".sconsign"), "c")
    db["a"] = b"old"
    db.sync()
    old = (disk / ".sconsign.dblite").read_bytes()
    assert sconsign.written()
    fill(disk)
    db["a"] = os.urandom(100000)
    with pytest.raises(SystemExit) as e:
        db.sync()
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        f"scons: cannot write {disk}/.sconsign.dblite: No space left on device (errno "
        f"{errno.ENOSPC}); the next build builds again what this one built\n")
    assert (disk / ".sconsign.dblite").read_bytes() == old
    assert sorted(os.listdir(disk)) == [".sconsign.dblite", "filler"]
    assert not sconsign.written()
    db.close()                         # (said once: SCons closes it after the sync)
    assert capsys.readouterr().err == ""


class _Node:
    """What OutputRecord reads of an SCons file node (no source files:
    nothing it was made from changed while the build ran)."""

    sources, depends, implicit = (), (), None

    def __init__(self, path, state):
        self.path, self.state = path, state

    def get_state(self):
        return self.state

    def get_ninfo(self):
        return None


def _record(folder):
    with open(folder / integrity.RECORD_NAME, "rb") as f:
        return pickle.load(f)["entries"]


def test_the_record_of_outputs_stays_behind_signatures_that_were_not_written(tmp_path):
    """An output this build made is recorded only when SCons's own record of
    what it was built from was written too; otherwise it keeps its old
    entry, so that the next build finds it different and builds it again."""
    obj = tmp_path / "relu.o"
    obj.write_bytes(b"built from the old source")
    first = integrity.OutputRecord(str(tmp_path))
    assert first.verify_outputs([_Node(str(obj), SCons.Node.executed)]) == [str(obj)]
    obj.write_bytes(b"built from the old source")
    first.save()
    old = _record(tmp_path)[str(obj)]

    obj.write_bytes(b"built from the edited source")
    second = integrity.OutputRecord(str(tmp_path))
    node = _Node(str(obj), SCons.Node.executed)
    second.verify_outputs([node])      # (removes it: not what was recorded)
    obj.write_bytes(b"built from the edited source")
    sconsign._failed.append("build/.sconsign.dblite")
    second.save()
    assert _record(tmp_path)[str(obj)] == old
    third = integrity.OutputRecord(str(tmp_path))
    assert third.verify_outputs([_Node(str(obj), SCons.Node.up_to_date)]) == [str(obj)]
    assert not obj.exists()
