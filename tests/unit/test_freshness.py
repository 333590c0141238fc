"""The record of what a library's objects were built from
(gpsimd_build.freshness): written, merged, read back, and the file that
makes a library stale named."""

import json
import os

from gpsimd_build import freshness


def test_each_file_once_with_size_and_nanosecond_time(tmp_path):
    (tmp_path / "b.cpp").write_text("int b;\n")
    (tmp_path / "a.h").write_text("#define A 1\n")
    os.utime(tmp_path / "a.h", ns=(1, 1_733_000_000_123_456_789))
    path = tmp_path / "inputs.json"
    freshness.update_record(str(path), {"l1": ["b.cpp", "a.h", "gone.h"], "l2": ["a.h"]},
                            root=str(tmp_path))
    b = (tmp_path / "b.cpp").stat().st_mtime_ns
    assert json.loads(path.read_text()) == {
        "format": 2, "files": {"a.h": [12, 1_733_000_000_123_456_789], "b.cpp": [7, b]},
        "libraries": {"l1": ["a.h", "b.cpp"], "l2": ["a.h"]}}


def test_update_keeps_other_libraries_and_writes_only_on_change(tmp_path):
    for name in ("k.cpp", "s.cpp"):
        (tmp_path / name).write_text(name)
    path = tmp_path / "inputs.json"
    root = str(tmp_path)
    freshness.update_record(str(path), {"relu": ["k.cpp"], "spmd": ["s.cpp"]}, root)
    (tmp_path / "k.cpp").write_text("longer")
    freshness.update_record(str(path), {"relu": ["k.cpp"]}, root)
    doc = json.loads(path.read_text())
    assert doc["libraries"] == {"relu": ["k.cpp"], "spmd": ["s.cpp"]}
    assert doc["files"]["k.cpp"][0] == 6 and doc["files"]["s.cpp"][0] == 5
    os.utime(path, ns=(1, 1))
    freshness.update_record(str(path), {"spmd": ["s.cpp"]}, root)
    assert path.stat().st_mtime_ns == 1      # the same text: not rewritten
    freshness.update_record(str(path), {"relu": [], "spmd": []}, root)
    assert json.loads(path.read_text())["files"] == {}     # no library uses them


def test_stale_input_names_the_first_changed_or_missing_file(tmp_path):
    (tmp_path / "k.cpp").write_text("int k;\n")
    (tmp_path / "h.h").write_text("#define H\n")
    path = str(tmp_path / "inputs.json")
    freshness.update_record(path, {"lib": ["k.cpp", "h.h"]}, str(tmp_path))
    record = freshness.read_record(path)
    assert freshness.stale_input(record, "lib", str(tmp_path)) is None
    assert freshness.stale_input(record, "other", str(tmp_path)) == \
        "no record of what its objects were built from"
    st = (tmp_path / "k.cpp").stat()
    os.utime(tmp_path / "k.cpp", ns=(st.st_atime_ns, st.st_mtime_ns + 1))   # touched only
    assert freshness.stale_input(record, "lib", str(tmp_path)) == "k.cpp changed since"
    (tmp_path / "h.h").unlink()
    assert freshness.stale_input(record, "lib", str(tmp_path)) == "h.h is gone since"


def test_a_damaged_or_foreign_record_vouches_for_nothing(tmp_path):
    path = tmp_path / "inputs.json"
    for text in ("{", "[]", '{"format": 1, "files": {}, "libraries": {}}', '{"format": 2}',
                 '{"format": 2, "files": {"a": [1]}, "libraries": {"l": ["a"]}}',
                 '{"format": 2, "files": {}, "libraries": {"l": ["a"]}}'):
        path.write_text(text)
        record = freshness.read_record(str(path))
        assert record.files == {} and record.libraries == {}, text
    assert freshness.read_record(str(tmp_path / "missing.json")).libraries == {}
