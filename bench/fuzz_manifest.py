#!/usr/bin/env python3
"""Fuzz the manifest front door: no input gives a traceback, a hang or an
unbounded use of memory (issue 13).

    python3 bench/fuzz_manifest.py [--cases 5000] [--seed 1] [--work DIR]
                                   [--hostile] [--case-timeout 10]

Two campaigns:

mutations (always)  ``--cases`` manifests made from valid ones by a seeded
        mutator (characters, lines, YAML structure, hostile values: 400-digit
        numbers, deep nesting, aliases, tags, control characters, special
        files, paths outside the project, globs), loaded in this process.
        A case passes when :func:`load_manifest` returns a collection or
        raises ``ManifestError`` whose every diagnostic is one located,
        printable line and none is the loader's "internal error" net, within
        ``--case-timeout`` seconds of this process's CPU time (the work the
        loader does: wall time would count other processes of a loaded
        machine) and 12 times that of wall time (a wait).
hostile (``--hostile``)  generated files up to the 4 MiB size limit (long
        lists, deep maps, many keys, aliases, long strings, many includes,
        syntax errors at the end), each loaded in a child process: its time
        and peak memory against the bounds of README "Limits of the manifest
        reader" (10 s, 500 MB).

Prints the figures; exits 1 if any case failed. ``tests/unit/
test_manifest_hostile.py`` runs 300 mutation cases with a fixed seed.
"""

import argparse
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

PROJECT = pathlib.Path(__file__).resolve().parents[1]
for sub in ("site_scons", "runtime_model"):
    if str(PROJECT / sub) not in sys.path:
        sys.path.insert(0, str(PROJECT / sub))

from gpsimd_build.manifest import ManifestError, load_manifest  # noqa: E402

BASE = """\
version: 1
include: ["teams/*/ops.yaml"]
defaults: {cflags: [-O2], rtol: 1e-5}
libraries:
  - name: relu
    multicore: false
    sources: [k/k.cpp]
    includes: [k]
    defaults: {stack_size: 8192, atol: 0.5}
    ops:
      - schema: "my_ops::relu(Tensor x, float alpha, int n) -> Tensor"
        reference: k/ref.py:f
        stack_size: 5000
        vectors:
          - name: small
            inputs:
              x: {dtype: float32, shape: [2, 2], values: [[1, -2], [3, 4]]}
              alpha: 0.5
              n: {value: 3, dtype: int32}
            rtol: 0
          - name: rnd
            inputs:
              x: {dtype: int8, shape: [4], random: {distribution: integers, low: 0, high: 5}}
              alpha: 1
              n: 2
            expected: {values: [1, 2, 3, 4]}
          - name: file
            inputs:
              x: {npy: k/a.npy}
              alpha: &al 2.5
              n: 7
            expected: {npy: k/a.npy}
            output: {dtype: float32, shape: [4]}
      - schema: "scale(Tensor x, Scalar s) -> Tensor"
        vectors:
          - name: v
            inputs: {x: {dtype: float32, shape: [3], random: {distribution: normal, std: 2}},
                     s: *al}
            expected: {reference: numpy:negative}
"""

TEAM = """\
version: 1
libraries:
  - name: team
    sources: [../../k/k.cpp]
    ops:
      - schema: "t(Tensor x) -> Tensor"
        reference: ../../k/ref.py:f
        vectors: [{name: v, inputs: {x: {dtype: float32, shape: [1], values: [1]}}}]
"""

HOSTILE_VALUES = [
    "1" + "0" * 399, "-" + "9" * 400, "1e999", "-1e999", ".nan", "0x" + "f" * 100,
    "0o" + "7" * 80, "1" * 64, "'" + "x" * 5000 + "'", '"\\e[2J\\u202e\\n"', '"\\ud800"',
    "/etc/passwd", "../../../../../../../../etc/hostname", "k/fifo", "k/loop", "k/out/passwd",
    "/dev/zero", "'**/*.yaml'", "'../**/*'", "'[[[['", "*undefined", "&a [*a]", "!!binary aGk=",
    "!!python/object:os.system x", "!foo bar", "!!int 1.5", "!!float x", "[" * 70 + "]" * 70,
    "{a: " * 70 + "1" + "}" * 70, "~", "''", "yes", "on", "true", "[]", "{}", "-1", "65536",
    "4294967296", "k/ref.py:nope", "numpy:", "a:b:c", "'\\t'", "'\x85'", "\u2028",
]

