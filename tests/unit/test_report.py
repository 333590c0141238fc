"""The HTML test report (gpsimd_build.report): what it holds, that it is
static and deterministic, and what Chromium draws from it."""
import os
import re

import pytest

from gpsimd_build.report import (CORE_COLOURS, MARK_COLOURS, STRIP_WIDTH, ReportLibrary,
                                 render_report)
from gpsimd_build.report_files import write_report
from gpsimd_device.results import LibraryResults, VectorResult
from render import render, rgb

#: A multicore vector as the emulator records it (tests/integration/
#: test_emu_checks.py: broken_spmd::remainder_bug), plus an overlap and a
#: write past the end by core 3.
LAYOUT = {
    "elements": 1001, "itemsize": 4, "truncated": False,
    "cores": [{"core": k, "written": [[125 * k, 125 * (k + 1)]], "read_before_write": [],
               "past_end": [], "uninit": [], "fault": None} for k in range(7)]
    + [{"core": 7, "written": [[882, 946]], "read_before_write": [], "past_end": [],
        "uninit": [], "fault": {"kind": "OUT_OF_RANGE", "range": [946, 1008]}}],
    "holes": [[875, 882], [946, 1001]],
    "overlaps": [{"range": [250, 300], "cores": [1, 2]}],
    "order_dependent": [],
}
LAYOUT["cores"][3]["past_end"] = [[1001, 1004]]


def _results():
    multi = LibraryResults("spmd", [
        VectorResult("remainder_bug", "n1001", "ops.yaml:16:13", "fail",
                     "core 7 faulted: OUT_OF_RANGE <b>", warnings=["core 2: slow & odd"],
                     layout=LAYOUT),
        VectorResult("double", "n8", "ops.yaml:20:13", "pass", max_abs_err=0.0, mismatches=0),
    ])
    single = LibraryResults("relu", [
        VectorResult("relu_forward", "n1000", "ops.yaml:14:13", "pass", max_abs_err=1.5e-7,
                     mismatches=0)])
    return [ReportLibrary("relu", "current", single),
            ReportLibrary("spmd", "current", multi, multicore=True, checks=False),
            ReportLibrary("later", "not run")]


def test_report_lists_every_vector_with_its_figures_and_is_static():
    page = render_report(_results())
    assert page == render_report(_results())            # deterministic
    assert "<script" not in page and "src=" not in page and "url(" not in page
    assert "@import" not in page                              # nothing outside the page
    assert re.findall(r'href="([^"]*)"', page) == ["#v-spmd--remainder_bug--n1001"]
    # the failures first, each linked to its row; each library an anchor
    assert page.index('class="failures"') < page.index('class="library"')
    assert '<h2>1 failed vector</h2><ul><li><a href="#v-spmd--remainder_bug--n1001">' \
        'spmd::remainder_bug[n1001]</a></li></ul>' in page
    assert 'id="v-spmd--remainder_bug--n1001"' in page
    assert re.findall(r'<section class="library" id="([^"]+)"', page) == [
        "lib-relu", "lib-spmd", "lib-later"]
    rows = re.findall(r'<tr class="vector (\w+)" data-vector="([^"]+)"', page)
    assert rows == [("pass", "relu::relu_forward[n1000]"), ("fail", "spmd::remainder_bug[n1001]"),
                    ("pass", "spmd::double[n8]")]
    assert "1.5e-07" in page                                # the error figure
    assert "core 7 faulted: OUT_OF_RANGE &lt;b&gt;" in page  # escaped message
    assert "warning: core 2: slow &amp; odd" in page
    assert "total: 2 passed, 1 failed" in page
    assert 'data-library="later" data-state="not run"' in page
    # the multicore vector without a layout says why
    assert "No write-set data: the run had no checks (EMU_CHECKS=0)." in page


