"""``defaults:`` levels and their precedence: vector > op > library (its
own keys, then its ``defaults:``) > the declaring manifest's ``defaults:`` >
the including manifests' ``defaults:``, nearest first > built-in. A list is
replaced, not appended.
"""

from dataclasses import dataclass, fields
from typing import Any, List, Optional, Tuple

@dataclass(frozen=True)
class _Defaults:
    """The values one ``defaults:`` level gives the levels below it; ``None``
    means "not set here" (inherit). ``includes`` are root-relative."""

    cflags: Optional[Tuple[str, ...]] = None
    includes: Optional[Tuple[str, ...]] = None
    multicore: Optional[bool] = None
    stack_size: Optional[int] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    #: an ``explore:`` block (the nearest level's replaces the others whole)
    explore: Optional[dict] = None

    def over(self, base: "_Defaults") -> "_Defaults":
        """These values where set, else ``base``'s (the nearest level wins)."""
        return _Defaults(**{f.name: getattr(base, f.name) if getattr(self, f.name) is None
                            else getattr(self, f.name) for f in fields(self)})

    def differences(self, other: "_Defaults") -> List[str]:
        """``key A there, B here`` for every key whose value differs (``self``
        is "there", ``other`` "here")."""
        out = []
        for f in fields(self):
            there, here = getattr(self, f.name), getattr(other, f.name)
            if there != here:
                out.append(f"{f.name} {_show_default(there)} there, {_show_default(here)} here")
        return out


def _show_default(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show_default(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _op_with_defaults(op: dict, defaults: _Defaults) -> dict:
    """The op's mapping with inherited ``rtol``/``atol`` filled in where the
    op gives none (what its vectors fall back to before the dtype table)."""
    filled = dict(op)
    for key in ("rtol", "atol"):
        if key not in filled and getattr(defaults, key) is not None:
            filled[key] = getattr(defaults, key)
    return filled
