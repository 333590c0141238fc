"""Nothing the build writes follows a link it did not make: whole-or-nothing
writes, the build folder's lock, and the build folder itself (owned by
another user, writable by others). The cases that need another user run
as root and plant as uid 65534 with ``setpriv`` (no account is made)."""

import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import ROOT, copy_project, run_scons

from gpsimd_build import buildfolder, buildlock as lock
from gpsimd_device.atomic import umask, write_atomically, write_if_changed


NOBODY = 65534
VICTIM = b"the victim's own bytes\n"

as_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                             reason="needs root and setpriv (util-linux) to act as another user")


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_bytes(VICTIM)
    return path


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path, victim):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(victim)
    write_atomically(str(out / "results.json"), b"{}")
    assert victim.read_bytes() == VICTIM
    assert not (out / "results.json").is_symlink()
    assert (out / "results.json").read_bytes() == b"{}"
    assert sorted(os.listdir(out)) == ["results.json"]      # no temporary file left


def test_a_hard_link_at_the_target_is_replaced_not_written_through(tmp_path, victim):
    target = tmp_path / "plan.json"
    os.link(victim, target)
    write_atomically(str(target), "new")
    assert victim.read_bytes() == VICTIM
    assert target.read_bytes() == b"new" and os.stat(target).st_nlink == 1


def test_write_if_changed_replaces_a_link_even_to_the_same_bytes(tmp_path, victim):
    target = tmp_path / "same.txt"
    target.symlink_to(victim)
    assert write_if_changed(str(target), VICTIM) is True
    assert not target.is_symlink() and target.read_bytes() == VICTIM
    assert write_if_changed(str(target), VICTIM) is False       # now ours: kept as it is


def test_the_written_file_has_the_mode_a_new_file_gets(tmp_path):
    old = os.umask(0o027)
    try:
        assert umask() == 0o027
        write_atomically(str(tmp_path / "f"), b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == 0o640


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    with pytest.raises(TypeError):
        write_atomically(str(tmp_path / "f"), 12345)      # not bytes: the write fails
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_the_lock_refuses_a_planted_link(tmp_path, victim, kind):
    build = tmp_path / "build"
    build.mkdir()
    planted = build / lock.LOCK_NAME
    (planted.symlink_to if kind == "symlink" else lambda v: os.link(v, planted))(victim)
    try:
        with pytest.raises(lock.UnsafeLock, match="which this build did not make"):
            lock.acquire(str(build))
    finally:
        lock.release_all()
    assert victim.read_bytes() == VICTIM


def test_a_folder_of_our_own_is_accepted(tmp_path):
    buildfolder.check(str(tmp_path / "not" / "yet" / "made"))
    (tmp_path / "b").mkdir()
    buildfolder.check(str(tmp_path / "b"))


def test_a_folder_writable_by_others_is_refused_unless_sticky_above_it(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder) as err:
        buildfolder.check(str(shared / "build"))
    assert str(err.value).startswith(f"the folder above the build folder, {shared} is "
                                     f"writable by every user (mode 777)")
    assert f"chmod o-w {shared}" in str(err.value)
    shared.chmod(0o1777)                # /tmp's mode: others cannot replace our entries...
    buildfolder.check(str(shared / "build"))
    # ...but they can make new ones: the build folder itself may not be so
    with pytest.raises(buildfolder.UnsafeBuildFolder, match=r"^the build folder .* is "
                       r"writable by every user \(mode 1777\)"):
        buildfolder.check(str(shared))


def test_a_file_as_build_folder_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(buildfolder.UnsafeBuildFolder, match="is not a folder"):
        buildfolder.check(str(tmp_path / "f"))


def test_a_folder_inside_the_build_folder_writable_by_others_is_refused(tmp_path):
    inner = tmp_path / "b" / "host" / "relu"
    inner.mkdir(parents=True)
    buildfolder.check(str(tmp_path / "b"))
    inner.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a folder in the build folder, {inner} is writable by every"):
        buildfolder.check(str(tmp_path / "b"))


@as_root
def test_a_folder_owned_by_another_user_is_refused_and_so_is_one_above(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "mine").mkdir(parents=True)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder) as err:
        buildfolder.check(str(theirs))
    assert str(err.value).startswith(f"the build folder {theirs} is owned by uid {NOBODY}")
    assert "not by you (uid 0" in str(err.value)
    with pytest.raises(buildfolder.UnsafeBuildFolder, match=f"^the folder above the build "
                       f"folder, {theirs} is owned by uid {NOBODY}"):
        buildfolder.check(str(theirs / "mine"))     # they could rename it away


