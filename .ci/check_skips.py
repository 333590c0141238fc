#!/usr/bin/env python3
"""CI's second step: fail when a test skipped for a reason that is not a
documented one.

    python3 .ci/check_skips.py SKIPS

``SKIPS`` is the file the test run wrote (``$GPSIMD_TEST_SKIPS``, set by
``.ci/run``; ``tests/conftest.py`` writes one JSON line per skipped test,
``{"test", "reason"}``). CI installs and starts every tool a test needs,
so every test runs there: a skip is a tool that CI failed to provide, or
a test that skips when it should not, unless its reason matches one of
``DOCUMENTED`` (each with why it cannot run in CI). Exit status 0: none
other; 1: some, listed; 2: the file is missing (the run wrote none).
"""

import json
import re
import sys

#: (pattern of a skip's reason, why CI cannot run that test).
DOCUMENTED = [
    (r"distcc pump mode",
     "Debian's distcc 3.4 include server fails on Python 3.11 (README: pump needs a newer "
     "distcc)"),
]


def undocumented(lines):
    """The skips (dicts) of ``lines`` (JSON text lines) whose reason no
    pattern of ``DOCUMENTED`` matches."""
    out = []
    for line in lines:
        if line.strip():
            skip = json.loads(line)
            if not any(re.search(p, skip["reason"]) for p, _ in DOCUMENTED):
                out.append(skip)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"check_skips: {argv[0]}: {e.strerror}: the test run wrote no list of skips",
              file=sys.stderr)
        return 2
    bad = undocumented(lines)
    for skip in bad:
        print(f"check_skips: {skip['test']} skipped in CI: {skip['reason']}", file=sys.stderr)
    if bad:
        print(f"check_skips: {len(bad)} test(s) skipped for a reason that is not documented "
              f"(.ci/check_skips.py DOCUMENTED); CI must run every test", file=sys.stderr)
        return 1
    print(f"check_skips: {len(lines)} skip(s), each documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
