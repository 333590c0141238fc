"""The build folder's check reads again only the folders that changed since
the last one (``gpsimd_build.buildfolder.REMEMBERED``), and that record
never hides what a whole check would refuse. The cases that need another
user run as root and plant as uid 65534 (no account is made)."""

import json
import os
import shutil
import stat
import threading

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
    monkeypatch.setattr(buildfolder, "_RACY_NS", -10**12)


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


def _hiding(top):
    """A record that says ``host`` holds no folder (its stamp as it is now):
    a check that trusted it would look at nothing below ``host``."""
    st = os.lstat(top / "host")
    return json.dumps({"host": [st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_nlink, []]})


def _open_deep(top):
    """A folder deep below ``host`` made writable by every user (``host``'s
    own stamp does not change)."""
    deep = top / "host/lib0/obj/core0"
    deep.chmod(0o777)
    return deep


def test_a_hiding_record_of_ours_is_trusted_so_the_tests_below_can_fail(tmp_path):
    top = _tree(tmp_path / "b", libs=1)
    record = top / buildfolder.REMEMBERED
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, _hiding(top).encode())
    os.close(fd)
    _open_deep(top)
    buildfolder.check(str(top), remember=False)     # (what the record may hide)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_record_others_may_write_is_not_trusted(tmp_path, mode):
    top = _tree(tmp_path / "b", libs=1)
    record = top / buildfolder.REMEMBERED
    record.write_text(_hiding(top))
    record.chmod(mode)
    deep = _open_deep(top)
    with pytest.raises(buildfolder.UnsafeBuildFolder, match=f"^a folder in the build folder, {deep}"):
        buildfolder.check(str(top))


def test_a_record_with_two_names_or_through_a_link_is_not_trusted(tmp_path):
    top = _tree(tmp_path / "b", libs=1)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(_hiding(top))
    elsewhere.chmod(0o600)
    deep = _open_deep(top)
    record = top / buildfolder.REMEMBERED
    for make in (lambda: os.link(elsewhere, record), lambda: record.symlink_to(elsewhere)):
        make()
        with pytest.raises(buildfolder.UnsafeBuildFolder, match=f"a folder in the build folder, {deep}"):
            buildfolder.check(str(top))
        record.unlink()
    assert elsewhere.read_text() == _hiding(top)


@as_root
def test_a_record_of_another_user_is_not_trusted(tmp_path):
    top = _tree(tmp_path / "b", libs=1)
    record = top / buildfolder.REMEMBERED
    record.write_text(_hiding(top))
    record.chmod(0o600)
    os.chown(record, NOBODY, NOBODY)
    deep = _open_deep(top)
    with pytest.raises(buildfolder.UnsafeBuildFolder, match=f"a folder in the build folder, {deep}"):
        buildfolder.check(str(top))


def test_the_record_is_written_0600_and_not_by_a_dry_run(tmp_path, monkeypatch):
    _old(monkeypatch)
    top = _tree(tmp_path / "b", libs=1)
    buildfolder.check(str(top), remember=False)
    assert not (top / buildfolder.REMEMBERED).exists()
    old = os.umask(0)
    try:
        buildfolder.check(str(top))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(top / buildfolder.REMEMBERED).st_mode) == 0o600
    assert sorted(os.listdir(top)) == [buildfolder.REMEMBERED, "host"]     # (no temporary left)


def test_a_fifo_at_the_record_s_name_is_not_waited_for(tmp_path):
    top = _tree(tmp_path / "b", libs=1)
    os.mkfifo(top / buildfolder.REMEMBERED, 0o600)
    done = threading.Event()
    threading.Thread(target=lambda: (buildfolder.check(str(top), remember=False), done.set()),
                     daemon=True).start()
    assert done.wait(60), "the check waits for a writer of the FIFO"


@pytest.mark.parametrize("record", [
    '{"host": [0, 0, 0, 0, ["a\\u0000b"]]}',
    "[" * 100000 + "]" * 100000,
])
def test_a_crafted_record_is_no_record(tmp_path, reads, record, monkeypatch):
    top = _tree(tmp_path / "b", libs=1)
    (top / buildfolder.REMEMBERED).write_text(record)
    buildfolder.check(str(top), remember=False)
    assert len(reads) == 7


def test_a_name_repeated_in_the_record_is_read_once(tmp_path, reads, monkeypatch):
    _old(monkeypatch)
    top = tmp_path / "b"
    (top / "host/a/b/c").mkdir(parents=True)
    stamps = {}
    for rel in ("host", "host/a", "host/a/b"):
        st = os.lstat(top / rel)
        stamps[rel] = [st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_nlink]
    names = {"host": ["a"] * 1000, "host/a": ["b"] * 1000, "host/a/b": ["c"] * 1000}
    (top / buildfolder.REMEMBERED).write_text(json.dumps(
        {rel: stamps[rel] + [names[rel]] for rel in stamps}))
    (top / buildfolder.REMEMBERED).chmod(0o600)
    buildfolder.check(str(top), remember=False)
    assert sorted(reads) == [str(top), f"{top}/host/a/b/c"]