def test_strip_segments_are_ranges_not_elements():
    page = render_report(_results())
    segs = re.findall(r'data-kind="([\w-]+)"(?: data-core="(\d+)")? data-range="(\d+),(\d+)"',
                      page)
    assert sorted(segs) == sorted(
        [("written", str(k), str(125 * k), str(125 * k + 125)) for k in range(7)]
        + [("written", "7", "882", "946"), ("hole", "", "875", "882"), ("hole", "", "946", "1001"),
           ("overlap", "", "250", "300"), ("past-end", "3", "1001", "1004"),
           ("beyond", "", "1001", "1008"), ("fault", "7", "946", "1008")])
    # the words beside the picture
    for text in ("core 7: wrote [882, 946); fault OUT_OF_RANGE at [946, 1008)",
                 "core 3: wrote [375, 500); wrote past the end [1001, 1004)",
                 "holes: [875, 882), [946, 1001)", "overlap: [250, 300) by cores 1, 2"):
        assert text in page
    # the element-offset axis: 0, the quarters of the 1001 elements and
    # the end (the end of what was written or faulted past it, 1008, is too
    # close to it to be labelled too)
    assert re.findall(r'class="tick(?: last)?" data-offset="(\d+)"', page) == [
        "0", "250", "500", "750", "1001"]
    # holes, writes past the end, the zone past the end and fault ranges
    # carry a pattern as well as a colour
    for kind in ("hole", "past-end", "beyond", "fault"):
        assert re.search(rf'class="seg {kind}[^"]* pat-{kind}"', page), kind
        assert f".swatch.pat-{kind} {{ background-image: repeating-linear-gradient" in page
    assert not re.search(r'class="seg (written|overlap)[^"]* pat-', page)
    # a million elements in eight ranges is eight segments
    big = {"elements": 10 ** 6, "itemsize": 4, "holes": [], "overlaps": [],
           "cores": [{"core": k, "written": [[k * 125000, (k + 1) * 125000]]} for k in range(8)]}
    lib = ReportLibrary("big", "current", LibraryResults("big", [
        VectorResult("op", "v", "x:1:1", "pass", 0.0, 0, layout=big)]), multicore=True)
    assert render_report([lib]).count('class="seg ') == 8


def test_write_report_leaves_an_unchanged_page_alone(tmp_path):
    page = tmp_path / "host" / "report.html"
    assert write_report(str(page), _results())
    stamp = page.stat().st_mtime_ns
    assert not write_report(str(page), _results())
    assert page.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_chromium_draws_each_core_hole_overlap_and_fault_where_the_ranges_say(tmp_path):
    page = tmp_path / "report.html"
    write_report(str(page), _results())
    pic = render(str(page))
    segs = [s for s in pic.segs if s["vector"] == "spmd::remainder_bug[n1001]"]
    strip = [s for s in segs if s["row"] == "strip"]
    # the strip spans STRIP_WIDTH pixels for 1008 elements (1001 and the
    # fault's reach past the end): element e starts at e / 1008 of it
    x0 = min(s["x"] for s in strip)
    for s in strip:
        if s["kind"] != "end":
            a, b = map(int, s["range"].split(","))
            assert s["x"] - x0 == pytest.approx(STRIP_WIDTH * a / 1008, abs=1)
            assert s["w"] == pytest.approx(max(STRIP_WIDTH * (b - a) / 1008, 1), abs=1)
    # what the browser drew: at the middle of each segment wider than 2 px,
    # the colour of the segment on top there
    colours = {"hole": MARK_COLOURS["hole"], "overlap": MARK_COLOURS["overlap"],
               "beyond": MARK_COLOURS["beyond"], "fault": MARK_COLOURS["fault"]}
    checked = 0
    for s in segs:
        if s["w"] <= 2 or s["kind"] == "end":
            continue
        x, y = s["x"] + s["w"] / 2, s["y"] + s["h"] / 2
        want = (rgb(CORE_COLOURS[int(s["core"])]) if s["kind"] in ("written", "past-end")
                else rgb(colours[s["kind"]]))
        assert rgb(s["colour"]) == want, s
        assert pic.pixel(x, y) == pic.expected_at(x, y), s
        checked += 1
    assert checked >= 12
    # named points: core 0's first element, core 7's range, the holes, the
    # overlap, the zone past the end, core 7's fault range under the strip
    y = strip[0]["y"] + strip[0]["h"] / 2
    at = lambda e: x0 + STRIP_WIDTH * (e + 0.5) / 1008   # noqa: E731
    assert pic.pixel(at(10), y) == rgb(CORE_COLOURS[0])
    assert pic.pixel(at(900), y) == rgb(CORE_COLOURS[7])
    assert pic.pixel(at(878), y) == rgb(MARK_COLOURS["hole"])
    assert pic.pixel(at(970), y) == rgb(MARK_COLOURS["hole"])
    assert pic.pixel(at(275), y) == rgb(MARK_COLOURS["overlap"])
    assert pic.pixel(at(1002), y) == rgb(CORE_COLOURS[3])      # core 3 past the end
    assert pic.pixel(at(1006), y) == rgb(MARK_COLOURS["beyond"])
    fault = next(s for s in segs if s["kind"] == "fault")
    fy = fault["y"] + fault["h"] / 2
    assert pic.pixel(at(980), fy) == rgb(MARK_COLOURS["fault"])
    assert pic.pixel(at(900), fy) != rgb(MARK_COLOURS["fault"])   # before the fault range
    # the hole's pattern: white stripes along its top, its middle plain;
    # a core's writes have none
    hole = next(s for s in strip if s["kind"] == "hole" and s["range"] == "946,1001")
    xs = range(int(hole["x"]) + 1, int(hole["x"] + hole["w"]) - 1)
    assert (255, 255, 255) in {pic.pixel(x, hole["y"] + 1) for x in xs}
    assert {pic.pixel(x, y) for x in xs} == {rgb(MARK_COLOURS["hole"])}
    core0 = next(s for s in strip if s["kind"] == "written" and s["core"] == "0")
    assert {pic.pixel(x, core0["y"] + 1) for x in range(int(core0["x"]) + 1, int(
        core0["x"] + core0["w"]) - 1)} == {rgb(CORE_COLOURS[0])}
    # the vector without write sets draws nothing
    assert not [s for s in pic.segs if s["vector"] == "spmd::double[n8]"]