@as_root
def test_links_and_folders_of_another_user_on_the_way_or_inside_are_refused(tmp_path):
    mine = tmp_path / "mine"
    (mine / "host").mkdir(parents=True)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    # a link another user owns, to a folder of ours: they could point it elsewhere
    link = theirs / "l"
    link.symlink_to(mine)
    os.lchown(link, NOBODY, NOBODY)
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "l").symlink_to(mine)
    os.lchown(sticky / "l", NOBODY, NOBODY)
    for planted in (link, sticky / "l"):
        with pytest.raises(buildfolder.UnsafeBuildFolder,
                           match=f"^the build folder, a symbolic link, {planted} is owned by"):
            buildfolder.check(str(planted))
    # a folder of theirs inside ours, and a link of theirs inside ours
    os.chown(mine / "host", NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a folder in the build folder, {mine}/host is owned by"):
        buildfolder.check(str(mine))
    os.chown(mine / "host", 0, 0)
    (mine / "host" / "obj").symlink_to(tmp_path)
    os.lchown(mine / "host" / "obj", NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a symbolic link in the build folder, {mine}/host/obj is owned"):
        buildfolder.check(str(mine))


def _planted_by_another_user():
    """A folder ``/tmp/<random>/shared_build`` that uid 65534 owns, with
    their ``.gpsimd-lock`` symlink to a root-owned victim next to it.
    Returns (top, build, victim)."""
    top = tempfile.mkdtemp(prefix="gpsimd-planted-", dir="/tmp")
    os.chmod(top, 0o755)
    victim = os.path.join(top, "victim.txt")
    with open(victim, "wb") as f:
        f.write(VICTIM)
    build = os.path.join(top, "shared_build")
    os.mkdir(build)
    os.chown(build, NOBODY, NOBODY)
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    "ln", "-s", victim, os.path.join(build, ".gpsimd-lock")], check=True)
    assert os.lstat(os.path.join(build, ".gpsimd-lock")).st_uid == NOBODY
    return top, build, victim


