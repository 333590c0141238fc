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


@pytest.mark.parametrize("text, expected", [
    # (found in review: a comment's mark in a string hid the probe after it;
    # a probe split by a continued line was missed, one in a comment counted)
    ('const char* g = "dir/*.h";\n#if __has_include(CFG)\n#endif\n// */\n', (True, True)),
    ('puts("//"); \n#if __has_include(CFG)\n#endif\n', (True, True)),
    ('#if __has_include \\\n(CFG)\n#endif\n', (True, True)),
    ('#if __has_include (\\\n"x.h")\n#endif\n', (False, True)),
    ('// a comment \\\n#if __has_include(CFG)\n', (False, False)),
])
def test_literals_and_continued_lines_are_read_as_the_preprocessor_does(text, expected):
    assert probes.names(text)[1:] == expected


def test_the_scanner_is_scons_c_scanner_with_the_probes_names():
    import SCons.Scanner
    scanner = probes.CScanner()
    assert isinstance(scanner, SCons.Scanner.ClassicCPP) and scanner.name == "CScanner"


def test_an_include_cycle_leaves_no_partial_answer_for_another_source(tmp_path):
    """``a.h`` probes and includes ``b.h``, which includes ``a.h``: after
    ``s1.c`` (which includes ``a.h``) was followed, ``s2.c`` (which
    includes only ``b.h``) found no probe, from the partial answer kept
    for ``b.h`` (found in review)."""
    (tmp_path / "a.h").write_text('#if __has_include(CFG)\n#endif\n#include "b.h"\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n')
    (tmp_path / "s1.c").write_text('#include "a.h"\n')
    (tmp_path / "s2.c").write_text('#include "b.h"\n')
    probes._REACHED.clear()
    for source in ("s1.c", "s2.c"):
        where, _, _ = probes._reached(str(tmp_path / source), (), lambda p: True, set())
        assert where == [str(tmp_path)], source