def test_sections_come_from_the_cache_unless_their_results_changed(tmp_path, monkeypatch):
    """render_from_files gives the page render_report gives, and after one
    library's results change it reads and renders that library only."""
    from gpsimd_build import report_files as report
    libs = _results()
    entries = []
    for lib in libs:
        path = None
        if lib.results is not None:
            path = str(tmp_path / f"{lib.name}.json")
            lib.results.write(path)
        entries.append((lib.name, lib.state, path, lib.multicore))
    for lib in libs:              # (render_from_files gives every library the same flag)
        lib.checks = True
    want = render_report(libs, totals="all libraries: 2 passed, 1 failed")
    cache = str(tmp_path / "cache")
    read = []
    real = report.libraries_from_files
    monkeypatch.setattr(report, "libraries_from_files",
                        lambda e: read.extend(n for n, *_ in e) or real(e))
    assert report.render_from_files(entries, True, "all libraries: 2 passed, 1 failed",
                                    cache) == want
    assert read == ["relu", "spmd", "later"]
    del read[:]
    assert report.render_from_files(entries, True, "all libraries: 2 passed, 1 failed",
                                    cache) == want
    assert read == []
    relu = LibraryResults("relu", [VectorResult("relu_forward", "n1000", "ops.yaml:14:13",
                                                "fail", "1 of 1000 elements differ")])
    relu.write(entries[0][2])
    libs[0].results = relu
    page = report.render_from_files(entries, True, "total: 1 passed, 2 failed", cache)
    assert read == ["relu"]
    assert page == render_report(libs, totals="total: 1 passed, 2 failed")
    assert "1 of 1000 elements differ" in page


