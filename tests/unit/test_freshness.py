"""The record of what a library's objects were built from
(gpsimd_build.freshness): written, merged, read back, and what makes a
library stale named: its manifest entry, a changed or missing file."""

import dataclasses
import hashlib
import json
import shutil
import os
import re

import pytest

from gpsimd_build import freshness
from gpsimd_build.manifest import load_manifest
from gpsimd_build.manifest.model import Library, Location, Op


def _lib(name="relu", **changes):
    loc = Location("ops.yaml", 1, 1)
    op = Op(name="relu_forward", schema=None, schema_text="my_ops::relu_forward(Tensor x) -> Tensor",
            stack_size=8192, vectors=(), location=loc)
    lib = Library(name=name, multicore=False, sources=("k.cpp",), includes=(), cflags=(),
                  ops=(op,), location=loc, manifest="ops.yaml")
    return dataclasses.replace(lib, **changes)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """(update_record reads the files, relative to the working directory)"""
    monkeypatch.chdir(tmp_path)


def _stats(tmp_path, *names):
    return freshness.stat_files(names, root=str(tmp_path))


def test_each_file_once_with_size_and_nanosecond_time(tmp_path):
    (tmp_path / "b.cpp").write_text("int b;\n")
    (tmp_path / "a.h").write_text("#define A 1\n")
    os.utime(tmp_path / "a.h", ns=(1, 1_733_000_000_123_456_789))
    path = tmp_path / "inputs.json"
    stats = _stats(tmp_path, "a.h", "b.cpp", "gone.h")
    freshness.update_record(str(path), {"l1": ("k1", ["b.cpp", "a.h", "gone.h"]),
                                        "l2": ("k2", ["a.h"])}, stats)
    b = (tmp_path / "b.cpp").stat().st_mtime_ns
    sha = {n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("a.h", "b.cpp")}
    assert json.loads(path.read_text()) == {
        "format": 4, "files": {"a.h": [12, 1_733_000_000_123_456_789, sha["a.h"]],
                               "b.cpp": [7, b, sha["b.cpp"]]},
        "libraries": {"l1": {"key": "k1", "files": ["a.h", "b.cpp"]},
                      "l2": {"key": "k2", "files": ["a.h"]}}}


def test_update_keeps_other_libraries_and_writes_only_on_change(tmp_path):
    for name in ("k.cpp", "s.cpp"):
        (tmp_path / name).write_text(name)
    path = str(tmp_path / "inputs.json")
    freshness.update_record(path, {"relu": ("a", ["k.cpp"]), "spmd": ("b", ["s.cpp"])},
                            _stats(tmp_path, "k.cpp", "s.cpp"))
    (tmp_path / "k.cpp").write_text("longer")
    freshness.update_record(path, {"relu": ("a", ["k.cpp"])}, _stats(tmp_path, "k.cpp"))
    doc = json.loads(open(path).read())
    assert doc["libraries"] == {"relu": {"key": "a", "files": ["k.cpp"]},
                                "spmd": {"key": "b", "files": ["s.cpp"]}}
    assert doc["files"]["k.cpp"][0] == 6 and doc["files"]["s.cpp"][0] == 5
    os.utime(path, ns=(1, 1))
    freshness.update_record(path, {"spmd": ("b", ["s.cpp"])}, _stats(tmp_path, "s.cpp"))
    assert os.stat(path).st_mtime_ns == 1      # the same text: not rewritten


def test_the_stats_given_are_recorded_not_the_files_as_they_are_at_the_end(tmp_path):
    """The build passes the size and time SCons saw when it read a file; an
    edit made after that (while the build ran) makes the library stale."""
    (tmp_path / "k.cpp").write_text("int k;\n")
    seen = _stats(tmp_path, "k.cpp")
    (tmp_path / "k.cpp").write_text("int k = 2;\n")          # edited during the build
    path = str(tmp_path / "inputs.json")
    lib = _lib()
    freshness.update_record(path, {"relu": (freshness.library_key(lib), ["k.cpp"])}, seen)
    assert freshness.stale_input(freshness.read_record(path), lib, str(tmp_path)) == \
        "k.cpp changed since"
    # an edit of the same size: no digest is recorded (the file is not as
    # the build saw it), so it is stale by its time alone
    (tmp_path / "k.cpp").write_text("int k;\n")
    seen = _stats(tmp_path, "k.cpp")
    (tmp_path / "k.cpp").write_text("int j;\n")
    os.unlink(path)
    freshness.update_record(path, {"relu": (freshness.library_key(lib), ["k.cpp"])}, seen)
    assert json.loads(open(path).read())["files"]["k.cpp"][2] is None
    assert freshness.stale_input(freshness.read_record(path), lib, str(tmp_path)) == \
        "k.cpp changed since"


