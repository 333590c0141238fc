"""The outputs of a plugin run, and one set of them from several runs
(shards of one test run, e.g. ``pytest-split``'s ``--splits N --group i``
on several CI jobs).

A run writes, for the vectors it ran, three files with one base name
(``<BUILD_DIR>/host/pytest-report`` unless ``--gpsimd-report``):
``.html``, the report (``gpsimd_build.report``); ``.json``, the results
(``{"format": 1, "checks": bool, "vectors": [[order, library, multicore,
result], ...], "build": identity}``, a result as ``gpsimd_device.results.VectorResult.to_json``);
``.txt``, the summary (one ``lib: N passed, M failed`` line per library,
then ``total: ...``; ``gpsimd_build.results_summary``). All three are in
manifest order whatever order the vectors ran in. The results also list
every vector of the manifest, run or not (``"every": {library:
["op[vector]", ...]}``).

``python -m gpsimd_pytest.merge -o BASE FILE...`` merges the shards'
results files (``.json``) and JUnit files (``.xml``, pytest's
``--junitxml``) into ``BASE.html``, ``BASE.json``, ``BASE.txt`` and
``BASE.xml``, the same as one run's in every test id, outcome, message and
property (the JUnit times, host name and timestamp aside: the times are
summed, the others the first file's), and prints the summary. A vector in
two shards is an error (exit status 2), as is a file that cannot be read,
and, for pytest-split's shards (each run's results say which it was,
``"shard": [group, splits]``), a shard missing or given twice, and
results of different builds: each run's results name what it tested
(``"build"``: ``gpsimd_build.freshness.identity``, the same for every
run on one build of one commit, on any machine and in any ``BUILD_DIR``),
so that a shard re-run after a kernel fix, or run on another checkout,
never makes a pass no single build made; and a vector of the manifest
that no file ran (a shard's ``-k``, ``--deselect`` or node ids, or
pytest-split's groups computed from two different durations files), whose
failure would be counted nowhere. JUnit files, when given, must hold each
vector of the results once, with its outcome there (a shard's JUnit file
left out, or an older run's, would make a merged JUnit file that passes
where the results fail), and each must name the results' build
(``BUILD_PROPERTY``): an older run's would pass its explore items and the
project's own tests, which no results file holds.
"""

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["BUILD_PROPERTY", "write_outputs", "merge", "main"]

#: The property of a run's JUnit test suite that names the build it tested
#: (its results' ``"build"``), written by the plugin with ``--junitxml``.
BUILD_PROPERTY = "gpsimd_build"