@pytest.mark.slow        # (runs SCons)
@as_root
def test_scons_as_root_refuses_a_build_folder_another_user_planted_a_link_in():
    top, build, victim = _planted_by_another_user()
    try:
        proc = run_scons(ROOT, f"BUILD_DIR={build}", "-n", timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (f"scons: the build folder {build} is owned by uid {NOBODY}"
                in proc.stderr), proc.stderr
        proc = run_scons(ROOT, f"BUILD_DIR={build}", timeout=120)
        assert proc.returncode == 2 and "is owned by uid" in proc.stderr
        with open(victim, "rb") as f:
            assert f.read() == VICTIM
        assert sorted(os.listdir(build)) == [".gpsimd-lock"]        # nothing written there
    finally:
        shutil.rmtree(top)


@pytest.mark.slow        # (runs SCons)
@as_root
def test_every_spelling_of_build_dir_is_checked_and_the_project_is_no_build_folder(tmp_path):
    """'#name' is SCons's spelling of the project's name/: checked as such;
    BUILD_DIR=. (or a folder above the project) is refused."""
    proj = copy_project(tmp_path / "p")
    (proj / "theirs").mkdir()
    os.chown(proj / "theirs", NOBODY, NOBODY)
    for spelling in ("theirs", "#theirs", "./theirs", str(proj / "theirs")):
        proc = run_scons(proj, f"BUILD_DIR={spelling}", "-n", timeout=120)
        assert proc.returncode == 2, (spelling, proc.stdout + proc.stderr)
        assert "is owned by uid 65534" in proc.stderr, (spelling, proc.stderr)
    for spelling in (".", "#", "..", str(proj)):
        proc = run_scons(proj, f"BUILD_DIR={spelling}", "-n", timeout=120)
        assert proc.returncode == 2, (spelling, proc.stdout + proc.stderr)
        assert "holds the project's folder" in proc.stderr, (spelling, proc.stderr)
    assert os.listdir(proj / "theirs") == []


#: A site_init.py for a copied project: another user wins the race at its
#: worst moment, making the build folder, with a cached manifest that runs
#: code when it is read, just after the build's check of a folder that was
#: not there.
_RACE = """
import os, pickle
from gpsimd_build import buildfolder

class _Evil:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))

_check = buildfolder.check

def _check_then_plant(build_dir, inside=True, remember=True):
    _check(build_dir, inside, remember)
    if not os.path.lexists(build_dir):
        os.mkdir(build_dir)
        with open(os.path.join(build_dir, ".gpsimd-manifest"), "wb") as f:
            pickle.dump(_Evil(), f)
        with open(os.path.join(build_dir, ".sconsign.dblite"), "wb") as f:
            pickle.dump(_Evil(), f)
        for name in ("", ".gpsimd-manifest", ".sconsign.dblite"):
            os.chown(os.path.join(build_dir, name), {nobody}, {nobody})

buildfolder.check = _check_then_plant
"""


@pytest.mark.slow        # (runs SCons)
@as_root
@pytest.mark.parametrize("mode", [(), ("-n",), ("-h",), ("-c",)])
def test_a_build_folder_another_user_makes_after_the_check_is_never_read(tmp_path, mode):
    """Nothing is read from a folder that was not there when it was checked;
    a build that writes makes its folder itself and checks it again, so a
    folder another user made in between stops it."""
    proj = copy_project(tmp_path / "p")
    marker = tmp_path / "their-code-ran"
    site_init = proj / "site_scons" / "site_init.py"
    site_init.write_text((site_init.read_text() if site_init.exists() else "")
                         + _RACE.format(marker=str(marker), nobody=NOBODY))
    proc = run_scons(proj, "BUILD_DIR=build", *mode, "relu", timeout=600)
    assert not marker.exists(), proc.stdout + proc.stderr
    if mode in ((), ("-n",)):
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"scons: the build folder {proj / 'build'} is owned by uid {NOBODY}" \
            in proc.stderr, proc.stderr
        assert sorted(os.listdir(proj / "build")) == [".gpsimd-manifest", ".sconsign.dblite"]


def test_a_cache_folder_every_user_may_write_is_refused(tmp_path):
    """Everyone who may write a shared cache is trusted with every build
    that reads it: one that every user may write, at its top or in the
    folders SCons stores its entries in, is refused; a group's is not."""
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    cache.chmod(0o2775)
    buildfolder.check_cache(str(cache))
    for folder in (cache / "ab", cache):
        folder.chmod(0o1777)
        with pytest.raises(buildfolder.UnsafeBuildFolder,
                           match=f"^the cache folder {folder} is writable by every user "
                                 f"\\(mode 1777\\)"):
            buildfolder.check_cache(str(cache))


@pytest.mark.slow        # (runs SCons)
def test_scons_refuses_a_cache_every_user_may_write(tmp_path):
    proj = copy_project(tmp_path / "p")
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    proc = run_scons(proj, f"CACHE_DIR={cache}", "-n", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"scons: the cache folder {cache} is writable by every user "
                                  f"(mode 777)"), proc.stderr


def test_a_link_to_nothing_yet_is_checked_where_it_would_lead(tmp_path):
    """A build folder that is a symbolic link to a folder not made yet is
    checked from the first folder that exists on the way (it raised
    FileNotFoundError, a traceback)."""
    (tmp_path / "l").symlink_to(tmp_path / "no" / "such")
    buildfolder.check(str(tmp_path / "l"))
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    (tmp_path / "m").symlink_to(tmp_path / "open" / "build")
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder above the build folder, {tmp_path / 'open'} is "
                             "writable by every user"):
        buildfolder.check(str(tmp_path / "m"))


