"""pytest plugin: a manifest's test vectors as pytest items.

Installed with the package (entry point ``pytest11``), it does nothing
unless asked: ``pytest --gpsimd-manifest ops.yaml`` collects that manifest,
and nothing else when no other path is given (it never looks for manifests
on its own, so a project's own test runs are unaffected). Each library is a
collector and each test vector an item, so a vector's id ends in
``lib::op[vector]`` (``ops.yaml::relu::relu_forward[n1000]``) and ``-k``,
``-x``, ``--lf``, ``--junitxml`` and pytest-xdist's ``-n`` work as for any
test.

The vectors run against the objects ``scons`` built: run ``scons`` (or
``scons <lib>``) first, where you run pytest (``--gpsimd-build-dir``: the
``BUILD_DIR``, default ``build``). The plugin reads the test plan the build
wrote (``<BUILD_DIR>/host/<lib>/testplan.json``) and fails a library's
vectors, saying to build first, when it is missing, is not the plan of
the manifest as it is now, or when the library's manifest entry (sources,
includes, ``cflags``, ops) or a file its objects were built from (a
kernel, a header, a shape source, the runtime), or the objects themselves,
changed since the last build recorded them (``gpsimd_build.freshness``;
``scons`` writes the record, and so does a ``ninja`` run on that path,
``gpsimd_build.ninjarecord``): old objects are never tested as if they were
the sources' objects. Each vector runs and is judged by the emulator's
``LibrarySession`` (one per library and process), the implementation the
SCons test node runs through ``python -m gpsimd_emu run``: a failure's
message is the node's ``FAIL`` line, a pass prints the ``PASS`` line
(``pytest -rP`` shows it), and a checks-only vector whose checks all
passed (``CHECKED (no reference)``) passes and prints that line; the error figures and warnings are JUnit
properties.

The run writes the HTML report of the vectors it ran
(``gpsimd_build.report``) to ``<BUILD_DIR>/host/pytest-report.html``
(``--gpsimd-report FILE`` elsewhere; the build's own ``report.html`` is
left alone), in manifest order whatever the order they ran in; each
vector's result rides on its item's report, which xdist carries from a
worker to the controlling process as it is made, so a worker that crashes
loses none it made (the vector it was running counts failed). The last
run's report goes as a run starts.

The vectors run in the emulator's program the build made
(``<BUILD_DIR>/host/emu/gpsimd-zygote``, as the build's test commands do),
when the record vouches for it as for a library's objects; else every
vector fails, saying to build it. The header says which.

With ``--gpsimd-explore``, each op is also an item, ``lib::explore(op)``:
``scons explore``'s search for a failing input
(``python -m gpsimd_explore``, run once per library in a process of
its own that dies with pytest, bounded by the vectors' limits): it passes
when the op is ``EXPLORED``, fails with the ``FALSIFIED`` line and the
smallest failing example, and skips when ``SKIPPED``
(``--gpsimd-explore-examples N``, ``--gpsimd-explore-seed S``).

Options: ``--gpsimd-manifest FILE``, ``--gpsimd-build-dir DIR``,
``--gpsimd-timeout S``, ``--gpsimd-no-checks``, ``--gpsimd-allow-paths
DIRS`` (the SConstruct's ``EMU_TIMEOUT``, ``EMU_CHECKS=0`` and
``ALLOW_PATHS``), ``--gpsimd-report FILE``. Paths given are relative to
the folder pytest runs in; the project's root (what the plans' paths are
relative to) is the one the build recorded in its folder
(``gpsimd_build.project_record``), so ``--gpsimd-build-dir DIR`` alone runs
that build's manifest from any folder. Beside the report go the results
and the summary, which ``python -m gpsimd_pytest.merge`` merges across
shards of one build (``gpsimd_pytest.merge``; the results name the build
they tested, ``gpsimd_build.freshness.identity``).
"""

import os
import sys
from typing import Dict, List, Optional, Tuple

import pytest

from .failure import VectorFailed
from .items import ManifestFile

__all__ = ["VectorFailed"]


