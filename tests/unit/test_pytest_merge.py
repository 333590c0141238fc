"""``python -m gpsimd_pytest.merge``: the shards of a pytest-split run
merge into one run only when every shard is there, once."""
import json
import xml.etree.ElementTree as ET

import pytest

from gpsimd_pytest.merge import merge, write_outputs


def _vector(order, lib, vector, status):
    return [list(order), lib, False, {"op": "op", "vector": vector, "where": "ops.yaml:1:1",
                                      "status": status, "message": "" if status == "pass"
                                      else "wrong", "max_abs_err": 0.0, "mismatches": 0,
                                      "warnings": []}]


def _shards(tmp_path, groups, splits=3, builds=None, every=None):
    rows = {1: [_vector((0, 0, 0), "a", "v1", "pass")],
            2: [_vector((0, 0, 1), "a", "v2", "fail")],
            3: [_vector((0, 0, 2), "a", "v3", "pass")]}
    paths = []
    for g in groups:
        report = tmp_path / f"shard{g}" / "report.html"
        report.parent.mkdir(parents=True, exist_ok=True)
        write_outputs(str(report), rows[g], True, (g, splits) if splits else None,
                      (builds or {}).get(g), (every or {}).get(g))
        paths.append(str(tmp_path / f"shard{g}" / "report.json"))
    return paths


def test_every_shard_merges_to_one_run_without_the_shard_mark(tmp_path):
    lines = merge(_shards(tmp_path, (3, 1, 2)), str(tmp_path / "merged"))
    assert lines == ["a: 2 passed, 1 failed", "total: 2 passed, 1 failed"]
    assert "shard" not in json.loads((tmp_path / "merged.json").read_text())
    assert json.loads((tmp_path / "shard2" / "report.json").read_text())["shard"] == [2, 3]


@pytest.mark.parametrize("groups, message", [
    ((1, 3), "shard 2 of 3 missing (--splits 3): their vectors would be counted nowhere"),
    ((3,), "shards 1, 2 of 3 missing (--splits 3): their vectors would be counted nowhere"),
])
def test_a_missing_shard_is_an_error_not_a_smaller_pass(tmp_path, groups, message):
    """Shard 2 held the failing vector: merged without it, the summary
    said ``total: 2 passed, 0 failed``."""
    with pytest.raises(ValueError) as err:
        merge(_shards(tmp_path, groups), str(tmp_path / "merged"))
    assert str(err.value) == message
    assert not (tmp_path / "merged.txt").exists()


def test_shards_of_other_splits_or_a_whole_run_are_refused(tmp_path):
    one, two = _shards(tmp_path, (1, 2))
    (tmp_path / "x").mkdir()
    (three,) = _shards(tmp_path / "x", (3,), splits=4)
    with pytest.raises(ValueError, match=r"^the shards are of different splits \(\[3, 4\]\)$"):
        merge([one, two, three], str(tmp_path / "merged"))
    (whole,) = _shards(tmp_path / "x", (3,), splits=None)
    with pytest.raises(ValueError, match=r"x/shard3/report\.json is not a shard \(no --splits\), "
                                         r"the others are$"):
        merge([one, two, whole], str(tmp_path / "merged"))


def test_shards_of_different_builds_are_refused_naming_the_files(tmp_path):
    """Shard 2 re-run on another build (a kernel fix): merged, its pass
    would join the other shards' of a build that fails it."""
    one = {1: "a" * 64, 2: "a" * 64, 3: "a" * 64}
    lines = merge(_shards(tmp_path / "same", (1, 2, 3), builds=one), str(tmp_path / "merged"))
    assert lines == ["a: 2 passed, 1 failed", "total: 2 passed, 1 failed"]
    assert json.loads((tmp_path / "merged.json").read_text())["build"] == "a" * 64
    paths = _shards(tmp_path / "other", (1, 2, 3), builds={**one, 2: "b" * 64})
    with pytest.raises(ValueError) as err:
        merge(paths, str(tmp_path / "bad"))
    assert str(err.value) == (
        f"{paths[0]} and {paths[1]} are results of different builds (their objects, emulator "
        f"or test vectors differ): run every shard on one build")
    paths = _shards(tmp_path / "older", (1, 2, 3), builds={**one, 3: None})
    with pytest.raises(ValueError) as err:
        merge(paths, str(tmp_path / "bad"))
    assert str(err.value) == (f"{paths[2]} does not say which build it tested, {paths[0]} "
                              f"does: run every shard with this version of gpsimd_pytest")
    assert not (tmp_path / "bad.txt").exists()


