"""The C compiler's word on what Python reads from the host headers: a
probe program generated from ctypes structures (``binding.header_struct``)
and C expressions, compiled against ``gpsimd_device.headers.INCLUDE_DIR``,
so that no test writes a field list by hand."""
import ctypes
import shutil
import subprocess
from typing import Dict, Iterable, List, Mapping, Tuple

from gpsimd_device.headers import INCLUDE_DIR

#: The compiler of the probes (None: no C compiler here).
CC = shutil.which("cc") or shutil.which("gcc")


def fields(cls, prefix: str = "") -> List[Tuple[str, int, int]]:
    """``(path, offset, size)`` of every field of ``cls``, and of the fields
    of a nested structure or union (not of an array's elements), offsets
    from the start of the outermost structure."""
    out = []
    for name, ctype, *_ in cls._fields_:
        field = getattr(cls, name)
        out.append((prefix + name, field.offset, field.size))
        if issubclass(ctype, (ctypes.Structure, ctypes.Union)):
            out += [(p, field.offset + o, s) for p, o, s in fields(ctype, prefix + name + ".")]
    return out


def compiled(tmp_path, includes: Iterable[str], exprs: Iterable[str]) -> Dict[str, int]:
    """The value of each C expression (an integer) in a program that
    includes ``includes`` (``<...>`` names: ``gpsimd_host/abi.h``,
    ``semaphore.h``), compiled with ``-Wall -Werror`` and run."""
    exprs = list(exprs)
    lines = [f"#include <{h}>" for h in ("stddef.h", "stdio.h", *includes)]
    lines += ["int main(void) {"] + [f'printf("%lld\\n", (long long)({e}));' for e in exprs]
    src = tmp_path / "probe.c"
    src.write_text("\n".join(lines + ["return 0;", "}", ""]))
    subprocess.run([CC, "-Wall", "-Werror", "-I", INCLUDE_DIR, "-o", str(tmp_path / "probe"),
                    str(src)], check=True)
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True,
                         check=True).stdout.split()
    assert len(out) == len(exprs), out
    return dict(zip(exprs, map(int, out)))


def check_layouts(tmp_path, includes: Iterable[str], structs: Mapping[str, type],
                  values: Mapping[str, int] = None) -> Dict[str, int]:
    """Assert that each structure of ``structs`` (C type name -> ctypes
    class) has the compiler's ``sizeof``, and each of its fields (nested
    ones too, ``fields``) the compiler's ``offsetof`` and ``sizeof``; and
    that each C expression of ``values`` is the given number.

    Returns:
        the number of fields checked, per structure.
    """
    values = dict(values or {})
    found = {t: fields(cls) for t, cls in structs.items()}
    exprs = [f"sizeof({t})" for t in structs] + list(values)
    for t, paths in found.items():
        exprs += [e for p, _, _ in paths
                  for e in (f"offsetof({t}, {p})", f"sizeof((({t}*)0)->{p})")]
    c = compiled(tmp_path, includes, exprs)
    for t, cls in structs.items():
        assert c[f"sizeof({t})"] == ctypes.sizeof(cls), (t, c[f"sizeof({t})"])
        for p, offset, size in found[t]:
            assert (c[f"offsetof({t}, {p})"], c[f"sizeof((({t}*)0)->{p})"]) == (offset, size), (
                f"{t}.{p}: offset and size in C {c[f'offsetof({t}, {p})']}, "
                f"{c[f'sizeof((({t}*)0)->{p})']}; in Python {offset}, {size}")
    for expr, value in values.items():
        assert c[expr] == value, (expr, c[expr], value)
    return {t: len(paths) for t, paths in found.items()}
