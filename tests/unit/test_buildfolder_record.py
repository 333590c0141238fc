"""The build folder's check reads again only the folders that changed since
the last one (``gpsimd_build.buildfolder.REMEMBERED``), and that record
never hides what a whole check would refuse. The cases that need another
user run as root and plant as uid 65534 (no account is made)."""

import json
import os
import shutil

import pytest

from gpsimd_build import buildfolder

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant as another user")


@pytest.fixture
def reads(monkeypatch):
    """The folders the check reads (``os.scandir``), each as a path."""
    seen = []
    real = os.scandir

    def counting(path="."):
        seen.append(str(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", counting)
    return seen


def _tree(top, libs=4):
    for i in range(libs):
        for sub in ("obj/core0", "obj/core1", "pack"):
            (top / "host" / f"lib{i}" / sub).mkdir(parents=True)
    return top


def _old(monkeypatch):
    """A check that remembers folders changed just now (the 2 s margin is
    for a real build's folders, older than that by the next build)."""
    monkeypatch.setattr(buildfolder, "_RACY_NS", 0)


def test_the_next_check_reads_only_the_folders_that_changed(tmp_path, reads, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b")
    buildfolder.check(str(top))
    every = sorted(reads)
    assert len(every) == 1 + 1 + 4 * (1 + 2 + 1 + 1)    # b, host, per lib: itself, obj, 2 cores, pack
    reads.clear()
    buildfolder.check(str(top))
    assert reads == [str(top)]                          # (the record is in it)
    reads.clear()
    (top / "host/lib2/obj/core1/x.o").write_bytes(b"")
    (top / "host/lib3/new").mkdir()
    buildfolder.check(str(top))
    assert sorted(reads) == [str(top), f"{top}/host/lib2/obj/core1", f"{top}/host/lib3",
                             f"{top}/host/lib3/new"]


def test_a_folder_changed_just_before_the_check_is_read_again_by_the_next(tmp_path, reads):
    top = _tree(tmp_path / "b", libs=1)
    buildfolder.check(str(top))
    reads.clear()
    buildfolder.check(str(top))     # (a change right after a check may keep its coarse ctime)
    assert len(reads) == 7
    assert not (top / buildfolder.REMEMBERED).exists()      # (nothing to remember)


def test_a_folder_made_writable_by_others_after_a_remembered_check_is_refused(
        tmp_path, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b")
    for _ in range(2):
        buildfolder.check(str(top))
    inner = top / "host/lib1/obj/core0"
    inner.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a folder in the build folder, {inner} is writable by every"):
        buildfolder.check(str(top))
    inner.chmod(0o755)
    buildfolder.check(str(top))


@as_root
def test_a_link_or_folder_of_another_user_after_a_remembered_check_is_refused(
        tmp_path, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b")
    for _ in range(2):
        buildfolder.check(str(top))
    link = top / "host/lib3/pack/relu.so"
    link.symlink_to("/etc/passwd")
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a symbolic link in the build folder, {link} is owned by uid"):
        buildfolder.check(str(top))
    link.unlink()
    buildfolder.check(str(top))
    theirs = top / "host/lib0/obj/core1"
    os.chown(theirs, NOBODY, NOBODY)        # (its own ctime changes; its folder's does not)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a folder in the build folder, {theirs} is owned by uid"):
        buildfolder.check(str(top))


@as_root
def test_a_subtree_moved_in_whole_is_read(tmp_path, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b")
    for _ in range(2):
        buildfolder.check(str(top))
    elsewhere = tmp_path / "elsewhere" / "deep"
    elsewhere.mkdir(parents=True)
    (elsewhere / "l").symlink_to("/etc")
    os.lchown(elsewhere / "l", NOBODY, NOBODY)
    shutil.rmtree(top / "host/lib2")
    os.rename(tmp_path / "elsewhere", top / "host/lib2")
    with pytest.raises(buildfolder.UnsafeBuildFolder, match="lib2/deep/l is owned by uid"):
        buildfolder.check(str(top))


@pytest.mark.parametrize("record", [b"not json", b"[1, 2]", b'{"": "x"}',
                                    b'{"": [0, 0, 0, 0, ["host"]]}'])
def test_a_record_that_is_not_one_is_ignored(tmp_path, reads, record, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b", libs=1)
    (top / buildfolder.REMEMBERED).write_bytes(record)
    buildfolder.check(str(top))
    assert sorted(reads) == sorted({str(top), f"{top}/host", f"{top}/host/lib0",
                                    f"{top}/host/lib0/obj", f"{top}/host/lib0/obj/core0",
                                    f"{top}/host/lib0/obj/core1", f"{top}/host/lib0/pack"})


def test_a_record_that_is_a_link_is_not_read_and_is_replaced(tmp_path, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b", libs=1)
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    (top / buildfolder.REMEMBERED).symlink_to(victim)
    buildfolder.check(str(top))
    assert victim.read_bytes() == b"mine"
    assert not (top / buildfolder.REMEMBERED).is_symlink()


def test_names_in_the_record_that_lead_out_of_the_folder_are_not_followed(
        tmp_path, reads, monkeypatch):
    _old(monkeypatch)
    top = tmp_path / "b"
    (top / "host").mkdir(parents=True)
    st = os.lstat(top / "host")
    stamp = [st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_nlink]
    (top / buildfolder.REMEMBERED).write_text(json.dumps(
        {"": [0, 0, 0, 0, ["host"]], "host": stamp + [["..", "/etc", "a/../..", "", "."]]}))
    buildfolder.check(str(top))
    assert reads == [str(top)]          # (host's record was trusted, and led nowhere)