def test_a_tree_that_travelled_is_current_by_content_and_an_edit_is_not(tmp_path):
    """Issue 29: a built tree copied elsewhere (new times, the same bytes)
    is current; there an edit that keeps the size is stale; a digest is
    computed once per size and time (an entry recorded again keeps it)."""
    a = tmp_path / "a"
    a.mkdir()
    (a / "k.cpp").write_text("int k;\n")
    os.utime(a / "k.cpp", ns=(1, 1_000_000_000))
    lib = _lib()
    freshness.update_record(str(a / "inputs.json"), {"relu": (freshness.library_key(lib),
                                                              ["k.cpp"])}, _stats(a, "k.cpp"), str(a))
    b = tmp_path / "b"
    shutil.copytree(a, b)              # (not copy2's times: the copy has new ones)
    for f in b.iterdir():
        os.utime(f, ns=(2, 2_000_000_000))
    record = freshness.read_record(str(b / "inputs.json"))
    assert freshness.stale_input(record, lib, str(b)) is None
    (b / "k.cpp").write_text("int j;\n")
    assert freshness.stale_input(record, lib, str(b)) == "k.cpp changed since"
    # recorded again with the same size and time: the old digest is kept,
    # not read again (here the file no longer has them)
    freshness.update_record(str(a / "inputs.json"), {"relu": (freshness.library_key(lib),
                                                              ["k.cpp"])}, {"k.cpp": (7, 1)}, str(a))
    entry = json.loads((a / "inputs.json").read_text())["files"]["k.cpp"]
    assert entry == [7, 1, None]
    before = json.loads((b / "inputs.json").read_text())["files"]["k.cpp"]
    freshness.update_record(str(b / "inputs.json"), {"relu": (freshness.library_key(lib),
                                                              ["k.cpp"])}, {"k.cpp": tuple(before[:2])}, str(b))
    assert json.loads((b / "inputs.json").read_text())["files"]["k.cpp"] == before


def test_stale_input_names_the_entry_or_the_first_changed_or_missing_file(tmp_path):
    (tmp_path / "k.cpp").write_text("int k;\n")
    (tmp_path / "h.h").write_text("#define H\n")
    path = str(tmp_path / "inputs.json")
    lib = _lib()
    freshness.update_record(path, {"relu": (freshness.library_key(lib), ["k.cpp", "h.h"])},
                            _stats(tmp_path, "k.cpp", "h.h"))
    record = freshness.read_record(path)
    root = str(tmp_path)
    assert freshness.stale_input(record, lib, root) is None
    assert freshness.stale_input(record, _lib("other"), root) == \
        "no record of what its objects were built from"
    for change in ({"cflags": ("-DBUG",)}, {"includes": ("inc",)}, {"sources": ("k2.cpp",)},
                   {"multicore": True}, {"shape_sources": ("shape.cpp",)}):
        assert freshness.stale_input(record, _lib(**change), root) == \
            "its manifest entry (sources, includes, cflags or ops) changed since", change
    renamed = dataclasses.replace(lib.ops[0], kernel="relu_compute")
    assert freshness.stale_input(record, _lib(ops=(renamed,)), root).startswith("its manifest")
    st = (tmp_path / "k.cpp").stat()
    os.utime(tmp_path / "k.cpp", ns=(st.st_atime_ns, st.st_mtime_ns + 1))   # touched only
    assert freshness.stale_input(record, lib, root) is None                # (same bytes)
    (tmp_path / "k.cpp").write_text("int k;\n\n")
    assert freshness.stale_input(record, lib, root) == "k.cpp changed since"
    (tmp_path / "h.h").unlink()
    assert freshness.stale_input(record, lib, root) == "h.h is gone since"


def test_a_damaged_or_foreign_record_vouches_for_nothing(tmp_path):
    path = tmp_path / "inputs.json"
    for text in ("{", "[]", '{"format": 3, "files": {}, "libraries": {}}', '{"format": 4}',
                 '{"format": 4, "files": {"a": [1, 2]}, "libraries": {"l": {"key": "k", "files": ["a"]}}}',
                 '{"format": 4, "files": {}, "libraries": {"l": {"key": "k", "files": ["a"]}}}',
                 '{"format": 4, "files": {}, "libraries": {"l": ["a"]}}'):
        path.write_text(text)
        record = freshness.read_record(str(path))
        assert record.files == {} and record.libraries == {}, text
    assert freshness.read_record(str(tmp_path / "missing.json")).libraries == {}


_MANIFEST = """\
version: 1
libraries:
  - name: relu
    sources: [k.cpp]
    ops:
      - schema: "my_ops::neg(Tensor x) -> Tensor"
        reference: ref.py:neg
        vectors:
          - name: n3
            inputs:
              x: {dtype: float32, shape: [3], random: {distribution: normal}}
"""


