"""The record of what a library's objects were built from
(gpsimd_build.freshness): written, merged, read back, and the file that
makes a library stale named."""

import json
import os

from gpsimd_build import freshness


def test_entries_are_size_and_nanosecond_time_sorted_by_path(tmp_path):
    (tmp_path / "b.cpp").write_text("int b;\n")
    (tmp_path / "a.h").write_text("#define A 1\n")
    os.utime(tmp_path / "a.h", ns=(1, 1_733_000_000_123_456_789))
    got = freshness.stat_entries(["b.cpp", "a.h", "gone.h", "a.h"], root=str(tmp_path))
    assert got == [("a.h", 12, 1_733_000_000_123_456_789),
                   ("b.cpp", 7, (tmp_path / "b.cpp").stat().st_mtime_ns)]


def test_update_keeps_other_libraries_and_writes_only_on_change(tmp_path):
    path = tmp_path / "inputs.json"
    freshness.update_record(str(path), {"relu": [("k.cpp", 3, 10)], "spmd": [("s.cpp", 4, 20)]})
    freshness.update_record(str(path), {"relu": [("k.cpp", 5, 30)]})
    assert json.loads(path.read_text()) == {
        "format": 1, "libraries": {"relu": [["k.cpp", 5, 30]], "spmd": [["s.cpp", 4, 20]]}}
    before = path.stat().st_mtime_ns
    os.utime(path, ns=(1, 1))
    freshness.update_record(str(path), {"spmd": [("s.cpp", 4, 20)]})
    assert path.stat().st_mtime_ns == 1 and before != 1     # same text: not rewritten


def test_stale_input_names_the_first_changed_or_missing_file(tmp_path):
    (tmp_path / "k.cpp").write_text("int k;\n")
    (tmp_path / "h.h").write_text("#define H\n")
    record = {"lib": freshness.stat_entries(["h.h", "k.cpp"], root=str(tmp_path))}
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
    for text in ("{", "[]", '{"format": 2, "libraries": {}}', '{"format": 1}',
                 '{"format": 1, "libraries": {"l": [["a", "b"]]}}'):
        path.write_text(text)
        assert freshness.read_record(str(path)) == {}, text
    assert freshness.read_record(str(tmp_path / "missing.json")) == {}
