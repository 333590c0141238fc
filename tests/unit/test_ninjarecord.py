"""The inputs record on the ninja path (gpsimd_build.ninjarecord): ninja's
build and deps logs read as ninja writes them, and a library recorded only
when ninja holds it up to date, a file edited while its step ran
included. (With a real ninja: test_ninja.py.)"""
import json
import os
import struct

from gpsimd_build import freshness, ninjarecord


def _deps_log(path, records):
    """A version-4 deps log: ``records`` is a list of (output, [inputs])."""
    ids, out = {}, [b"# ninjadeps\n", struct.pack("<i", 4)]

    def path_id(p):
        if p not in ids:
            data = p.encode()
            data += b"\0" * (-len(data) % 4)
            out.append(struct.pack("<I", len(data) + 4) + data
                       + struct.pack("<I", (~len(ids)) & 0xFFFFFFFF))
            ids[p] = len(ids)
        return ids[p]

    for output, inputs in records:
        o = path_id(output)
        ins = [path_id(i) for i in inputs]
        body = struct.pack(f"<iII{len(ins)}i", o, 5, 0, *ins)
        out.append(struct.pack("<I", len(body) | 0x80000000) + body)
    path.write_bytes(b"".join(out))


def test_the_deps_log_is_read_last_record_wins_and_a_torn_tail_is_dropped(tmp_path):
    log = tmp_path / ".ninja_deps"
    _deps_log(log, [("a.o", ["a.cpp", "x.h"]), ("b.o", ["b.cpp"]), ("a.o", ["a.cpp", "y.h"])])
    assert ninjarecord.read_deps_log(str(log)) == {"a.o": ["a.cpp", "y.h"], "b.o": ["b.cpp"]}
    whole = log.read_bytes()
    log.write_bytes(whole[:-3])                      # (ninja killed while writing)
    assert ninjarecord.read_deps_log(str(log)) == {"a.o": ["a.cpp", "x.h"], "b.o": ["b.cpp"]}
    log.write_bytes(b"# ninjadeps\n" + struct.pack("<i", 3) + whole[16:])
    assert ninjarecord.read_deps_log(str(log)) == {}            # another version
    assert ninjarecord.read_deps_log(str(tmp_path / "none")) == {}


def test_the_build_log_gives_each_outputs_last_recorded_time(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text("# ninja log v7\n0\t5\t100\ta.o\tabc\n1\t9\t200\tb.o\tdef\n"
                   "2\t8\t300\ta.o\tabc\njunk\n")
    assert ninjarecord.read_build_log(str(log)) == {"a.o": 300, "b.o": 200}
    log.write_text("# ninja log v4\n0\t5\t100\ta.o\n")
    assert ninjarecord.read_build_log(str(log)) == {}


def _project(tmp_path):
    """Sources at time 100, a step ``lib.so`` <- ``a.o`` <- ``a.cpp``
    (+ ``x.h`` from the deps log) that ninja ran at 200."""
    for name in ("a.cpp", "x.h", "lib.so", "a.o", "plan.json"):
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, ns=(100, 100))
    spec = tmp_path / ninjarecord.SPEC_NAME
    spec.write_text(ninjarecord.spec_text({"lib": ("KEY", ["lib.so", "plan.json"], {
        "lib.so": [], "a.o": ["a.cpp", "/usr/include/stdio.h"]})}))
    ninja_dir = tmp_path / ".ninja"
    ninja_dir.mkdir()
    (ninja_dir / ".ninja_log").write_text("# ninja log v7\n0\t1\t200\ta.o\th\n0\t1\t200\tlib.so\th\n")
    _deps_log(ninja_dir / ".ninja_deps", [("a.o", ["a.cpp", "x.h", "/usr/include/stdio.h"])])
    return spec, ninja_dir, tmp_path / freshness.RECORD_NAME


def test_a_library_ninja_holds_up_to_date_is_recorded_with_its_headers(tmp_path):
    spec, ninja_dir, record = _project(tmp_path)
    assert ninjarecord.update(str(spec), str(ninja_dir), str(record), str(tmp_path)) == ["lib"]
    doc = json.loads(record.read_text())
    assert doc["libraries"] == {"lib": {"key": "KEY", "files": [
        "a.cpp", "lib.so", "plan.json", "x.h"]}}       # (no absolute path)
    assert doc["files"]["x.h"][:2] == [3, 100] and len(doc["files"]["x.h"][2]) == 64


