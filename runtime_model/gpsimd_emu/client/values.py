"""The values of the run options, as every front end reads them: the
emulator's ``--timeout``, ``--memory`` and ``--parallel``
(``gpsimd_emu.settings``), the SCons tool's ``EMU_TIMEOUT``, ``EMU_MEMORY``
and ``EMU_PARALLEL``, and the pytest plugin's ``--gpsimd-timeout``: one
parser each, so that a bad value is refused where it is given, with one
message, not when a test runs. Standard library only.
"""

from __future__ import annotations

import fractions
import re

__all__ = ["MAX_TIMEOUT", "MAX_SIZE", "MAX_COUNT", "DEFAULT_MEMORY", "parse_timeout", "parse_size", "parse_count",
           "argtype"]

#: The largest time limit a run takes (a day): the supervisor waits six
#: runs per vector of it, and a wait must fit the platform's time_t.
MAX_TIMEOUT = 86400.0
#: The largest size and count taken: the zygote holds them in int64_t
#: fields, where a larger one wrapped round (16777216T was a limit of 0
#: bytes there, 2**64 + 4G one of 4 GiB, while the worker checked the
#: image against the size given).
MAX_SIZE = 1 << 60
MAX_COUNT = 1 << 16
#: Bytes a vector may use as a whole (its device image and everything its
#: cores allocate): 4 GiB.
DEFAULT_MEMORY = 4 << 30

_UNITS = dict({"": 1, "b": 1}, **{p + s: 1 << 10 * i for i, p in enumerate("kmgt", 1)
                                  for s in ("", "b", "ib")})


def parse_timeout(text: str) -> float:
    """Seconds of a time limit: > 0 and at most ``MAX_TIMEOUT`` (``inf``
    or ``1e300`` overflowed the supervisor's wait).

    Raises:
        ValueError: not a number, or out of that range.
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 < value <= MAX_TIMEOUT:
        raise ValueError(f"{text}: must be > 0 and at most {MAX_TIMEOUT:g} seconds")
    return value


def parse_size(text: str) -> int:
    """Bytes of a size such as ``"4G"``, ``"512MiB"``, ``"1.5g"`` or
    ``"1048576"`` (binary units: K = 1024).

    Raises:
        ValueError: not a size, not positive, or past ``MAX_SIZE``.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size (e.g. 4G, 512M, 1073741824)")
    # (exact: a float of 400 digits was inf, and int() of it an OverflowError)
    value = int(fractions.Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
    if not 0 < value <= MAX_SIZE:
        raise ValueError(f"{text!r}: a size must be positive and at most "
                         f"{MAX_SIZE >> 40}T")
    return value


def parse_count(text: str) -> int:
    """A count of processes: a whole number, >= 0.

    Raises:
        ValueError: anything else, or past ``MAX_COUNT``.
    """
    if not re.fullmatch(r"\s*\d+\s*", str(text)) or int(text) > MAX_COUNT:
        raise ValueError(f"{text}: must be a whole number >= 0 and at most {MAX_COUNT}")
    return int(text)


def argtype(parse):
    """``parse`` as an ``argparse`` type, its ``ValueError``'s message
    shown as the option's error (argparse shows only that of an
    ``ArgumentTypeError``)."""
    def value(text: str):
        try:
            return parse(text)
        except ValueError as e:
            import argparse
            raise argparse.ArgumentTypeError(str(e)) from None
    value.__name__ = parse.__name__
    return value
