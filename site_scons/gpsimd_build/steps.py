"""Build steps that are our own code, as command lines.

Every action of the graph is a command line (ARCHITECTURE.md), so that the same graph runs under SCons and under ninja. The
steps that are not a compiler, linker or archiver run this module:

``python -m gpsimd_build.steps pack --strip STRIP --library L --member LSP CORE LINKED PACKED STRIPPED ...``
    for each ``--member`` (one per core of a library: ``CORE`` 0..7, or
    ``none`` for single-core), runs ``STRIP --strip-unneeded -o STRIPPED
    LINKED`` (``STRIP``: a program, split like a shell word list), then
    wraps the stripped object into the host pack container
    (``gpsimd_device.pack``), written atomically. One action per library,
    not per core: a Python start-up costs ten strips (BENCHMARKS.md), and
    the eight core objects of a library are always relinked together.
    When one member fails, what this run wrote for the others is removed;
``python -m gpsimd_build.steps stack-report --library L --op NAME[:KERNEL]=BYTES ... -o OUT CI...``
    merges GCC call graphs (``-fcallgraph-info=su``) and writes the worst
    static stack chain of each op (from its kernel function's wrapper,
    ``KERNEL`` when it is not the op name) (``gpsimd_build.stackreport``); lines over
    the op's stack size start with ``WARNING`` and are also printed;
``python -m gpsimd_build.steps check-registration -o OUT FACTS REGISTRATION``
    checks a shape library's registration (JSON of ``python -m
    gpsimd_emu.shapes registration``) against the manifest's facts
    (``gpsimd_build.regcheck``): each mismatch one located line on stderr,
    exit status 1; OUT is written only when they agree;
``python -m gpsimd_build.steps digests -o OUT --base DIR LIST``
    prints and writes one SHA-256 per artifact named in the file ``LIST``
    (one path per line, relative to ``DIR``, BUILD_DIR, and so printed:
    the same text for any BUILD_DIR), sorted by path (``scons digests``);
``python -m gpsimd_build.steps summary -o OUT --all N [--since STAMP] RESULTS...``
    a ninja build's summary: one line per library whose passing results
    file is given, in a state of ``gpsimd_build.results_summary`` (a
    failed run's ``.failed.json`` or a run's failure record ``.error.txt``
    when there are no passing results; results made before ``STAMP``, made
    as the ninja run began, were not run in this build), then ``all
    libraries: N passed, M failed`` when they are all ``N`` libraries of
    the collection, else ``total: ...``; written to OUT, which ninja
    prints with ``cat``. With ``--report PAGE`` (and ``--multicore LIB``
    per multicore library) also the HTML report of those results
    (``gpsimd_build.report``; each library's section kept in
    ``.report-cache`` beside it), written on every run of the step. When a
    vector failed or a library has no current results, the step prints
    the summary itself and exits 1 (ninja then prints no other summary,
    and its own status is 1). With ``--inputs SPEC --ninja-dir DIR``, it
    also records what ninja built each library from
    (``gpsimd_build.ninjarecord``: the pytest plugin's record, as scons
    writes it on its own path).

Stdlib only, so that it starts fast (``python -S``). Exit status 0 on
success, 1 with one ``gpsimd: <path>: <why>`` line on stderr otherwise.
"""

import argparse
import os
import stat
import sys
from typing import List, Optional

from gpsimd_device.atomic import write_atomically

__all__ = ["write_atomically", "main"]


def _pack(args: argparse.Namespace) -> None:
    import shlex
    import subprocess
    from gpsimd_device.pack import pack_bytes, pack_metadata
    from gpsimd_device.versions import VERSIONS
    written: List[str] = []
    try:
        for lsp, core, linked, packed, stripped in args.member:
            if core != "none" and not (core.isdigit() and int(core) < 8):
                raise ValueError(f"core {core!r} of {linked}: a core is 0..7 or none")
            strip = shlex.split(args.strip) + ["--strip-unneeded", "-o", stripped, linked]
            written.append(stripped)
            status = subprocess.call(strip)
            if status != 0:
                raise OSError(0, f"{shlex.join(strip)} failed (exit status {status})", stripped)
            with open(stripped, "rb") as f:
                payload = f.read()
            metadata = pack_metadata(args.library, lsp, None if core == "none" else int(core),
                                     VERSIONS)
            write_atomically(packed, pack_bytes(payload, metadata))
            written.append(packed)
    except BaseException:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise


