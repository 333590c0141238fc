"""A build cache (``CACHE_DIR``) never serves an output made from a source
edited while its action ran.

A target's cache key holds its sources' contents as SCons signed them
before the action ran. When an editor saves a source (a reference, a
kernel) while the action runs, the output may hold the edit: pushed under
the key of the content before it, it was later served to any build of
that content (a revert, another clone at that commit) as ``(cached)``,
though a clean build of it fails. ``.gpsimd-outputs`` already leaves such
an output unrecorded (``integrity.read_an_edit``); the cache must not keep
it either.
"""
import os
import pwd
import shutil
import stat

import pytest

from conftest import copy_project, run_scons

FILES = {
    "kernels/rc/rc.cpp": (
        "#include <torch/torch.h>\n\n"
        "torch::Tensor first(const torch::Tensor& x) {\n"
        "    return torch::mul(x, 1.0f);\n"
        "}\n\n"
        "torch::Tensor twice(const torch::Tensor& x) {\n"
        "    return torch::mul(x, 2.0f);\n"
        "}\n"),
    # the first op's reference stands in for an editor: while the test
    # runs (once, when the marker is there) it saves a fix of the second
    # op's reference, before that one loads
    "kernels/rc/first.py": (
        "import os\n\n\n"
        "def first(x):\n"
        "    here = os.path.dirname(__file__)\n"
        "    marker = os.path.join(here, 'EDIT')\n"
        "    if os.path.exists(marker):\n"
        "        os.remove(marker)\n"
        "        with open(os.path.join(here, 'second.py'), 'w') as f:\n"
        "            f.write('def twice(x):\\n    return x * 2\\n')\n"
        "    return x.copy()\n"),
    "kernels/rc/second.py": "def twice(x):\n    return x * 3\n",     # wrong
    "kernels/rc/EDIT": "",
    "rc.yaml": (
        "version: 1\n"
        "libraries:\n"
        "  - name: rc\n"
        "    sources: [kernels/rc/rc.cpp]\n"
        "    ops:\n"
        "      - schema: \"my_ops::first(Tensor x) -> Tensor\"\n"
        "        reference: kernels/rc/first.py:first\n"
        "        vectors:\n"
        "          - name: v\n"
        "            inputs:\n"
        "              x: {dtype: float32, shape: [8], random: {distribution: normal}}\n"
        "      - schema: \"my_ops::twice(Tensor x) -> Tensor\"\n"
        "        reference: kernels/rc/second.py:twice\n"
        "        vectors:\n"
        "          - name: v\n"
        "            inputs:\n"
        "              x: {dtype: float32, shape: [8], random: {distribution: normal}}\n"),
}


def test_an_output_made_while_its_source_was_edited_is_not_cached(tmp_path):
    proj = copy_project(tmp_path / "proj")
    for path, text in FILES.items():
        (proj / path).parent.mkdir(parents=True, exist_ok=True)
        (proj / path).write_text(text)
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    proc = run_scons(proj, "-Q", "MANIFEST=rc.yaml", cache)
    # (the run loaded the fixed reference: it passed)
    assert "rc: 2 passed, 0 failed" in proc.stdout, proc.stdout + proc.stderr
    assert not (proj / "kernels/rc/EDIT").exists()

    # the reference as the build signed it (wrong): a clean build fails
    (proj / "kernels/rc/second.py").write_text(FILES["kernels/rc/second.py"])
    shutil.rmtree(proj / "build")
    proc = run_scons(proj, "-Q", "MANIFEST=rc.yaml", cache)
    assert "Retrieved `build/host/rc/test-results.json' from cache" not in proc.stdout, \
        proc.stdout
    assert proc.returncode != 0, proc.stdout
    assert "rc: 1 passed, 1 failed" in proc.stdout, proc.stdout + proc.stderr


MODES = {
    "kernels/mode/mode.cpp": (
        "#include <torch/torch.h>\n"
        "#define rel 1.0f\n"
        "#define dbg 2.0f\n\n"
        "torch::Tensor plus_mode(const torch::Tensor& x) {\n"
        "    return torch::add(x, MODE);\n"
        "}\n"),
    "kernels/mode/reference.py": "def plus_mode(x):\n    return x + 1\n",
}


def _mode_manifest(mode):
    return ("version: 1\n"
            "libraries:\n"
            "  - name: mode\n"
            "    multicore: false\n"
            "    sources: [kernels/mode/mode.cpp]\n"
            f"    cflags: [-DMODE={mode}]\n"
            "    ops:\n"
            "      - schema: \"my_ops::plus_mode(Tensor x) -> Tensor\"\n"
            "        reference: kernels/mode/reference.py:plus_mode\n"
            "        vectors:\n"
            "          - {name: v, inputs: {x: {dtype: float32, shape: [2], values: [1, 2]}}}\n")