PALETTE = list("[]{}:,-?&*!|>'\"%@`#\t\n\r ~.0123456789abc\\") + ["\x00", "\x07", "\x1b",
                                                                  "\u202e", "\ufeff", "\x85"]


def prepare(root) -> None:
    """Create what the base manifests name under ``root`` (the project
    root): a kernel, a reference, a .npy file, a team manifest, and special
    entries the mutations point at (a FIFO, a symlink loop, a link out)."""
    root = pathlib.Path(root)
    (root / "k").mkdir(parents=True, exist_ok=True)
    (root / "k" / "k.cpp").write_text("// kernel\n")
    (root / "k" / "ref.py").write_text("def f(x, *args):\n    return x\n")
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }".ljust(117) + b"\n"
    (root / "k" / "a.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                                       + header + bytes(16))
    (root / "teams" / "t").mkdir(parents=True, exist_ok=True)
    (root / "teams" / "t" / "ops.yaml").write_text(TEAM)
    for name, make in (("k/fifo", lambda p: os.mkfifo(p)),
                       ("k/loop", lambda p: os.symlink("loop", p)),
                       ("k/out", lambda p: os.symlink("/etc", p)),
                       ("teams/self", lambda p: os.symlink(".", p))):
        path = root / name
        if not os.path.lexists(path):
            try:
                make(str(path))
            except OSError:
                pass


def mutate(text: str, rng: random.Random) -> str:
    """One to three random mutations of ``text``."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        lines = text.split("\n")
        if kind < 0.25 and text:                       # characters
            i = rng.randrange(len(text))
            action = rng.random()
            if action < 0.4:
                text = text[:i] + rng.choice(PALETTE) + text[i:]
            elif action < 0.7:
                text = text[:i] + text[i + 1:]
            else:
                text = text[:i] + rng.choice(PALETTE) + text[i + 1:]
        elif kind < 0.45:                              # lines
            i = rng.randrange(len(lines))
            action = rng.random()
            if action < 0.3:
                lines.insert(i, lines[i])
            elif action < 0.5:
                del lines[i]
            elif action < 0.7:
                j = rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            elif action < 0.85:
                lines[i] = "  " + lines[i]
            else:
                lines[i] = lines[i][2:]
            text = "\n".join(lines)
        elif kind < 0.85:                              # a value becomes hostile
            candidates = [i for i, line in enumerate(lines) if ": " in line]
            if candidates:
                i = rng.choice(candidates)
                key, _, _ = lines[i].partition(": ")
                lines[i] = f"{key}: {rng.choice(HOSTILE_VALUES)}"
                text = "\n".join(lines)
        elif kind < 0.93:                              # a key becomes odd
            candidates = [i for i, line in enumerate(lines) if ": " in line]
            if candidates:
                i = rng.choice(candidates)
                key, _, rest = lines[i].partition(": ")
                indent = key[:len(key) - len(key.lstrip(" -"))]
                odd = rng.choice(['"a\\nb\\e[2J"', "sorces", "vectors", "? [1]\n" + indent + ":",
                                  "'" + "k" * 300 + "'", "allow_paths", "include", "<<"])
                lines[i] = f"{indent}{odd}: {rest}"
                text = "\n".join(lines)
        else:                                          # a whole hostile block
            text += rng.choice([
                "\nbomb: &b0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
                    f"b{i}: &b{i} [{', '.join(['*b%d' % (i - 1)] * 10)}]\n" for i in range(1, 7)),
                "\nallow_paths: [/]\n", "\ninclude: ['**/*.yaml', '../**/*.yaml']\n",
                "\n---\nversion: 1\n", "\n\tx: 1\n", "\n" + "[" * 40000,
                "\nlibraries: [" + ",".join(["0"] * 2000) + "]\n",
            ])
    return text


def check_case(path: str) -> str:
    """Load ``path``: ``"loaded"``, ``"errors"``, or a failure text."""
    try:
        load_manifest(path)
        return "loaded"
    except ManifestError as err:
        text = str(err)
        lines = text.split("\n")
        if not err.diagnostics or len(lines) != len(err.diagnostics):
            return "FAIL: a diagnostic is not exactly one line"
        for diag, line in zip(err.diagnostics, lines):  # noqa: B905 (3.9)
            if diag.line < 1 or diag.column < 1 or not line.startswith(
                    f"{diag.file}:{diag.line}:{diag.column}: ".replace("\n", "\\n")):
                return f"FAIL: badly located: {line[:200]}"
            if "internal error" in diag.message or "too large or deep to check" in diag.message:
                return f"FAIL: {line[:300]}"
            if any(ord(c) < 0x20 for c in line):
                return f"FAIL: control character in {line[:200]!r}"
        return "errors"
    except BaseException:  # noqa: B902 - any other exception is the failure looked for
        return "FAIL: " + traceback.format_exc(limit=6)[-1500:]


def campaign(root, rng: random.Random, cases: int, case_timeout: float = 10.0) -> dict:
    """Run ``cases`` mutation cases under ``root`` (prepared, the current
    directory); the figures as a dict (``failures``: [(case file, problem)])."""
    root = pathlib.Path(root)
    (root / "fuzz").mkdir(exist_ok=True)
    stats = {"cases": 0, "loaded": 0, "errors": 0, "failures": [], "max_s": 0.0,
             "total_s": 0.0}
    team = root / "teams" / "t" / "ops.yaml"
    for _ in range(cases):
        top = mutate(BASE, rng)
        team.write_text(mutate(TEAM, rng) if rng.random() < 0.3 else TEAM)
        path = "case.yaml"
        (root / path).write_text(top, encoding="utf-8", errors="surrogatepass")
        start, wall = time.process_time(), time.monotonic()
        outcome = check_case(path)
        seconds, wall = time.process_time() - start, time.monotonic() - wall
        stats["cases"] += 1
        stats["total_s"] += seconds
        stats["max_s"] = max(stats["max_s"], seconds)
        if seconds > case_timeout or wall > 12 * case_timeout:     # (a wait: no CPU)
            outcome = f"FAIL: took {seconds:.1f} s of CPU, {wall:.1f} s"
        if outcome.startswith("FAIL"):
            keep = root / "fuzz" / f"failure{len(stats['failures'])}.yaml"
            shutil.copy(root / path, keep)
            stats["failures"].append((str(keep), outcome))
        else:
            stats[outcome] += 1
    team.write_text(TEAM)
    return stats


def hostile_files(folder: pathlib.Path) -> list:
    """Generate the hostile files (each at most the size limit); their names."""
    limit = 4 * 1024 * 1024 - 64
    head = ("version: 1\nlibraries:\n  - name: a\n    sources: [k/k.cpp]\n    ops:\n"
            "      - schema: \"f(Tensor x) -> Tensor\"\n        reference: numpy:negative\n"
            "        vectors:\n          - name: v\n            inputs:\n"
            "              x: {dtype: float32, shape: [%d], values: [%s]}\n")
    lib = ("  - name: l%d\n    sources: [k/k.cpp]\n    ops:\n      - schema: \"f%d(Tensor x, "
           "int k) -> Tensor\"\n        reference: numpy:negative\n        vectors:\n"
           "          - name: v\n            inputs: {x: {dtype: float32, shape: [4], random: "
           "{distribution: normal}}, k: 3}\n")
    files = {
        "list_2m.yaml": "version: 1\nlibraries: [" + ",".join(["0"] * 2_000_000) + "]",
        "values_249k.yaml": head % (60000, ",".join(["1.5"] * 249_000)),
        "libs_valid.yaml": "version: 1\nlibraries:\n" + "".join(lib % (i, i) for i in range(7400)),
        "libs_many.yaml": "version: 1\nlibraries:\n" + "".join(lib % (i, i) for i in range(16000)),
        "dup_keys.yaml": "version: 1\n" + "a: 1\n" * 800_000,
        "unknown_keys.yaml": "version: 1\n" + "".join(f"k{i}: 1\n" for i in range(400_000)),
        "deep_maps.yaml": "version: 1\nx: " + "{a: " * 60 + "1" + "}" * 60 + "\n" + "".join(
            f"y{i}: " + "[" * 60 + "]" * 60 + "\n" for i in range(4000)),
        "nesting_100k.yaml": "version: 1\nlibraries: " + "{a: " * 100_000,
        "aliases.yaml": "a: &a [" + ",".join(["1"] * 1000) + "]\nb: [" + ",".join(["*a"] * 500_000)
                        + "]\n",
        "long_strings.yaml": head.replace("name: v", "name: " + "v" * 3_000_000) % (1, "1"),
        "long_path.yaml": "version: 1\ninclude: [" + "a/" * 2_000_000 + "]\n",
        "many_includes.yaml": "version: 1\ninclude: [" + ",".join(
            f"'x{i}/**/*.yaml'" for i in range(200_000)) + "]\n",
        "many_sources.yaml": "version: 1\nlibraries:\n  - name: a\n    sources: [" + ",".join(
            f"x{i}.cpp" for i in range(240_000)) + "]\n    ops: []\n",
        "syntax_at_1mb.yaml": head % (1, "1") + "#" * 1_000_000 + "\n  - [",
        "syntax_at_4mb.yaml": "#" * 4_000_000 + "\nversion: 1\na: [",
        "tabs.yaml": "version: 1\n" + "a:\n\t" * 100_000,
        "escapes.yaml": "version: 1\nlibraries: \"" + "\\x1b" * 1_000_000 + "\"\n",
        "size_limit_plus_1.yaml": "#" * (limit + 65),
    }
    names = []
    for name, text in files.items():
        if name != "size_limit_plus_1.yaml":
            text = text[:limit]
        (folder / name).write_text(text)
        names.append(name)
    return names


CHILD = r"""
import sys, time
sys.path[:0] = [sys.argv[2] + "/site_scons", sys.argv[2] + "/runtime_model"]
from gpsimd_build.manifest import load_manifest, ManifestError
t = time.monotonic()
try:
    load_manifest(sys.argv[1]); out = "loaded"
except ManifestError as err:
    lines = str(err).split("\n"); out = f"{len(lines)} line(s): {lines[0][:110]}"
# VmHWM: the peak of this process alone (ru_maxrss keeps the parent's across exec)
rss = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM")) // 1024
print(f"{time.monotonic() - t:.2f} {rss} {out}")
"""


def hostile_campaign(root: pathlib.Path) -> list:
    """Load each hostile file in a child; rows (name, seconds, MB, first line, ok)."""
    rows = []
    for name in hostile_files(root):
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD, name, str(PROJECT)], cwd=root,
                                  capture_output=True, text=True, timeout=60)
            out = proc.stdout.strip()
            seconds, mb, first = out.split(" ", 2) if proc.returncode == 0 else ("60", "0", "")
            ok = proc.returncode == 0 and float(seconds) < 10 and int(mb) < 500
            if proc.returncode != 0:
                first = f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        except subprocess.TimeoutExpired:
            seconds, mb, first, ok = "60+", "?", "TIMEOUT", False
        rows.append((name, seconds, mb, first, ok))
        print(f"  {name:24s} {seconds:>6s} s {mb:>5s} MB  {'ok ' if ok else 'BAD'} {first}",
              flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=None, help="scratch project (default: a temp dir)")
    parser.add_argument("--case-timeout", type=float, default=10.0)
    parser.add_argument("--hostile", action="store_true", help="also the 4 MiB hostile files")
    args = parser.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="fuzz-manifest-"))
    work.mkdir(parents=True, exist_ok=True)
    prepare(work)
    os.chdir(work)
    print(f"mutation campaign: {args.cases} cases, seed {args.seed}, in {work}", flush=True)
    start = time.monotonic()
    stats = campaign(work, random.Random(args.seed), args.cases, args.case_timeout)
    wall = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"  {stats['cases']} cases in {wall:.1f} s: {stats['loaded']} loaded, {stats['errors']} "
          f"with located errors, {len(stats['failures'])} failures; slowest case "
          f"{stats['max_s']:.2f} s, mean "
          f"{stats['total_s'] / max(1, stats['cases']) * 1000:.1f} ms; "
          f"peak RSS {peak} MB")
    for keep, problem in stats["failures"][:20]:
        print(f"  FAILURE {keep}: {problem}")
    bad = bool(stats["failures"])
    if args.hostile:
        print("hostile files (child process each; bound: 10 s, 500 MB):", flush=True)
        rows = hostile_campaign(work)
        bad = bad or not all(r[4] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