def test_a_vector_no_shard_ran_is_an_error_not_a_smaller_pass(tmp_path):
    """Every shard there, but one vector of the manifest in none (job 1's
    groups computed from another durations file than job 2's; a shard's
    -k or --deselect): the merge said ``total: 6 passed, 0 failed`` where
    the build fails that vector. Each run's results now list the
    manifest's vectors, and the merge refuses one that ran nowhere."""
    three = ["op[v1]", "op[v2]", "op[v3]"]
    lines = merge(_shards(tmp_path / "all", (1, 2, 3), every={g: {"a": three} for g in (1, 2, 3)}),
                  str(tmp_path / "merged"))
    assert lines == ["a: 2 passed, 1 failed", "total: 2 passed, 1 failed"]
    assert json.loads((tmp_path / "merged.json").read_text())["every"] == {"a": three}
    four = {g: {"a": three + ["op[v4]"]} for g in (1, 2, 3)}
    with pytest.raises(ValueError) as err:
        merge(_shards(tmp_path / "four", (1, 2, 3), every=four), str(tmp_path / "bad"))
    assert str(err.value) == (
        "1 vector of the manifest ran in no file given (a::op[v4]): their results would be "
        "counted nowhere. Merge every shard's results; a shard's -k, --deselect or node ids, "
        "or pytest-split groups computed from different durations files, leave vectors out")
    assert not (tmp_path / "bad.txt").exists()
    paths = _shards(tmp_path / "older", (1, 2, 3), every={1: {"a": three}, 2: {"a": three}})
    with pytest.raises(ValueError) as err:
        merge(paths, str(tmp_path / "bad"))
    assert str(err.value) == (f"{paths[2]} does not list the manifest's vectors, {paths[0]} "
                              f"does: run every shard with this version of gpsimd_pytest")


def _junit_file(path, cases, build=None):
    """A pytest JUnit file of ``cases``: ``(op[vector], failed)`` of library a,
    naming ``build`` (the plugin's property) when given."""
    props = (f'<properties><property name="gpsimd_build" value="{build}"/></properties>'
             if build else "")
    body = props + "".join(f'<testcase classname="ops.yaml.a" name="{name}" time="0.1">'
                   + ('<failure message="FAIL">FAIL</failure>' if failed else "") + "</testcase>"
                   for name, failed in cases)
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
                    f'errors="0" failures="0" skipped="0" tests="{len(cases)}" time="1">{body}'
                    f'</testsuite></testsuites>')
    return str(path)


def test_junit_files_must_hold_each_vector_once_with_the_results_outcome(tmp_path):
    """The JUnit files were merged as given: shard 2's left out (its
    failing [v2] with it), or an older run's in its place (where [v2]
    passed), made a merged JUnit file CI showed as all passing
    (``failures="0"``) while the merged results said ``1 failed``."""
    results = _shards(tmp_path, (1, 2, 3))
    one = _junit_file(tmp_path / "j1.xml", [("op[v1]", False)])
    two = _junit_file(tmp_path / "j2.xml", [("op[v2]", True)])
    three = _junit_file(tmp_path / "j3.xml", [("op[v3]", False), ("other[x]", False)])
    merge(results + [one, two, three], str(tmp_path / "merged"))
    suite = next(ET.parse(tmp_path / "merged.xml").getroot().iter("testsuite"))
    assert (suite.get("tests"), suite.get("failures")) == ("4", "1")
    old = _junit_file(tmp_path / "old2.xml", [("op[v2]", False)])
    for files, message in (
            ([one, three], "1 vector of the results in no JUnit file given (a::op[v2]): give "
                           "every shard's JUnit file, or none"),
            ([one, old, three], f"{old}: a::op[v2] passed in this JUnit file but failed in the "
                                f"results given: give each shard's JUnit file with its own "
                                f"results (this one is of another run)"),
            ([one, two, two, three], f"{two}: a::op[v2] is also in {two}: each vector belongs "
                                     f"to one shard's JUnit file")):
        with pytest.raises(ValueError) as err:
            merge(results + files, str(tmp_path / "bad"))
        assert str(err.value) == message
    assert not (tmp_path / "bad.txt").exists() and not (tmp_path / "bad.xml").exists()


def test_junit_files_must_name_the_results_build(tmp_path):
    """A JUnit file of another run whose vectors had the same outcomes (an
    older commit's shard 2, where [v2] failed too) passed its explore item,
    ``a::explore(op)``, which the results do not hold: shard 2's own file,
    where it failed, left out, the merged JUnit file showed it passing
    (``failures="1"``: [v2] alone). Each JUnit file names the build it
    tested now (the plugin's ``gpsimd_build`` property), as the results do."""
    results = _shards(tmp_path, (1, 2, 3), builds={1: "B", 2: "B", 3: "B"})
    one = _junit_file(tmp_path / "j1.xml", [("op[v1]", False)], "B")
    three = _junit_file(tmp_path / "j3.xml", [("op[v3]", False)], "B")
    two = _junit_file(tmp_path / "j2.xml", [("op[v2]", True), ("explore(op)", True)], "B")
    merge(results + [one, two, three], str(tmp_path / "merged"))
    suite = next(ET.parse(tmp_path / "merged.xml").getroot().iter("testsuite"))
    assert (suite.get("tests"), suite.get("failures")) == ("4", "2")
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [
        ("gpsimd_build", "B")]
    for build, said in (("A", "is a JUnit file of another build than the results given"),
                        (None, "does not say which build it tested, the results do")):
        old = _junit_file(tmp_path / "old2.xml", [("op[v2]", True), ("explore(op)", False)], build)
        with pytest.raises(ValueError) as err:
            merge(results + [one, old, three], str(tmp_path / "bad"))
        assert str(err.value) == (f"{old} {said}: give each shard's JUnit file of the run that "
                                  f"wrote its results (with this version of gpsimd_pytest)")
    assert not (tmp_path / "bad.txt").exists() and not (tmp_path / "bad.xml").exists()
