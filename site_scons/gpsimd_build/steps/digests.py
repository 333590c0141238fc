"""The ``digests`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps digests -o OUT --base DIR LIST``
    prints and writes one SHA-256 per artifact named in the file ``LIST``
    (one path per line, relative to ``DIR``, BUILD_DIR, and so printed:
    the same text for any BUILD_DIR), sorted by path (``scons digests``).
"""

import argparse
import os
import sys

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> None:
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


def add_parser(sub) -> None:
    dg = sub.add_parser("digests", help="one SHA-256 per artifact")
    dg.add_argument("-o", "--output", required=True)
    dg.add_argument("--base", default=".", help="the folder the listed paths are relative to")
    dg.add_argument("list", help="a file naming one artifact per line")
    dg.set_defaults(run=run)
