"""Every header a compile read becomes its object's dependency: the
compiler's depfile read (gpsimd_build.depfile), the include folders and
forced files of a library's cflags (gpsimd_build.cflags), and the compile
builder's target scanner (site_tools/gpsimd_tool/depfiles.py), with exact
node sets."""

import os

import pytest
import SCons.Environment
import SCons.Node
import SCons.Node.FS

from gpsimd_build.cflags import named_inputs
from gpsimd_build.depfile import MAX_DEPFILE_BYTES, prerequisites, read_prerequisites
from gpsimd_build.profiles import HostProfile, XtensaProfile
from site_tools.gpsimd_tool import builders, depfiles


# ---- the depfile's format ------------------------------------------------------

def test_a_gcc_depfile_gives_every_prerequisite_in_order():
    text = ("build/host/x/obj/k.o: kernels/x/k.cpp /usr/include/stdc-predef.h \\\n"
            " runtime_model/include/torch/torch.h \\\n"
            " kernels/x/factor.h\n")
    assert prerequisites(text) == ["kernels/x/k.cpp", "/usr/include/stdc-predef.h",
                                   "runtime_model/include/torch/torch.h", "kernels/x/factor.h"]


def test_escapes_are_undone_as_gcc_writes_them():
    # a space (its backslashes doubled before it), '#', '$'
    text = ("o.o: a\\ b.h c\\\\\\ d.h e\\#f.h g$$h.h tab\\\tx.h plain\\dir.h\r\n")
    assert prerequisites(text) == ["a b.h", "c\\ d.h", "e#f.h", "g$h.h", "tab\tx.h",
                                   "plain\\dir.h"]


def test_mp_phony_rules_and_repeats_add_nothing():
    text = ("o.o: k.cpp h1.h \\\r\n h2.h h1.h\n\nh1.h:\n\nh2.h:\n")
    assert prerequisites(text) == ["k.cpp", "h1.h", "h2.h"]


def test_lines_without_a_rule_are_ignored():
    assert prerequisites("") == []
    assert prerequisites("no rule here\n") == []


def test_a_missing_or_oversized_depfile_reads_as_none(tmp_path):
    assert read_prerequisites(str(tmp_path / "none.d")) is None
    big = tmp_path / "big.d"
    big.write_bytes(b"o.o: " + b"x" * MAX_DEPFILE_BYTES)
    assert read_prerequisites(str(big)) is None
    ok = tmp_path / "ok.d"
    ok.write_bytes(b"o.o: k.cpp \\\n h.h\n")
    assert read_prerequisites(str(ok)) == ["k.cpp", "h.h"]


def test_each_profile_says_where_its_compile_writes_the_depfile():
    assert HostProfile().depfile("build/host/x/obj/k.o") == "build/host/x/obj/k.o.d"
    assert XtensaProfile().depfile("build/xtensa/x/obj/k.o") == "build/xtensa/x/obj/k.d"
    flags = HostProfile().construction_vars("/top", "build")["GPSIMD_DEPFLAGS"]
    assert flags == ["-MD", "-MF", "${TARGET}.d"]


# ---- what a library's cflags name ---------------------------------------------

def test_cflags_name_include_folders_in_search_order_and_forced_files():
    flags = ["-O1", "-isystem", "sys", "-Ione", "-I", "two", "-iquote", "q",
             "-idirafter", "late", "-include", "kernels/x/forced.h", "--imacros=m.h",
             "-imacros", "n.h", "--include=f2.h", "-isystemsys2", "-DX=1"]
    assert named_inputs(flags) == (["q", "one", "two"], ["sys", "sys2", "late"],
                                   ["kernels/x/forced.h", "f2.h", "m.h", "n.h"])


def test_a_flag_without_its_argument_names_nothing():
    assert named_inputs(["-include"]) == ([], [], [])
    assert named_inputs(["-I"]) == ([], [], [])


# ---- the compile's target scanner ---------------------------------------------

@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    SCons.Node.FS.default_fs = None
    e = SCons.Environment.Environment(tools=[])
    builders.add_builders(e)
    e[depfiles.VARIABLE] = depfiles.Depfiles(e, HostProfile().depfile, str(tmp_path), "build")
    for path in ("kernels/x/k.cpp", "kernels/x/factor.h", "kernels/x/forced.h",
                 "runtime_model/include/torch/torch.h", "build/host/gen/gen.h"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("//\n")
    return e


def _object(env, tmp_path, depfile_text=None):
    obj = env.GpsimdObject("build/host/x/obj/k.o", "kernels/x/k.cpp")[0]
    obj.add_dependency([env.File("kernels/x/forced.h")])      # (a -include, known at once)
    if depfile_text is not None:
        (tmp_path / "build/host/x/obj").mkdir(parents=True, exist_ok=True)
        (tmp_path / "build/host/x/obj/k.o.d").write_text(depfile_text)
    return obj


DEPFILE = ("build/host/x/obj/k.o: kernels/x/k.cpp /usr/include/stdc-predef.h \\\n"
           " kernels/x/forced.h runtime_model/include/torch/../torch/torch.h \\\n"
           " /usr/include/c++/12/cstddef kernels/x/factor.h {top}/build/host/gen/gen.h\n")


def test_the_scanner_returns_the_depfile_s_files_in_the_project_and_build_folder(env, tmp_path):
    obj = _object(env, tmp_path, DEPFILE.format(top=tmp_path))
    found = depfiles.SCANNER(obj, env)
    assert [n.path for n in found] == ["runtime_model/include/torch/torch.h",
                                       "kernels/x/factor.h", "build/host/gen/gen.h"]
    obj.scan()
    assert {c.path for c in obj.children()} == {
        "kernels/x/k.cpp", "kernels/x/forced.h", "runtime_model/include/torch/torch.h",
        "kernels/x/factor.h", "build/host/gen/gen.h"}


def test_without_a_depfile_the_scanner_adds_nothing(env, tmp_path):
    obj = _object(env, tmp_path)
    assert depfiles.SCANNER(obj, env) == []
    obj.scan()
    assert {c.path for c in obj.children()} == {"kernels/x/k.cpp", "kernels/x/forced.h"}


def test_on_the_ninja_path_the_scanner_leaves_the_depfile_to_ninja(env, tmp_path):
    env[depfiles.VARIABLE].scan = False
    obj = _object(env, tmp_path, DEPFILE.format(top=tmp_path))
    assert depfiles.SCANNER(obj, env) == []


def test_unseen_names_what_a_compile_read_beyond_its_dependencies(env, tmp_path):
    obj = _object(env, tmp_path)
    obj.scan()                     # (judged without a depfile: its first build)
    (tmp_path / "build/host/x/obj").mkdir(parents=True, exist_ok=True)
    (tmp_path / "build/host/x/obj/k.o.d").write_text(DEPFILE.format(top=tmp_path))
    assert depfiles.unseen(obj) == []            # (not built in this run)
    obj.set_state(SCons.Node.executed)
    assert depfiles.unseen(obj) == [os.path.join(str(tmp_path), p) for p in (
        "runtime_model/include/torch/torch.h", "kernels/x/factor.h", "build/host/gen/gen.h")]
    obj.implicit = None            # (the next build: judged with the depfile)
    obj.scan()
    assert depfiles.unseen(obj) == []
