"""The ``summary`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps summary -o OUT --all N [--since STAMP] RESULTS...``
(or ``summary @ARGS``: the arguments one a line in the file ARGS)
    a ninja build's summary: one line per library whose passing results
    file is given, in a state of ``gpsimd_build.results_summary`` (a
    failed run's ``.failed.json`` or a run's failure record ``.error.txt``
    when there are no passing results; results made before ``STAMP``, the
    ninja run's mark of its lock, made by its first step, were not run in
    this build), then ``all
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
    writes it on its own path). With ``--after-failure`` (the failure
    branch of every other step of the ninja file): passing results made
    before ``STAMP`` count only for the libraries ninja holds up to date
    (else ``lib: stale``), and the step prints the summary and exits 1;
    with ``--quiet`` too (a test step that ends after a failure of its
    run), it writes them again, printing nothing, exit status 0. Writers
    after a failure take turns (``_after_failure``).
"""

import argparse
import os
import stat
import sys

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


def _library_state(path: str, since_ns: int, current=None):
    """``(name, state, results, results path or None)`` of the library whose
    passing results file is ``path`` (``<lib>/test-results.json``), for a
    ninja build's summary step: the passing results, else a failed run's
    (``.failed.json``), else a run's record of its failure without results
    (``.error.txt``, ``gpsimd_emu run --record-failures``); made at or after
    ``since_ns`` (this run's start) or not (``gpsimd_build.results_summary``).
    ``current``: when given, the libraries ninja holds up to date
    (``gpsimd_build.ninjarecord.current``); passing results made before
    ``since_ns`` of any other library are of other sources (stale): the
    summary of a run that a failed step stopped, whose test steps did not
    all run."""
    from gpsimd_device.results import LibraryResults, ResultsError

    from .. import results_summary as states
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
        return loaded(path, mtime, states.KEPT if current is None or name in current
                      else states.STALE)
    mtime = made(base + ".error.txt")           # a run of this build without results
    if mtime is not None and mtime >= since_ns:
        return name, states.NO_RESULTS, None, None
    mtime = made(base + ".failed.json")
    if mtime is not None:
        return loaded(base + ".failed.json", mtime, states.STALE)
    return name, states.NOT_RUN, None, None


def _summarize(args: argparse.Namespace) -> "tuple[str, bool]":
    """Write the summary, the report and the inputs record; returns the
    summary's text and whether every library is counted with no failed
    vector."""
    from .. import results_summary as states
    since = 0
    if args.since:
        try:
            since = os.stat(args.since).st_mtime_ns
        except OSError:
            since = 0
    current = None
    if args.inputs:
        from .. import ninjarecord
        current = ninjarecord.current(args.inputs, args.ninja_dir)
    found = [_library_state(path, since, (current or {}) if args.after_failure else None)
             for path in args.results]
    lines = states.summary_lines(((n, st, res) for n, st, res, _ in found),
                                 len(args.results) == args.all)
    text = "\n".join(lines) + "\n"
    write_atomically(args.output, text.encode("utf-8"))
    if args.report:
        # always written, unchanged or not: it is an output of this step,
        # and ninja, which compares times, would otherwise run the step on
        # every build after results were rewritten with the same content
        from ..report_files import render_from_files
        cache = os.path.join(os.path.dirname(args.report) or ".", ".report-cache")
        entries = [(n, states.report_state(st), p, n in args.multicore)
                   for n, st, _, p in found]
        write_atomically(args.report,
                         render_from_files(entries, True, lines[-1], cache,
                                           records_dir=os.path.dirname(args.report) or ".")
                         .encode("utf-8"))
    if args.inputs:
        from .. import freshness, ninjarecord
        record = os.path.join(os.path.dirname(args.inputs), freshness.RECORD_NAME)
        try:
            ninjarecord.update(args.inputs, args.ninja_dir, record, done=current or {})
        except OSError as e:
            sys.stderr.write(f"gpsimd_build: cannot write {record}: {e.strerror} (errno "
                             f"{e.errno}); the pytest plugin will ask for another build\n")
    return text, all(st in states.COUNTED and res.failed == 0 for _, st, res, _ in found)


def _after_failure(args: argparse.Namespace) -> int:
    """``--after-failure``: one writer at a time (a lock beside the
    summary), and a request made while one writes (``.summary-pending``)
    is served by that writer, again, before it lets go: the last writer
    has seen every result made before its last request. The failure
    branch waits for the lock and prints its first summary (exit status
    1); a test step's (``--quiet``) leaves its request to the writer that
    holds the lock and prints nothing (exit status 0)."""
    import fcntl
    folder = os.path.dirname(args.output) or "."
    pending = os.path.join(folder, ".summary-pending")
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    os.close(os.open(pending, flags, 0o644))
    fd = os.open(os.path.join(folder, ".summary-lock"), flags, 0o644)
    must = not args.quiet       # (the failure branch writes and prints once, itself)
    printed = args.quiet
    try:
        while must or os.path.exists(pending):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if args.quiet else 0))
            except BlockingIOError:
                break                       # (the writer that holds it serves the request)
            try:
                while must or os.path.exists(pending):
                    must = False
                    try:
                        os.unlink(pending)
                    except FileNotFoundError:
                        pass
                    text, _ = _summarize(args)
                    if not printed:
                        sys.stdout.write(text)
                        sys.stdout.flush()
                        printed = True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return 0 if args.quiet else 1


def run(args: argparse.Namespace) -> int:
    if args.after_failure:
        return _after_failure(args)
    text, ok = _summarize(args)
    if not ok:      # (the step fails: ninja's edge that prints the summary does not run)
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0 if ok else 1


def add_parser(sub) -> None:
    sm = sub.add_parser("summary", help="the summary of passing results files",
                        fromfile_prefix_chars="@")
    sm.add_argument("-o", "--output", required=True)
    sm.add_argument("--all", type=int, required=True, help="libraries in the collection")
    sm.add_argument("--report", help="also write the HTML report of the results here")
    sm.add_argument("--since", metavar="STAMP",
                    help="this ninja run's mark, made as its first step took the build "
                         "folder's lock: results made before it were not run in this build")
    sm.add_argument("--multicore", action="append", default=[],
                    help="a multicore library (its vectors are drawn in the report)")
    sm.add_argument("--inputs", metavar="SPEC",
                    help="also record what ninja built each library from (the spec "
                         "gpsimd_build.ninjarecord reads; the record is written beside it)")
    sm.add_argument("--ninja-dir", default=".",
                    help="ninja's builddir (its .ninja_log and .ninja_deps), with --inputs")
    sm.add_argument("--after-failure", action="store_true",
                    help="a step of this ninja run failed (the rules' failure branch): "
                         "results made before --since count only for the libraries ninja "
                         "holds up to date (--inputs), and the step prints the summary and "
                         "exits 1")
    sm.add_argument("--quiet", action="store_true",
                    help="with --after-failure: a test step's (after a failure of its run): "
                         "print nothing, exit 0")
    sm.add_argument("results", nargs="*")
    sm.set_defaults(run=run)