def write_outputs(report: str, vectors: Sequence[list], checks: bool,
                  shard: Optional[Tuple[int, int]] = None,
                  build: Optional[str] = None,
                  every: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """Write the report at ``report`` and, beside it (its name without
    ``.html``), the ``.json`` results and the ``.txt`` summary of
    ``vectors`` (``[order, library, multicore, result JSON]`` each) from a
    run with (``checks``) or without the emulator's checks; ``shard``:
    ``(group, splits)`` of a run that is one of pytest-split's shards
    (``--splits N --group i``), kept in the results (``"shard"``) for
    :func:`merge`; ``build``: the identity of what the run tested
    (``gpsimd_build.freshness.identity``), kept as ``"build"``; ``every``:
    each library's vectors in the manifest (``"op[vector]"``, in manifest
    order), run or not, kept as ``"every"``. Returns the summary's lines.

    Raises:
        OSError: a file cannot be written.
    """
    from gpsimd_build import results_summary as states
    from gpsimd_build.report import ReportLibrary
    from gpsimd_build.report_files import write_report
    from gpsimd_device.atomic import write_if_changed
    from gpsimd_device.results import LibraryResults, VectorResult
    ordered = sorted(vectors, key=lambda r: list(r[0]))
    libraries: Dict[str, ReportLibrary] = {}
    for _, name, multicore, doc in ordered:
        lib = libraries.setdefault(name, ReportLibrary(name, "current", LibraryResults(name),
                                                       multicore, checks=checks))
        lib.results.vectors.append(VectorResult.from_json(doc))
    lines = states.summary_lines(((n, states.RUN, lib.results) for n, lib in libraries.items()),
                                 everything=False)
    base = report[:-len(".html")] if report.endswith(".html") else report
    write_report(report, list(libraries.values()), totals=lines[-1])
    doc = {"format": 1, "checks": checks, "vectors": [list(r) for r in ordered]}
    if shard is not None:
        doc["shard"] = list(shard)
    if build is not None:
        doc["build"] = build
    if every is not None:
        doc["every"] = every
    write_if_changed(base + ".json", json.dumps(doc, sort_keys=True, separators=(",", ":"))
                     + "\n")
    write_if_changed(base + ".txt", "\n".join(lines) + "\n")
    return lines


def _results(path: str) -> Tuple[bool, List[list], Optional[Tuple[int, int]], Optional[str],
                                 Optional[Dict[str, List[str]]]]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise ValueError("not a results file of format 1 (gpsimd_pytest.merge)")
    shard, build, every = doc.get("shard"), doc.get("build"), doc.get("every")
    return (bool(doc["checks"]), [list(v) for v in doc["vectors"]],
            None if shard is None else (int(shard[0]), int(shard[1])),
            None if build is None else str(build),
            None if every is None else {str(k): [str(i) for i in v] for k, v in every.items()})


def _check_every(everys: Dict[str, Optional[Dict[str, List[str]]]],
                 ran: Sequence[list]) -> Optional[Dict[str, List[str]]]:
    """Every vector of the manifest ran in some file (``ran``: their rows):
    returns the manifest's vectors (``"every"``, the same in every file;
    None when no file lists them).

    Raises:
        ValueError: a vector no file ran, files that list different
            vectors, or one that lists none beside one that does.
    """
    first = next((p for p, e in everys.items() if e is not None), None)
    if first is None:
        return None
    for path, every in everys.items():
        if every != everys[first]:
            raise ValueError(f"{first} and {path} list different vectors of the manifest"
                             if every is not None else
                             f"{path} does not list the manifest's vectors, {first} does: run "
                             f"every shard with this version of gpsimd_pytest")
    done = {_result_key(r) for r in ran}
    missing = [f"{lib}::{name}" for lib, names in everys[first].items() for name in names
               if (lib, name) not in done]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                          else "")
        raise ValueError(f"{len(missing)} vector{'s' if len(missing) > 1 else ''} of the "
                         f"manifest ran in no file given ({shown}): their results would be "
                         f"counted nowhere. Merge every shard's results; a shard's -k, "
                         f"--deselect or node ids, or pytest-split groups computed from "
                         f"different durations files, leave vectors out")
    return everys[first]


def _check_builds(builds: Dict[str, Optional[str]]) -> Optional[str]:
    """Every run tested one build (their ``"build"``, module text); returns
    it (None when no run says).

    Raises:
        ValueError: two runs tested different builds, or one does not say
            which it tested and another does.
    """
    first = next((p for p, b in builds.items() if b is not None), None)
    if first is None:
        return None
    for path, build in builds.items():
        if build is None:
            raise ValueError(f"{path} does not say which build it tested, {first} does: "
                             f"run every shard with this version of gpsimd_pytest")
        if build != builds[first]:
            raise ValueError(f"{first} and {path} are results of different builds (their "
                             f"objects, emulator or test vectors differ): run every "
                             f"shard on one build")
    return builds[first]


def _result_key(row) -> Tuple[str, str]:
    """``(library, "op[vector]")`` of a results row (as a JUnit test case
    names it: :func:`_vector_key`)."""
    return row[1], f"{row[3].get('op')}[{row[3].get('vector')}]"