def pytest_addoption(parser) -> None:
    """The plugin's command-line options (module docstring)."""
    from gpsimd_emu.client.values import argtype, parse_timeout
    group = parser.getgroup("gpsimd", "GPSIMD test vectors (gpsimd-build)")
    group.addoption("--gpsimd-manifest", metavar="OPS_YAML", default=None,
                    help="collect this manifest's test vectors (one item per vector) and run "
                         "them against the objects scons built")
    group.addoption("--gpsimd-build-dir", metavar="DIR", default=None,
                    help="the BUILD_DIR scons built into (default: build); alone, it also "
                         "names the project and its manifest, from the build's record")
    group.addoption("--gpsimd-timeout", metavar="S", type=argtype(parse_timeout), default=None,
                    help="seconds each run of a vector's cores may take (default: the "
                         "emulator's, 60)")
    group.addoption("--gpsimd-no-checks", action="store_true", default=False,
                    help="run the emulator without its checks (as EMU_CHECKS=0)")
    group.addoption("--gpsimd-allow-paths", metavar="DIRS", default="",
                    help="folders outside this one the manifest may name (as ALLOW_PATHS)")
    group.addoption("--gpsimd-explore", action="store_true", default=False,
                    help="also one item per op: `scons explore`'s search for a failing input "
                         "(EXPLORED passes, FALSIFIED fails with the example, SKIPPED skips)")
    group.addoption("--gpsimd-explore-examples", metavar="N", type=int, default=100,
                    help="inputs drawn per op (as EXPLORE_EXAMPLES; default 100)")
    group.addoption("--gpsimd-explore-seed", metavar="S", type=int, default=0,
                    help="the search's seed (as EXPLORE_SEED; default 0)")
    group.addoption("--gpsimd-report", metavar="FILE", default=None,
                    help="where to write the HTML report of the vectors run (default: "
                         "<build dir>/host/pytest-report.html; the results .json and the "
                         "summary .txt beside it, for python -m gpsimd_pytest.merge)")


def pytest_configure(config) -> None:
    """With ``--gpsimd-manifest`` (or ``--gpsimd-build-dir`` alone: the
    manifest the build recorded): collect the manifest (alone, unless
    paths were given too) through :class:`_Vectors`. The project's root is
    the one the build recorded in its folder
    (``gpsimd_build.project_record``), else the working directory."""
    from gpsimd_build import project_record
    manifest = config.getoption("gpsimd_manifest")
    build_opt = config.getoption("gpsimd_build_dir")
    if not manifest and not build_opt:
        return
    here = str(config.invocation_params.dir)
    build_abs = os.path.abspath(os.path.join(here, build_opt or "build"))
    recorded = project_record.read(build_abs)
    if manifest:
        path = os.path.abspath(os.path.join(here, manifest))
    elif recorded is None:
        raise pytest.UsageError(f"--gpsimd-build-dir: {build_opt}: no record of a project "
                                f"({project_record.RECORD_NAME}): build it first, or give "
                                f"--gpsimd-manifest")
    else:
        path = recorded[1]
    if not os.path.isfile(path):
        raise pytest.UsageError(f"--gpsimd-manifest: {manifest or path}: no such file")
    root = recorded[0] if recorded else here
    build_dir = os.path.relpath(build_abs, root)
    if build_dir.startswith(".."):
        build_dir = build_abs
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    if not given:
        config.args[:] = [path]
    elif not any(os.path.abspath(a) == path for a in config.args):
        config.args.append(path)
    config.pluginmanager.register(_Vectors(config, path, root, build_dir), "gpsimd-vectors")