def test_a_cache_every_user_may_replace_is_refused(tmp_path):
    """A cache of mode 755 in a folder every user may write without the
    sticky bit: another user renamed it away and put a copy in its place
    that held a good object under a broken kernel's key, and the build
    trusted it (PASS, where a build from scratch fails). A folder just
    inside the cache that is a link to a folder every user may write was
    not looked at either. Both are refused now; a sticky folder on the way
    (/tmp) is not."""
    shared = tmp_path / "shared"
    cache = shared / "cache"
    (cache / "ab").mkdir(parents=True)
    shared.chmod(0o1777)
    buildfolder.check_cache(str(cache))
    shared.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder {shared}, on the way to the cache folder {cache}, is "
                             f"writable by every user without the sticky bit \\(mode 777\\)"):
        buildfolder.check_cache(str(cache))
    shared.chmod(0o755)
    # an entry folder that is a link: judged where it leads, and its way
    open_dir = tmp_path / "open"
    (open_dir / "cd").mkdir(parents=True)
    (cache / "cd").symlink_to(open_dir / "cd")
    buildfolder.check_cache(str(cache))
    (open_dir / "cd").chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the cache folder {cache / 'cd'} is writable by every user "
                             f"\\(mode 777\\)"):
        buildfolder.check_cache(str(cache))
    (open_dir / "cd").chmod(0o755)
    open_dir.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder {open_dir}, on the way to the cache folder "
                             f"{cache / 'cd'}, is writable by every user without the sticky bit"):
        buildfolder.check_cache(str(cache))


def test_a_link_on_the_way_to_the_cache_is_checked_where_it_stands(tmp_path):
    """``CACHE_DIR=/pub/link/cache`` with ``/pub`` open to all (no sticky
    bit) and the link to a folder of mode 755: the way was walked only as
    the link resolved, so the check passed, and anyone could point the
    link at a cache of their own (found in review)."""
    pub, team = tmp_path / "pub", tmp_path / "team"
    (team / "cache").mkdir(parents=True)
    pub.mkdir()
    (pub / "link").symlink_to(team)
    pub.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder {pub}, on the way to the cache folder "
                             f"{pub / 'link' / 'cache'}, is writable by every user without "
                             f"the sticky bit"):
        buildfolder.check_cache(str(pub / "link" / "cache"))
    pub.chmod(0o1777)
    buildfolder.check_cache(str(pub / "link" / "cache"))


def test_a_link_within_a_link_on_the_cache_s_way_is_checked(tmp_path):
    """``home/l1 -> open/l2 -> team`` with ``open`` open to all without
    the sticky bit: only the way as written and as resolved were walked,
    so the folder that holds the second link was never looked at (found
    in review)."""
    home, open_dir, team = tmp_path / "home", tmp_path / "open", tmp_path / "team"
    for d in (home, open_dir, team / "cache"):
        d.mkdir(parents=True)
    (open_dir / "l2").symlink_to(team)
    (home / "l1").symlink_to(open_dir / "l2")
    buildfolder.check_cache(str(home / "l1" / "cache"))
    open_dir.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder {open_dir}, on the way to the cache folder "
                             f"{home / 'l1' / 'cache'}, is writable by every user"):
        buildfolder.check_cache(str(home / "l1" / "cache"))


def test_a_link_another_user_owns_inside_the_target_of_a_link_of_ours_is_refused(tmp_path):
    """``mine/b -> theirs/l/build``, ``theirs/l -> real`` of another user:
    only our link and where it leads were checked, so the other user could
    point the build, between two builds, at a folder of their own (found
    by an attack: a depfile written through a link they planted)."""
    mine, theirs, real = tmp_path / "mine", tmp_path / "theirs", tmp_path / "real"
    for d in (mine, theirs, real / "build"):
        d.mkdir(parents=True)
    (theirs / "l").symlink_to(real)
    (mine / "b").symlink_to(theirs / "l" / "build")
    buildfolder.check(str(mine / "b"))
    os.lchown(theirs / "l", NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^a symbolic link on the way to the build folder {mine / 'b'}, "
                             f"{theirs / 'l'} is owned by uid {NOBODY}"):
        buildfolder.check(str(mine / "b"))
    # the folder that holds it: they could replace our own link there
    os.lchown(theirs / "l", 0, 0)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder above the build folder, {theirs} is owned by uid {NOBODY}"):
        buildfolder.check(str(mine / "b"))