def _modes_project(tmp_path):
    """A copy of the project with the mode library and a manifest for
    each of ``-DMODE=rel`` (its vector passes) and ``-DMODE=dbg`` (fails)."""
    proj = copy_project(tmp_path / "p")
    for path, text in MODES.items():
        (proj / path).parent.mkdir(parents=True, exist_ok=True)
        (proj / path).write_text(text)
    for mode in ("rel", "dbg"):
        (proj / f"{mode}.yaml").write_text(_mode_manifest(mode))
    return proj


#: The mode library's object, below BUILD_DIR.
_MODE_OBJ = "host/mode/obj/kernels/mode/mode.o"


def _entry_of_the_failing_build(tmp_path):
    """(project, cache, the cache entry of the dbg build's object) after a
    rel build (passes) and a dbg build (fails) with one cache."""
    proj = _modes_project(tmp_path)
    cache = tmp_path / "cache"
    rel = run_scons(proj, "-Q", "MANIFEST=rel.yaml", "BUILD_DIR=rel", f"CACHE_DIR={cache}")
    assert rel.returncode == 0, rel.stdout + rel.stderr
    dbg = run_scons(proj, "-Q", "MANIFEST=dbg.yaml", "BUILD_DIR=dbg", f"CACHE_DIR={cache}")
    assert dbg.returncode != 0, dbg.stdout + dbg.stderr
    wrong = (proj / "dbg" / _MODE_OBJ).read_bytes()
    (entry,) = [p for p in cache.glob("*/*") if p.is_file() and p.read_bytes() == wrong]
    return proj, cache, entry


def _clean_failing_build(proj, cache):
    """A clean dbg build with the cache, asserted to build the object (not
    take the entry) and fail as from scratch; its process."""
    shutil.rmtree(proj / "dbg")
    again = run_scons(proj, "-Q", "MANIFEST=dbg.yaml", "BUILD_DIR=dbg", f"CACHE_DIR={cache}")
    assert f"Retrieved `dbg/{_MODE_OBJ}'" not in again.stdout, again.stdout
    assert again.returncode != 0 and again.stdout.splitlines()[-1] == \
        "all libraries: 0 passed, 1 failed", again.stdout + again.stderr
    return again


def test_a_flag_word_equal_to_build_dir_s_name_stays_in_the_key(tmp_path):
    """The key replaced BUILD_DIR's name wherever it stood as a word, so
    ``-DMODE=rel`` built into ``BUILD_DIR=rel`` and ``-DMODE=dbg`` into
    ``BUILD_DIR=dbg`` had one key: the dbg build took the rel build's
    object from the cache and passed (3 of 3), where it fails from
    scratch. Only a path inside BUILD_DIR is relocated now."""
    proj = _modes_project(tmp_path)
    cache = f"CACHE_DIR={tmp_path / 'cache'}"
    rel = run_scons(proj, "-Q", "MANIFEST=rel.yaml", "BUILD_DIR=rel", cache)
    assert rel.returncode == 0 and rel.stdout.splitlines()[-1] == \
        "all libraries: 1 passed, 0 failed", rel.stdout + rel.stderr
    dbg = run_scons(proj, "-Q", "MANIFEST=dbg.yaml", "BUILD_DIR=dbg", cache)
    assert "Retrieved `dbg/host/mode/obj/kernels/mode/mode.o'" not in dbg.stdout, dbg.stdout
    assert dbg.returncode != 0 and [l for l in dbg.stdout.splitlines() if l.startswith("FAIL ")] \
        == ["FAIL mode::plus_mode[v] (dbg.yaml:11:13): 2 of 2 elements differ (rtol=1.3e-06, "
            "atol=1e-05): [0] actual 3 expected 2, [1] actual 4 expected 3; max_abs_err 1"], \
        dbg.stdout