def _check_shards(shards: Dict[str, Optional[Tuple[int, int]]]) -> None:
    """Every shard of a pytest-split run is there, once: a missing one
    would leave its vectors, failures included, counted nowhere.

    Raises:
        ValueError: a shard missing or given twice, shards of different
            splits, or a shard merged with a run that was not split.
    """
    split = {path: s for path, s in shards.items() if s is not None}
    if not split:
        return
    if len(split) != len(shards):
        whole = next(p for p, s in shards.items() if s is None)
        raise ValueError(f"{whole} is not a shard (no --splits), the others are")
    counts = {n for _, n in split.values()}
    if len(counts) > 1:
        raise ValueError(f"the shards are of different splits ({sorted(counts)})")
    (n,) = counts
    seen: Dict[int, str] = {}
    for path, (group, _) in split.items():
        if group in seen:
            raise ValueError(f"{path}: shard {group} of {n} is also {seen[group]}")
        seen[group] = path
    missing = [g for g in range(1, n + 1) if g not in seen]
    if missing:
        raise ValueError(f"shard{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(map(str, missing))} of {n} missing (--splits {n}): "
                         f"their vectors would be counted nowhere")


def _vector_key(case: ET.Element) -> Tuple[str, str]:
    """``(library, "op[vector]")`` of a JUnit test case (its class name
    ends with the library: ``ops.yaml.team``)."""
    return (case.get("classname") or "").rsplit(".", 1)[-1], case.get("name") or ""


def _read_junit(paths: Sequence[str]) -> Tuple[ET.ElementTree, List[Tuple[str, ET.Element]],
                                                Dict[str, Optional[str]]]:
    """The first file's tree, every test case of ``paths`` with its file,
    and the build each file names (``BUILD_PROPERTY``; None: none)."""
    first, cases, builds = None, [], {}
    for path in paths:
        tree = ET.parse(path)
        suites = [tree.getroot()] if tree.getroot().tag == "testsuite" else \
            list(tree.getroot().iter("testsuite"))
        if first is None:
            first = tree
        builds[path] = next((p.get("value") for suite in suites
                             for p in suite.findall("properties/property")
                             if p.get("name") == BUILD_PROPERTY), None)
        for suite in suites:
            cases += [(path, case) for case in suite.iter("testcase")]
    return first, cases, builds


def _check_junit_builds(builds: Dict[str, Optional[str]], build: Optional[str]) -> None:
    """Each JUnit file is of a run of ``build`` (the results'; None: no run
    says): a file of another run passes its explore items and the
    project's own tests unchecked, which the results do not hold.

    Raises:
        ValueError: a JUnit file of another build, or that names none.
    """
    for path, named in builds.items():
        if build is not None and named != build:
            said = ("is a JUnit file of another build than the results given" if named
                    else "does not say which build it tested, the results do")
            raise ValueError(f"{path} {said}: give each shard's JUnit file of the run that "
                             f"wrote its results (with this version of gpsimd_pytest)")


def _check_junit(cases: Sequence[Tuple[str, ET.Element]], vectors: Sequence[list]) -> None:
    """Each vector of the results is one test case of the JUnit files, with
    the results' outcome (failed exactly when its status is ``fail``): a
    shard's JUnit file left out, or one of another run (an older commit's,
    where the vector passed), would otherwise make a merged JUnit file that
    CI shows as passing where the merged results fail. Test cases that are
    no vector of the results (a project's own tests) are kept as given.

    Raises:
        ValueError: a vector in no JUnit file or in two, or with another
            outcome there than in the results.
    """
    want = {_result_key(r): r[3].get("status") for r in vectors}
    found: Dict[Tuple[str, str], str] = {}
    for path, case in cases:
        key = _vector_key(case)
        if key not in want:
            continue
        name = f"{key[0]}::{key[1]}"
        if key in found:
            raise ValueError(f"{path}: {name} is also in {found[key]}: each vector belongs to "
                             f"one shard's JUnit file")
        found[key] = path
        said = ("skipped" if case.find("skipped") is not None else "failed"
                if case.find("failure") is not None or case.find("error") is not None
                else "passed")
        if said != ("failed" if want[key] == "fail" else "passed"):
            raise ValueError(f"{path}: {name} {said} in this JUnit file but "
                             f"{'failed' if want[key] == 'fail' else 'passed'} in the results "
                             f"given: give each shard's JUnit file with its own results (this "
                             f"one is of another run)")
    missing = [f"{lib}::{name}" for lib, name in want if (lib, name) not in found]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                          else "")
        raise ValueError(f"{len(missing)} vector{'s' if len(missing) > 1 else ''} of the results "
                         f"in no JUnit file given ({shown}): give every shard's JUnit file, "
                         f"or none")