def _stack_report(args: argparse.Namespace) -> None:
    from . import stackreport
    graphs = []
    for path in args.callgraphs:
        with open(path, encoding="utf-8") as f:
            graphs.append(stackreport.parse_ci(f.read(), path))
    ops = []
    for item in args.op:
        name, _, size = item.rpartition("=")
        op, _, kernel = name.partition(":")
        ops.append((op, int(size), kernel or op))
    lines = [r.line(args.library) for r in stackreport.op_report(stackreport.merge(graphs), ops)]
    for line in lines:
        if line.startswith("WARNING"):
            print(line)
    write_atomically(args.output, ("\n".join(lines) + "\n").encode("utf-8"))


class _CheckFailed(Exception):
    """The registration check found mismatches (already printed)."""


def _check_registration(args: argparse.Namespace) -> None:
    import json
    from gpsimd_device.shapes import Registration
    from .regcheck import check_registration, check_text
    with open(args.facts, encoding="utf-8") as f:
        facts = json.load(f)
    with open(args.registration, encoding="utf-8") as f:
        registration = Registration.loads(f.read())
    problems = check_registration(facts, registration)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        raise _CheckFailed()
    write_atomically(args.output, check_text(facts, registration).encode("utf-8"))


def _digests(args: argparse.Namespace) -> None:
    import hashlib
    with open(args.list, encoding="utf-8") as f:
        paths = sorted(p for p in f.read().splitlines() if p)
    lines = []
    for path in paths:
        h = hashlib.sha256()
        with open(os.path.join(args.base, path), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        lines.append(f"{h.hexdigest()}  {path}")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    write_atomically(args.output, text.encode("utf-8"))


def _library_state(path: str, since_ns: int):
    """``(name, state, results, results path or None)`` of the library whose
    passing results file is ``path`` (``<lib>/test-results.json``), for a
    ninja build's summary step: the passing results, else a failed run's
    (``.failed.json``), else a run's record of its failure without results
    (``.error.txt``, ``gpsimd_emu run --record-failures``); made at or after
    ``since_ns`` (this run's start) or not (``gpsimd_build.results_summary``)."""
    from gpsimd_device.results import LibraryResults, ResultsError

    from . import results_summary as states
    base = path[:-len(".json")] if path.endswith(".json") else path
    name = os.path.basename(os.path.dirname(path))

    def made(candidate):
        """The file's mtime (ns) when it is a regular file, else None."""
        try:
            st = os.stat(candidate)
        except OSError:
            return None
        return st.st_mtime_ns if stat.S_ISREG(st.st_mode) else None

    def loaded(candidate, mtime, older):
        try:
            res = LibraryResults.load(candidate)
        except ResultsError:
            return name, states.UNREADABLE, None, None
        state = states.RUN if mtime >= since_ns else older
        return res.library, state, (res if state in states.COUNTED else None), candidate

    mtime = made(path)
    if mtime is not None:
        return loaded(path, mtime, states.KEPT)
    mtime = made(base + ".error.txt")           # a run of this build without results
    if mtime is not None and mtime >= since_ns:
        return name, states.NO_RESULTS, None, None
    mtime = made(base + ".failed.json")
    if mtime is not None:
        return loaded(base + ".failed.json", mtime, states.STALE)
    return name, states.NOT_RUN, None, None


def _summary(args: argparse.Namespace) -> int:
    from . import results_summary as states
    since = 0
    if args.since:
        try:
            since = os.stat(args.since).st_mtime_ns
        except OSError:
            since = 0
    found = [_library_state(path, since) for path in args.results]
    lines = states.summary_lines(((n, st, res) for n, st, res, _ in found),
                                 len(args.results) == args.all)
    text = "\n".join(lines) + "\n"
    write_atomically(args.output, text.encode("utf-8"))
    if args.report:
        # always written, unchanged or not: it is an output of this step,
        # and ninja, which compares times, would otherwise run the step on
        # every build after results were rewritten with the same content
        from .report import render_from_files
        cache = os.path.join(os.path.dirname(args.report) or ".", ".report-cache")
        entries = [(n, states.report_state(st), p, n in args.multicore)
                   for n, st, _, p in found]
        write_atomically(args.report,
                         render_from_files(entries, True, lines[-1], cache).encode("utf-8"))
    if args.inputs:
        from . import freshness, ninjarecord
        record = os.path.join(os.path.dirname(args.inputs), freshness.RECORD_NAME)
        try:
            ninjarecord.update(args.inputs, args.ninja_dir, record)
        except OSError as e:
            sys.stderr.write(f"gpsimd_build: cannot write {record}: {e.strerror} (errno "
                             f"{e.errno}); the pytest plugin will ask for another build\n")
    ok = all(st in states.COUNTED and res.failed == 0 for _, st, res, _ in found)
    if not ok:      # (the step fails: ninja's edge that prints the summary does not run)
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m gpsimd_build.steps``."""
    p = argparse.ArgumentParser(prog="python -m gpsimd_build.steps",
                                description="Build steps of a GPSIMD op collection.")
    sub = p.add_subparsers(dest="step", required=True)
    pk = sub.add_parser("pack", help="wrap stripped core objects into host packs")
    pk.add_argument("--library", required=True)
    pk.add_argument("--strip", required=True, help="the strip program (and its options)")
    pk.add_argument("--member", nargs=5, action="append", required=True,
                    metavar=("LSP", "CORE", "LINKED", "PACKED", "STRIPPED"),
                    help="one core: its linker spec (e.g. lsp_fll_load_cpu3), its number "
                         "(0..7, or none for single-core), the linked object and the two "
                         "outputs")
    pk.set_defaults(run=_pack)
    sr = sub.add_parser("stack-report", help="worst static stack chain per op")
    sr.add_argument("--library", required=True)
    sr.add_argument("--op", action="append", default=[],
                    help="NAME=STACK_BYTES or NAME:KERNEL=STACK_BYTES, one per op")
    sr.add_argument("-o", "--output", required=True)
    sr.add_argument("callgraphs", nargs="*")
    sr.set_defaults(run=_stack_report)
    cr = sub.add_parser("check-registration",
                        help="check a shape library's registration against the manifest")
    cr.add_argument("-o", "--output", required=True)
    cr.add_argument("facts")
    cr.add_argument("registration")
    cr.set_defaults(run=_check_registration)
    dg = sub.add_parser("digests", help="one SHA-256 per artifact")
    dg.add_argument("-o", "--output", required=True)
    dg.add_argument("--base", default=".", help="the folder the listed paths are relative to")
    dg.add_argument("list", help="a file naming one artifact per line")
    dg.set_defaults(run=_digests)
    sm = sub.add_parser("summary", help="the summary of passing results files")
    sm.add_argument("-o", "--output", required=True)
    sm.add_argument("--all", type=int, required=True, help="libraries in the collection")
    sm.add_argument("--report", help="also write the HTML report of the results here")
    sm.add_argument("--since", metavar="STAMP",
                    help="a file made as this ninja run began: results made before it were "
                         "not run in this build")
    sm.add_argument("--multicore", action="append", default=[],
                    help="a multicore library (its vectors are drawn in the report)")
    sm.add_argument("--inputs", metavar="SPEC",
                    help="also record what ninja built each library from (the spec "
                         "gpsimd_build.ninjarecord reads; the record is written beside it)")
    sm.add_argument("--ninja-dir", default=".",
                    help="ninja's builddir (its .ninja_log and .ninja_deps), with --inputs")
    sm.add_argument("results", nargs="*")
    sm.set_defaults(run=_summary)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Run one step; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status = args.run(args)
    except _CheckFailed:
        return 1
    except OSError as e:
        where = e.filename or "?"
        print(f"gpsimd: {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    except (ValueError, KeyError) as e:  # incl. ResultsError
        print(f"gpsimd: {args.step}: {e}", file=sys.stderr)
        return 1
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