def test_a_cache_entry_every_user_may_write_is_not_taken(tmp_path):
    """The cache's folders are checked (none may be writable by every
    user), its entries were not: a build under ``umask 000`` stores its
    outputs with mode 666 (SCons copies the mode), and then any user of
    the machine, outside the team, could rewrite one in place. Reproduced
    with a second user: the dbg object's entry rewritten with the rel
    object's bytes, a clean dbg build took it and passed (1 of 1), where
    it fails from scratch. Such an entry is not taken now, and named."""
    proj, cache, entry = _entry_of_the_failing_build(tmp_path)
    entry.chmod(0o666)                                  # (as a umask 000 build stores it)
    entry.write_bytes((proj / "rel" / _MODE_OBJ).read_bytes())  # (what anyone could then do)
    again = _clean_failing_build(proj, cache)
    assert (f"scons: the cache entry {entry} is writable by every user (mode 666): anyone "
            f"could have put another output there, so it is not taken (built instead)"
            in again.stderr), again.stderr


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_ccache_s_file_stat_matches_stops_a_build_with_ccache_as_launcher(tmp_path):
    """ccache's sloppiness ``file_stat_matches`` trusts a header whose size
    and times are those it cached: a header replaced by another of the same
    size and time (``cp -p``) was compiled again by the build and ccache
    returned the old header's object, whose test passed where the sources
    fail. A build with ccache as its launcher stops on that setting,
    whether the environment or ccache's configuration file sets it."""
    proj = copy_project(tmp_path / "p")
    conf = tmp_path / "ccache.conf"
    conf.write_text("sloppiness = time_macros, file_stat_matches_ctime, file_stat_matches\n")
    for env in ({"CCACHE_SLOPPINESS": "file_stat_matches"}, {"CCACHE_CONFIGPATH": str(conf)}):
        env["CCACHE_DIR"] = str(tmp_path / "ccache")
        proc = run_scons(proj, "-Q", "CXX_LAUNCHER=ccache", env=env)
        unsafe = ("file_stat_matches" if "CCACHE_SLOPPINESS" in env
                  else "file_stat_matches, file_stat_matches_ctime")
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", (
            f"scons: CXX_LAUNCHER=ccache with ccache's sloppiness {unsafe} (set by "
            "CCACHE_SLOPPINESS or ccache.conf): ccache would hand back the object of a header "
            "replaced by another of the same size and time, which this build compiles again. "
            "Take it out of the sloppiness, or build without CXX_LAUNCHER\n"))
    assert not (proj / "build").exists()
    # the other settings are the user's: a build with them goes on
    proc = run_scons(proj, "-Q", "-n", "CXX_LAUNCHER=ccache",
                     env={"CCACHE_SLOPPINESS": "time_macros", "CCACHE_DIR": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the entry to another user")
def test_a_cache_entry_of_a_user_who_may_not_write_its_folder_is_not_taken(tmp_path):
    """An entry another user put in a cache folder while it was open to
    them (a ``umask 000`` build makes its folders 777) stayed after the
    fix the refusal of that folder says (``chmod o-w``): its mode is 644,
    so a clean dbg build took the rel object it held and passed (1 of 1),
    where it fails from scratch (reproduced with a second user). An entry
    whose owner may not write its folder is not taken now, and named."""
    proj, cache, entry = _entry_of_the_failing_build(tmp_path)
    entry.write_bytes((proj / "rel" / _MODE_OBJ).read_bytes())
    nobody = pwd.getpwnam("nobody")
    os.chown(entry, nobody.pw_uid, nobody.pw_gid)       # (as another user's planted file)
    entry.chmod(0o644)
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o755
    again = _clean_failing_build(proj, cache)
    assert (f"scons: the cache entry {entry} belongs to user nobody, who may not write its "
            f"folder (mode 755, owner root, group root): it was put there while the folder was "
            f"open to them, so it is not taken (built instead)" in again.stderr), again.stderr


def test_a_build_under_umask_000_makes_no_cache_folder_every_user_may_write(tmp_path):
    """SCons makes a cache entry's folder with the build's umask: under
    ``umask 000``, 777, where any user could put entries (and the next
    build refused the whole cache for it). The folders are made 775 at
    most now: the next build takes the entries."""
    proj = _modes_project(tmp_path)
    cache = tmp_path / "cache"
    (proj / "rel").mkdir(mode=0o755)        # (a build folder every user may write is refused)
    old = os.umask(0)
    try:
        first = run_scons(proj, "-Q", "MANIFEST=rel.yaml", "BUILD_DIR=rel", f"CACHE_DIR={cache}")
    finally:
        os.umask(old)
    assert first.returncode == 0, first.stdout + first.stderr
    folders = [p for p in cache.iterdir() if p.is_dir()]
    assert folders and {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o775}
    assert {stat.S_IMODE(p.stat().st_mode) & 0o002 for p in cache.glob("*/*")} == {0}
    shutil.rmtree(proj / "rel")
    again = run_scons(proj, "-Q", "MANIFEST=rel.yaml", "BUILD_DIR=rel", f"CACHE_DIR={cache}")
    assert again.returncode == 0 and "Retrieved `rel/host/mode/obj/kernels/mode/mode.o'" \
        in again.stdout, again.stdout + again.stderr