class _Vectors:
    """The active plugin: collects the manifest, keeps one session per
    library, ends them with the test session."""

    def __init__(self, config, manifest: str, root: str, build_dir: str):
        self.config = config
        self.manifest = manifest
        #: the project's folder (plans' and records' paths are relative to it)
        self.root = root
        #: BUILD_DIR, relative to the root (absolute when outside it)
        self.build_dir = build_dir
        self.sessions: Dict[str, Tuple[Optional[object], Optional[str]]] = {}
        #: the record of what each library's objects were built from (read once)
        self._inputs = None
        #: (the emulator program's path or None, why not), decided once
        self._zygote: Optional[Tuple[Optional[str], str]] = None
        #: each library's explore record, or why there is none (made once)
        self._explored: Dict[str, Tuple[Optional[dict], str]] = {}
        #: the manifest's libraries, once collected
        self.libraries: Optional[list] = None
        #: [order, library, multicore, result JSON] of each vector run here
        #: (in xdist's controlling process, from the workers' reports)
        self.results: List[list] = []

    def pytest_collect_file(self, file_path, parent):
        if os.path.abspath(str(file_path)) == self.manifest:
            return ManifestFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)     # (before junitxml's writes its file: write_report)
    def pytest_sessionfinish(self, session) -> None:
        for client, _ in self.sessions.values():
            if client is not None:
                client.close()
        self.sessions.clear()
        if hasattr(self.config, "workerinput"):    # (an xdist worker: its reports carry them)
            return
        if self.results or getattr(self.config.option, "splits", None):
            self.write_report()     # (a shard writes its files even with no vector: merge)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """A vector's result rides on its report (``gpsimd_result``), which
        pytest-xdist carries from a worker to the controlling process as it
        is made: the results of a worker that crashes later are kept."""
        outcome = yield
        row = getattr(item, "gpsimd_row", None)
        if call.when == "call" and row is not None:
            outcome.get_result().gpsimd_result = row

    def pytest_runtest_logreport(self, report) -> None:
        """Keep each vector's result (module text), in the process that
        writes the report; a vector whose item failed with none (its
        process crashed: pytest-xdist's "worker crashed while running",
        a setup that failed, or an error of the plugin) is counted failed,
        with the last line of pytest's report."""
        if hasattr(self.config, "workerinput"):
            return
        row = getattr(report, "gpsimd_result", None)
        if row is not None:
            self.results.append(row)
        elif report.failed:
            lost = self.lost_vector(report.nodeid, str(report.longrepr).strip().splitlines())
            if lost is not None:
                self.results.append(lost)

    def lost_vector(self, nodeid: str, text: List[str]) -> Optional[list]:
        """The results row of the vector of ``nodeid`` that failed without
        a result (``text``: pytest's report of it), or None when the node is
        no vector of the manifest or has a row already."""
        from gpsimd_device.results import VectorResult
        parts = nodeid.split("::")
        if len(parts) < 3 or self.manifest_libraries() is None:
            return None
        for index, lib in enumerate(self.libraries):
            for i, op in enumerate(lib.ops):
                for j, v in enumerate(op.vectors):
                    if (lib.name, f"{op.name}[{v.name}]") == (parts[-2], parts[-1]):
                        if any(r[1] == lib.name and r[3]["op"] == op.name
                               and r[3]["vector"] == v.name for r in self.results):
                            return None
                        why = text[-1] if text else "no report"
                        return [[index, i, j], lib.name, lib.multicore, VectorResult(
                            op.name, v.name, str(v.location), "fail",
                            f"no result ({why})").to_json()]
        return None

    def report_path(self) -> Optional[str]:
        """Where the report goes (``--gpsimd-report``, else the build's
        ``host/pytest-report.html``), or None when the build has no such
        folder (nothing was built there: a typo in ``--gpsimd-build-dir``?
        No folder of ours appears)."""
        path = self.config.getoption("gpsimd_report")
        if path:
            return os.path.join(str(self.config.invocation_params.dir), path)
        folder = os.path.join(self.root, self.build_dir, "host")
        return os.path.join(folder, "pytest-report.html") if os.path.isdir(folder) else None

    def pytest_sessionstart(self, session) -> None:
        """The last run's report, results and summary go as this run starts
        (this run's are written at its end): a run that ends without
        writing its own (killed, interrupted under xdist, or one that ran
        no vector) must not leave the last run's ``total: ... passed``."""
        path = None if hasattr(self.config, "workerinput") else self.report_path()
        if path:
            base = path[:-len(".html")] if path.endswith(".html") else path
            for name in {path, base + ".json", base + ".txt"}:
                try:
                    os.unlink(name)
                except FileNotFoundError:
                    pass
                except OSError as e:    # (the run goes on; its end says it too)
                    sys.stderr.write(f"gpsimd: cannot remove the last report {name}: "
                                     f"{e.strerror}\n")

    def write_report(self) -> None:
        """The report, results and summary of the vectors run, in manifest
        order (``gpsimd_pytest.merge.write_outputs``), and the build they
        tested named in the JUnit file too (``--junitxml``: a property of
        its test suite, ``merge.BUILD_PROPERTY``), for the merge to check."""
        from _pytest import junitxml    # (its LogXML: record_testsuite_property's own way)

        from .merge import BUILD_PROPERTY, write_outputs
        path = self.report_path()
        if path is None:
            sys.stderr.write(f"gpsimd: no report written: there is no "
                             f"{os.path.join(self.build_dir, 'host')} (--gpsimd-report FILE "
                             f"writes it elsewhere)\n")
            return
        splits = getattr(self.config.option, "splits", None)    # (pytest-split's shards)
        shard = (int(self.config.option.group), int(splits)) if splits else None
        try:
            build = self.identity()
            every = None if self.libraries is None else {
                lib.name: [f"{op.name}[{v.name}]" for op in lib.ops for v in op.vectors]
                for lib in self.libraries}
            write_outputs(path, self.results, not self.config.getoption("gpsimd_no_checks"),
                          shard, build, every)
        except OSError as e:
            sys.stderr.write(f"gpsimd: cannot write the report {path}: {e}\n")
            return
        junit = self.config.stash.get(junitxml.xml_key, None)     # (--junitxml)
        if junit is not None and build is not None:
            junit.add_global_property(BUILD_PROPERTY, build)

    def identity(self) -> Optional[str]:
        """What this run tested (``gpsimd_build.freshness.identity`` of every
        library of the manifest, from the record the stale checks read), for
        ``gpsimd_pytest.merge``; None when the manifest cannot be read."""
        from gpsimd_build import freshness
        if self.manifest_libraries() is None:
            return None
        return freshness.identity(self._record(), self.libraries, self.build_dir, self.root)

    def manifest_libraries(self) -> Optional[list]:
        """The manifest's libraries (read here in xdist's controlling
        process, which collects nothing), or None when it cannot be read."""
        if self.libraries is None:
            from gpsimd_build.manifest import ManifestError
            try:
                self.libraries = self.load().libraries
            except ManifestError:
                return None
        return self.libraries

    def load(self):
        """The manifest's collection, its paths relative to the project as
        the build read them.

        Raises:
            ManifestError: it cannot be read.
        """
        from gpsimd_build.manifest import load_manifest
        return load_manifest(os.path.relpath(self.manifest, self.root), root=self.root,
                             allow_paths=self.config.getoption("gpsimd_allow_paths"))

    def client(self, plan: str):
        """The emulator's client for the test plan at ``plan``
        (``gpsimd_emu.client.vectors.VectorClient``: the vectors run in a process
        of their own, each request bounded in time, as under scons)."""
        from gpsimd_emu.client.vectors import DEFAULT_TIMEOUT, VectorClient
        timeout = self.config.getoption("gpsimd_timeout") or DEFAULT_TIMEOUT
        argv = ["--root", self.root, "--timeout", repr(float(timeout))]
        if self.config.getoption("gpsimd_no_checks"):
            argv.append("--no-checks")
        argv += ["--zygote", self.zygote()[0]]
        return VectorClient(plan, argv, timeout)

    def pytest_report_header(self, config) -> str:
        path, why = self.zygote()
        if path:    # (from where pytest runs)
            return ("gpsimd: the vectors run in "
                    f"{os.path.relpath(path, str(config.invocation_params.dir))}")
        return f"gpsimd: the vectors cannot run: {why}"

    def zygote(self) -> Tuple[Optional[str], str]:
        """``(path, "")`` of the emulator's program the last ``scons``
        built (``<BUILD_DIR>/host/emu/gpsimd-zygote``, as the build's test
        commands run it) when the record vouches for it as it does for a
        library's objects; else ``(None, why not and the command that
        builds it)``."""
        if self._zygote is None:
            from gpsimd_build import freshness
            from gpsimd_device.zygote import PROGRAM_NAME
            rel = os.path.join(self.build_dir, "host", "emu", PROGRAM_NAME)
            build = f"build it first: {self.scons(rel)}"
            if not os.path.isfile(os.path.join(self.root, rel)):
                self._zygote = (None, f"no {rel}: {build}")
            else:
                why = freshness.stale_entry(self._record(), freshness.ZYGOTE_ENTRY,
                                            freshness.ZYGOTE_ENTRY, self.root)
                if why is None:
                    self._zygote = (os.path.join(self.root, rel), "")
                else:
                    why = ("no record of what it was built from" if why.startswith("no record")
                           else f"{why} the last build")
                    self._zygote = (None, f"{rel} may be out of date ({why}): {build}")
        return self._zygote

    def scons(self, target: str = "") -> str:
        """The command that builds ``target`` into this run's build folder
        (``BUILD_DIR``, the shipped SConstruct's variable, when it is not
        the default), quoted for a message."""
        words = ["scons"] + ([] if os.path.normpath(self.build_dir) == "build"
                             else [f"BUILD_DIR={self.build_dir}"]) + ([target] if target else [])
        return "`" + " ".join(words) + "`"

    def _record(self):
        """The record of what the objects were built from (read once)."""
        from gpsimd_build import freshness
        if self._inputs is None:
            self._inputs = freshness.read_record(
                os.path.join(self.root, self.build_dir, "host", freshness.RECORD_NAME))
        return self._inputs

    def session_for(self, lib) -> Tuple[Optional[object], Optional[str]]:
        """``(VectorClient, None)`` for manifest library ``lib``, or
        ``(None, why it cannot run)``; made once per library."""
        if lib.name not in self.sessions:
            self.sessions[lib.name] = self._open(lib)
        return self.sessions[lib.name]

    def explored(self, lib) -> Tuple[Optional[dict], str]:
        """``(record, "")``: what explore found for each op of ``lib`` (run
        once per library: ``gpsimd_pytest.explore.run``), or ``(None, why
        not)``."""
        if lib.name not in self._explored:
            from .explore import run
            self._explored[lib.name] = run(self, lib)
        return self._explored[lib.name]

    def _plan(self, lib) -> Tuple[Optional[str], str]:
        """``(path, "")`` of the plan the build's test node runs for
        ``lib`` when it and the objects are those of the manifest and
        sources as they are now, else ``(None, why and the command that
        builds it)``."""
        from gpsimd_build import testplan
        from gpsimd_device.plan import PlanError, TestPlan
        folder = os.path.join(self.build_dir, "host", lib.name)
        rel = os.path.join(folder, testplan.PLAN_NAME)
        build = f"build it first: {self.scons(lib.name)}"
        path = os.path.join(self.root, rel)
        if not os.path.exists(path):
            return None, f"no test plan {rel}: {build}"
        try:
            plan = TestPlan.load(path)
        except PlanError as e:
            return None, f"{e}: {build}"
        want = [testplan.op_plan(op).to_json() for op in lib.ops]
        if [op.to_json() for op in plan.ops] != want or plan.library != lib.name:
            return None, (f"the test plan {rel} is not the manifest's as it is now (edited "
                          f"since the last build?): {build}")
        if lib.shape_sources:
            # the plan the build's test node runs: every output from its
            # shape function (its freshness is in the record, below)
            rel = os.path.join(folder, testplan.SHAPED_PLAN_NAME)
            try:
                plan = TestPlan.load(os.path.join(self.root, rel))
            except PlanError as e:
                return None, f"{e}: {build}"
        why = self._stale(lib)
        if why:
            return None, f"the objects of {lib.name} may be out of date ({why}): {build}"
        if self.zygote()[0] is None:
            return None, self.zygote()[1]
        return os.path.join(self.root, rel), ""

    def _open(self, lib):
        plan, why = self._plan(lib)
        return (self.client(plan), None) if plan else (None, why)

    def _stale(self, lib) -> Optional[str]:
        """Why the library's core objects may not be those of its manifest
        entry and sources as they are now (``gpsimd_build.freshness``: the
        record the last build wrote), or None."""
        from gpsimd_build import freshness
        why = freshness.stale_input(self._record(), lib, self.root)
        if why is None or why.startswith("no record"):
            return why
        return f"{why} the last build"