def test_a_library_s_last_explore_is_shown_and_its_record_renders_the_section_again(tmp_path):
    """The explore record beside the results (``<lib>/explore.json``): a row
    per op, a falsified op's example as a vector row with its picture, in
    the failures list; a new record renders that section again."""
    import json
    from gpsimd_build import report_files
    folder = tmp_path / "sp"
    folder.mkdir()
    results = folder / "test-results.json"
    LibraryResults("sp", [VectorResult("double", "n64", "ops.yaml:9:13", "pass")]).write(
        str(results))
    entries = [("sp", "kept", str(results), True)]
    cache = str(tmp_path / "cache")
    plain = report_files.render_from_files(entries, True, "t", cache, records_dir=str(tmp_path))
    assert 'class="explore' not in plain
    bad = VectorResult("double", "explored_1", "explored", "fail", "core 7: fault OUT_OF_RANGE")
    bad.layout = LAYOUT
    (folder / "explore.json").write_text(json.dumps({"format": 1, "library": "sp", "ops": {
        "double": {"status": "FALSIFIED", "result": bad.to_json(),
                   "text": "FALSIFIED sp::double: FAIL ...\n    - name: explored_1\n"},
        "other": {"status": "EXPLORED", "text": "EXPLORED sp::other: 9 examples, every check "
                                                "passed"}}}))
    page = report_files.render_from_files(entries, True, "t", cache, records_dir=str(tmp_path))
    assert '<tr class="explore falsified" data-op="double">' in page
    assert '<tr class="explore explored" data-op="other">' in page
    assert "<pre>    - name: explored_1\n</pre>" in page
    assert '<tr class="picture" data-vector="sp::double[explored_1]">' in page
    assert '<tr class="example fail" data-vector="sp::double[explored_1]"' in page
    # (an example is not a failed vector: not in the list at the top)
    assert 'href="#v-sp--double--explored_1"' not in page
    # no plan it explored is this build's: marked stale
    assert "stale: it explored another plan than this build&#x27;s" in page


def test_the_explored_plans_are_the_plans_the_build_writes():
    from gpsimd_build import report_files, testplan
    assert report_files.EXPLORED_PLANS == (testplan.SHAPED_PLAN_NAME, testplan.PLAN_NAME)


def test_explore_rows_are_stale_when_a_file_the_explore_ran_changed(tmp_path):
    """The record names the files the explore ran (``inputs``: by path
    relative to its folder, their SHA-256): the rows are the build's while
    each is as it was, else stale naming the first changed or gone; a
    record that names none (an earlier version's) is stale too. The
    section is rendered again when one changes (its cache key)."""
    import hashlib
    import json
    from gpsimd_build import report_files
    folder = tmp_path / "host" / "sp"
    folder.mkdir(parents=True)
    (folder / "testplan.json").write_text("{}\n")

    def write(data, when):          # (a time of its own: the cache's key is size and time)
        (folder / "sp.packed.so").write_bytes(data)
        os.utime(folder / "sp.packed.so", ns=(when, when))
    write(b"one", 1)
    (tmp_path / "host" / "emu").mkdir()
    (tmp_path / "host" / "emu" / "gpsimd-zygote").write_bytes(b"zygote")
    sha = lambda data: hashlib.sha256(data).hexdigest()     # noqa: E731

    def record(inputs):
        (folder / "explore.json").write_text(json.dumps({
            "format": 1, "library": "sp", "plan_sha256": sha(b"{}\n"), "inputs": inputs,
            "ops": {"double": {"status": "EXPLORED", "text": "EXPLORED sp::double: 9 examples, "
                                                             "every check passed"}}}))

    def heading():
        page = report_files.render_from_files([("sp", "not run", None, True)], True, "t",
                                              str(tmp_path / "cache"),
                                              records_dir=str(tmp_path / "host"))
        return re.search(r"explore-sp</code> \(([^<]*)\)</h3>", page).group(1)
    record({"sp.packed.so": sha(b"one"), "../emu/gpsimd-zygote": sha(b"zygote")})
    assert heading() == "its results are as of that run"
    write(b"two", 2)
    obj = tmp_path / "host" / "sp" / "sp.packed.so"
    assert heading() == (f"stale: it explored other objects than this build&#x27;s ({obj} "
                         f"changed since); run it again")
    write(b"one", 3)
    assert heading() == "its results are as of that run"
    (tmp_path / "host" / "emu" / "gpsimd-zygote").unlink()
    assert heading() == (f"stale: it explored other objects than this build&#x27;s "
                         f"({tmp_path / 'host' / 'emu' / 'gpsimd-zygote'} is gone since); "
                         f"run it again")
    record(None)
    assert heading() == ("stale: it does not name the objects it explored (an earlier "
                         "version&#x27;s explore); run it again")