def test_identity_is_of_contents_not_of_times_or_the_build_folder(tmp_path):
    """``identity``: what a run tests (gpsimd_pytest.merge compares it
    across shards). One build in another BUILD_DIR, with other times and
    plans that name its objects there, has the same; an object, a recorded
    key, a reference or a vector changed gives another; a digest the
    record lacks is the file's as it is now."""
    def build(folder, obj=b"\x7fELF one", mtime=1):
        files = {"k.cpp": b"int k;\n", f"{folder}/host/relu/relu.packed.so": obj,
                 f"{folder}/host/relu/testplan.json": f'{{"object": "{folder}"}}'.encode(),
                 f"{folder}/host/emu/gpsimd-zygote": b"zygote"}
        recorded = {}
        for path, data in files.items():
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_bytes(data)
            recorded[path] = (len(data), mtime, hashlib.sha256(data).hexdigest())
        return freshness.Record(recorded, {
            "relu": ("key", sorted(p for p in files if "zygote" not in p)),
            freshness.ZYGOTE_ENTRY: (freshness.ZYGOTE_ENTRY,
                                     [f"{folder}/host/emu/gpsimd-zygote"])})

    def identity(record, folder, manifest=_MANIFEST):
        (tmp_path / "ops.yaml").write_text(manifest)
        lib = load_manifest("ops.yaml", root=str(tmp_path)).libraries[0]
        return freshness.identity(record, [lib], folder, str(tmp_path))

    (tmp_path / "ref.py").write_text("def neg(x):\n    return -x\n")
    one = identity(build("build"), "build")
    assert re.fullmatch("[0-9a-f]{64}", one)
    assert identity(build("out/b2", mtime=2), "out/b2") == one
    assert identity(build(str(tmp_path / "abs"), mtime=3), str(tmp_path / "abs")) == one
    assert identity(build("b3", obj=b"\x7fELF two"), "b3") != one
    record = build("b4")
    record.libraries["relu"] = ("other key", record.libraries["relu"][1])
    assert identity(record, "b4") != one
    assert identity(build("b5"), "b5", _MANIFEST.replace("shape: [3]", "shape: [4]")) != one
    (tmp_path / "ref.py").write_text("def neg(x):\n    return 0 - x\n")
    assert identity(build("b5"), "b5") != one
    (tmp_path / "ref.py").write_text("def neg(x):\n    return -x\n")
    record = build("b6")
    size, mtime, _ = record.files["k.cpp"]
    record.files["k.cpp"] = (size, mtime, None)         # (an edit while the build ran)
    assert identity(record, "b6") == one
    (tmp_path / "k.cpp").write_text("int k2;\n")
    assert identity(record, "b6") != one
    assert identity(freshness.Record(), "build") != one
    (tmp_path / "k.cpp").write_text("int k;\n")
    # a header in an allowed folder outside the project, recorded relative
    # to it: the same identity wherever the project is (found in review)
    seen = set()
    for rel, digest in (("../v/h.h", "a" * 64), ("../../v/h.h", "a" * 64), ("../v/h.h", "b" * 64)):
        record = build("b7")
        record.files[rel] = (1, 1, digest)
        record.libraries["relu"] = ("key", sorted(record.libraries["relu"][1] + [rel]))
        seen.add(identity(record, "b7"))
    assert len(seen) == 2 and one not in seen


def test_identity_holds_the_emulators_python_code(tmp_path, monkeypatch):
    """Shards run with two versions of the emulator's Python code (its
    client included) have two identities; the same code in another folder
    (another clone, an installed copy) has one."""
    from gpsimd_build import layout

    def code(folder, text):
        files = {"gpsimd_emu/session.py": "A = 1\n", "gpsimd_emu/client/served.py": text,
                 "gpsimd_device/plan.py": "B = 2\n"}
        for name, data in files.items():
            (tmp_path / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / name).write_text(data)
        monkeypatch.setattr(layout, "emulator_dir", lambda: str(tmp_path / folder / "gpsimd_emu"))
        monkeypatch.setattr(layout, "device_dir", lambda: str(tmp_path / folder / "gpsimd_device"))
        return freshness.identity(freshness.Record(), [], "build", str(tmp_path))

    one = code("a", "C = 3\n")
    assert code("b", "C = 3\n") == one
    assert code("c", "C = 4\n") != one


def test_a_header_in_an_allowed_folder_named_through_a_link_is_recorded(tmp_path, monkeypatch):
    """``ALLOW_PATHS`` naming its folder through a symbolic link (a home
    folder's link to a data disk): the header's real path was compared with
    the folder as written, so it was taken for a system header and left out
    of the record, and an edit of it was never stale for the pytest plugin
    (found in review)."""
    import types
    from conftest import ROOT
    monkeypatch.syspath_prepend(str(ROOT / "site_scons" / "site_tools"))
    from gpsimd_tool.inputs_record import InputsRecord
    (tmp_path / "data" / "vendor").mkdir(parents=True)
    (tmp_path / "data" / "vendor" / "s.h").write_text("#define S 2\n")
    (tmp_path / "vendor").symlink_to(tmp_path / "data" / "vendor")
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    record = InputsRecord("build/host", allowed=[str(tmp_path / "vendor")])
    for spelled in ("vendor", "data/vendor"):
        header = str(tmp_path / spelled / "s.h")
        node = types.SimpleNamespace(path=header, abspath=header)
        assert record.recorded_path(node) == f"../{spelled}/s.h"
    system = types.SimpleNamespace(path="/usr/include/stdio.h", abspath="/usr/include/stdio.h")
    assert record.recorded_path(system) is None
