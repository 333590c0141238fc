"""Which directives make a compile depend on a file's absence
(site_tools/gpsimd_tool/probes.py): the includes SCons's C scanner reads,
with literal ``__has_include`` names among them, and the probes no scanner
can resolve."""

import pytest

from site_tools.gpsimd_tool import probes


@pytest.mark.parametrize("text, found", [
    ('#include "a.h"\n#include <b/c.h>\n', [('"', "a.h", '"'), ("<", "b/c.h", ">")]),
    ('  # include<x.h>\n#import "m.h"\n', [("<", "x.h", ">"), ('"', "m.h", '"')]),
    ('#if __has_include("x.h")\n#endif\n', [('"', "x.h", '"')]),
    ("#if defined(__has_include)\n#if __has_include(<y>)\n#endif\n#endif\n", [("<", "y", ">")]),
    ("#includes\n#define X include\n", []),
])
def test_literal_names_are_includes_and_nothing_probes(text, found):
    assert probes.names(text) == (found, False, "__has_include(" in text)


@pytest.mark.parametrize("text", [
    '#define O "o.h"\n#if __has_include(O)\n#endif\n',
    "#if __has_include_next(<x.h>)\n#endif\n",
    '#if __has_include (\\\n"x.h")\n#endif\n',
    '#if __has_embed("data.bin")\n#endif\n',
])
def test_what_no_scanner_resolves_probes(text):
    assert probes.names(text)[1:] == (True, True)


@pytest.mark.parametrize("text", [
    '#define H "factor.h"\n#include H\n',          # (read: its depfile names it)
    "#include_next <x.h>\n",
    "#ifdef __has_include\n#endif\n",             # (found in review: a guard in vendored headers)
    "#if defined __has_include\n#endif\n",
    "// older compilers lack __has_include(X)\n",
    "/* __has_include(CFG) */\n",
])
def test_a_guard_a_comment_or_a_macro_s_include_probes_nothing(text):
    assert probes.names(text)[1:] == (False, False)


def test_the_scanner_is_scons_c_scanner_with_the_probes_names():
    import SCons.Scanner
    scanner = probes.CScanner()
    assert isinstance(scanner, SCons.Scanner.ClassicCPP) and scanner.name == "CScanner"
