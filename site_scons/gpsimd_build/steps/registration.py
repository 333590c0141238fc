"""The ``check-registration`` step (``gpsimd_build.steps``):

``python -m gpsimd_build.steps check-registration -o OUT FACTS REGISTRATION``
    checks a shape library's registration (JSON of ``python -m
    gpsimd_emu.shapes registration``) against the manifest's facts
    (``gpsimd_build.regcheck``): each mismatch one located line on stderr,
    exit status 1; OUT is written only when they agree.
"""

import argparse
import sys

from gpsimd_device.atomic import write_atomically

__all__ = ["add_parser", "run"]


class CheckFailed(Exception):
    """The registration check found mismatches (already printed)."""


def run(args: argparse.Namespace) -> None:
    import json
    from gpsimd_device.shapes import Registration
    from ..regcheck import check_registration, check_text
    with open(args.facts, encoding="utf-8") as f:
        facts = json.load(f)
    with open(args.registration, encoding="utf-8") as f:
        registration = Registration.loads(f.read())
    problems = check_registration(facts, registration)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        raise CheckFailed()
    write_atomically(args.output, check_text(facts, registration).encode("utf-8"))


def add_parser(sub) -> None:
    cr = sub.add_parser("check-registration",
                        help="check a shape library's registration against the manifest")
    cr.add_argument("-o", "--output", required=True)
    cr.add_argument("facts")
    cr.add_argument("registration")
    cr.set_defaults(run=run)