def _junit(first: ET.ElementTree, cases: Sequence[ET.Element],
           order: Dict[Tuple[str, str], list]) -> ET.ElementTree:
    """One JUnit tree (``first``, the first file's) of ``cases``, in
    manifest order (``order``: ``(library, "op[vector]")`` -> order;
    others after, as given), with the counts and summed times of a single
    run."""
    def key(indexed):
        i, case = indexed
        where = _vector_key(case)
        return (0, order[where], 0) if where in order else (1, [], i)
    cases = [c for _, c in sorted(enumerate(cases), key=key)]
    root = first.getroot()
    suite = root if root.tag == "testsuite" else next(root.iter("testsuite"))
    for old in list(suite.iter("testcase")):
        suite.remove(old)
    suite.extend(cases)
    suite.set("tests", str(len(cases)))
    for attr, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        suite.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))
    suite.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")
    return first


def merge(paths: Sequence[str], base: str) -> List[str]:
    """Merge the shards' files ``paths`` (module text) into ``base`` +
    ``.html``, ``.json``, ``.txt`` (and ``.xml`` when JUnit files are
    among them). Returns the summary's lines.

    Raises:
        ValueError: a vector in two shards, a shard missing, a vector of
            the manifest in none, shards of different builds, JUnit files
            that do not hold each vector once with its outcome, a file of
            another kind.
        OSError: a file cannot be read or written.
    """
    vectors, checks, seen, junit, shards, builds, everys = [], True, {}, [], {}, {}, {}
    for path in paths:
        if path.endswith(".xml"):
            junit.append(path)
            continue
        try:
            shard_checks, shard, shards[path], builds[path], everys[path] = _results(path)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise ValueError(f"{path}: {e}") from None
        checks = checks and shard_checks
        for row in shard:
            where = (row[1], row[3].get("op"), row[3].get("vector"))
            if where in seen:
                raise ValueError(f"{path}: {where[0]}::{where[1]}[{where[2]}] is also in "
                                 f"{seen[where]}: each vector belongs to one shard")
            seen[where] = path
        vectors += shard
    build = _check_builds(builds)
    _check_shards(shards)
    every = _check_every(everys, vectors)
    if junit:
        first, cases, junit_builds = _read_junit(junit)
        _check_junit_builds(junit_builds, build)
        _check_junit(cases, vectors)
    lines = write_outputs(base + ".html", vectors, checks, build=build, every=every)
    if junit:
        order = {_result_key(r): list(r[0]) for r in vectors}
        tree = _junit(first, [case for _, case in cases], order)
        tree.write(base + ".xml", encoding="utf-8", xml_declaration=True)
    return lines


def main(argv=None) -> int:
    """``python -m gpsimd_pytest.merge -o BASE FILE...`` (module text)."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_pytest.merge",
                                description="Merge the shards of a gpsimd pytest run.")
    p.add_argument("-o", "--output", required=True, metavar="BASE",
                   help="write BASE.html, BASE.json, BASE.txt (and BASE.xml)")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="each shard's results (.json, beside its report) and JUnit (.xml)")
    args = p.parse_args(argv)
    try:
        lines = merge(args.files, args.output)
    except (ValueError, OSError, ET.ParseError) as e:
        print(f"gpsimd_pytest.merge: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