def test_a_folder_a_link_passes_through_and_leaves_by_dotdot_is_checked(tmp_path):
    """``mine/b -> theirs/x/../../real/build``: the resolution passes
    through ``theirs/x`` and leaves it, so neither the links' holders nor
    the real path named it, and its owner could swap ``x`` for a link
    between the check and the build (found in review); likewise a folder
    every user may write without the sticky bit."""
    mine, theirs, real, open_dir = (tmp_path / n for n in ("mine", "theirs", "real", "open"))
    for d in (mine, theirs / "x", real / "build", open_dir / "x"):
        d.mkdir(parents=True)
    (mine / "b").symlink_to(f"{theirs}/x/../../real/build")
    (mine / "o").symlink_to(f"{open_dir}/x/../../real/build")
    for link in ("b", "o"):
        buildfolder.check(str(mine / link))
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder above the build folder, {theirs} is owned by uid {NOBODY}"):
        buildfolder.check(str(mine / "b"))
    open_dir.chmod(0o777)
    with pytest.raises(buildfolder.UnsafeBuildFolder,
                       match=f"^the folder above the build folder, {open_dir} is writable by every user"):
        buildfolder.check(str(mine / "o"))


def test_a_link_to_nothing_yet_gets_its_target_made_by_the_build(tmp_path):
    """``mine/dl -> pub/nb`` in a sticky folder every user may write:
    ``make`` made nothing (the link exists), so whoever made ``pub/nb``
    first, after the check, owned the build folder (found in review)."""
    mine, pub = tmp_path / "mine", tmp_path / "pub"
    mine.mkdir()
    pub.mkdir()
    pub.chmod(0o1777)
    (mine / "dl").symlink_to(pub / "nb" / "build")
    buildfolder.make(str(mine / "dl"))
    assert (pub / "nb" / "build").is_dir() and (pub / "nb").stat().st_uid == os.geteuid()
    buildfolder.check(str(mine / "dl"))


class _Runs:
    """A pickle that runs code when it is loaded: it makes ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_record_the_build_unpickles_is_read_only_when_no_one_else_could_write_it(tmp_path):
    """The manifest cache, the .sconsign database and the outputs' record
    are pickles in the build folder: a group member (a folder made g+w by
    umask 002) replaced one and ran code as the builder, root included
    (found in review). Each is written 0600 and read only when it is a
    file of the builder's that no one else may write."""
    import pickle
    from site_tools.gpsimd_tool import integrity, manifest_cache, sconsign
    mark = tmp_path / "ran"
    build = tmp_path / "build"
    build.mkdir()
    paths = {"manifest": build / manifest_cache.CACHE_NAME,
             "sconsign": build / ".sconsign.dblite",
             "integrity": build / integrity.RECORD_NAME}

    def load(which):
        if which == "manifest":
            return manifest_cache.load(str(build), "ops.yaml")
        if which == "sconsign":
            return sconsign.Database(str(paths[which]), "r")
        return integrity.OutputRecord(str(build))

    for which, path in paths.items():
        for owner, mode in ((NOBODY, 0o644), (os.geteuid(), 0o664), (os.geteuid(), 0o646)):
            path.write_bytes(pickle.dumps(_Runs(mark)))
            os.chown(path, owner, -1)
            path.chmod(mode)
            load(which)
            assert not mark.exists(), (which, owner, oct(mode))
        path.unlink()
    # ours, 0600: read (and a real record round-trips)
    db = sconsign.Database(str(paths["sconsign"]), "c")
    db["k"] = b"v"
    db.sync()
    assert stat.S_IMODE(paths["sconsign"].stat().st_mode) == 0o600
    assert dict(sconsign.Database(str(paths["sconsign"]), "r")) == {"k": b"v"}


def test_a_cache_entry_is_stored_without_write_access_for_others(tmp_path, monkeypatch):
    """SCons copies an output's mode into the cache: one a build under
    ``umask 000`` made (666) was an entry any user could rewrite."""
    import types

    monkeypatch.syspath_prepend(str(ROOT / "site_scons" / "site_tools"))
    from gpsimd_tool.cache import RelocatableCacheDir
    src, dst = tmp_path / "out.o", tmp_path / "entry"
    src.write_bytes(b"object")
    src.chmod(0o666)
    env = types.SimpleNamespace(fs=types.SimpleNamespace(copy2=shutil.copy2))
    RelocatableCacheDir.copy_to_cache(env, str(src), str(dst))
    assert (dst.read_bytes(), dst.stat().st_mode & 0o777) == (b"object", 0o664)