def test_a_header_edited_while_its_compile_ran_is_never_recorded_as_built(tmp_path):
    """x.h's time (250) is after the compile's recorded start (200): the
    object may hold the old header; the library keeps its old entry."""
    spec, ninja_dir, record = _project(tmp_path)
    freshness.update_record(str(record), {"lib": ("KEY", ["a.cpp"])}, {"a.cpp": (5, 1)})
    before = record.read_bytes()
    os.utime(tmp_path / "x.h", ns=(250, 250))
    assert ninjarecord.update(str(spec), str(ninja_dir), str(record), str(tmp_path)) == []
    assert record.read_bytes() == before
    # likewise a step ninja has no record of running, and a missing root
    os.utime(tmp_path / "x.h", ns=(100, 100))
    (ninja_dir / ".ninja_log").write_text("# ninja log v7\n0\t1\t200\tlib.so\th\n")
    assert ninjarecord.update(str(spec), str(ninja_dir), str(record), str(tmp_path)) == []
    (ninja_dir / ".ninja_log").write_text("# ninja log v7\n0\t1\t200\ta.o\th\n0\t1\t200\tlib.so\th\n")
    (tmp_path / "plan.json").unlink()
    assert ninjarecord.update(str(spec), str(ninja_dir), str(record), str(tmp_path)) == []
    assert record.read_bytes() == before


def test_current_names_what_ninja_holds_up_to_date_for_the_summary_after_a_failure(tmp_path):
    """``current``: the entries the summary step of a run that a failed
    step stopped may still count (their old results are of these
    sources); an edited source leaves its library out; no spec: None."""
    spec, ninja_dir, _ = _project(tmp_path)
    files = ["lib.so", "plan.json", "a.cpp", "x.h"]
    assert ninjarecord.current(str(spec), str(ninja_dir), str(tmp_path)) == {
        "lib": ("KEY", files)}
    os.utime(tmp_path / "a.cpp", ns=(300, 300))
    assert ninjarecord.current(str(spec), str(ninja_dir), str(tmp_path)) == {}
    assert ninjarecord.current(str(tmp_path / "none.json"), str(ninja_dir), str(tmp_path)) is None


def test_a_header_in_an_allowed_folder_outside_is_recorded_relative_to_the_project(tmp_path):
    """A kernel's header in an ``allow_paths`` folder outside the project:
    ninja's deps log names it by its absolute path, which was left out with
    the compiler's own, so the pytest plugin ran objects older than it (a
    wrong PASS found by an attack). It is named relative to the project."""
    proj, vendor = tmp_path / "proj", tmp_path / "vendor"
    (proj / "b" / "host").mkdir(parents=True)
    (vendor / "build" / "host").mkdir(parents=True)
    for path in (proj / "a.cpp", proj / "lib.so", vendor / "v.h", vendor / "build/host/w.cpp"):
        path.write_text(path.name)
        os.utime(path, ns=(100, 100))
    spec = proj / "b" / "host" / ninjarecord.SPEC_NAME
    spec.write_text(ninjarecord.spec_text(
        {"lib": ("KEY", ["lib.so"], {"lib.so": [], "a.o": ["a.cpp"]})}, ["../vendor"]))
    ninja_dir = proj / ".ninja"
    ninja_dir.mkdir()
    (ninja_dir / ".ninja_log").write_text("# ninja log v7\n0\t1\t200\ta.o\th\n0\t1\t200\tlib.so\th\n")
    _deps_log(ninja_dir / ".ninja_deps",
              [("a.o", ["a.cpp", str(vendor / "v.h"), "/usr/include/stdio.h"])])
    assert ninjarecord.current(str(spec), str(ninja_dir), str(proj)) == {
        "lib": ("KEY", ["lib.so", "a.cpp", "../vendor/v.h"])}
    # a build folder in the allowed folder: what we wrote there is not
    # recorded (as on the SCons path), so no record names the build folder
    spec2 = vendor / "build" / "host" / ninjarecord.SPEC_NAME
    spec2.write_text(spec.read_text())
    _deps_log(ninja_dir / ".ninja_deps", [("a.o", ["a.cpp", str(vendor / "v.h"),
                                                  str(vendor / "build/host/w.cpp")])])
    assert ninjarecord.current(str(spec2), str(ninja_dir), str(proj)) == {
        "lib": ("KEY", ["lib.so", "a.cpp", "../vendor/v.h"])}
    os.utime(vendor / "v.h", ns=(300, 300))          # (edited after the compile)
    assert ninjarecord.current(str(spec), str(ninja_dir), str(proj)) == {}
