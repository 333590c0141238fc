"""Which commands the build hands to the emulator server
(``gpsimd_tool.emu_server.command_words``): exactly one plain
``PYTHON -m gpsimd_emu run ...`` command; anything else stays ``sh -c``."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "site_scons" / "site_tools"))

from gpsimd_tool.emu_server import command_words  # noqa: E402

RUN = ["/usr/bin/python3", "-m", "gpsimd_emu", "run"]


def test_a_test_command_gives_its_words():
    args = RUN + ["build/host/relu/testplan.json", "--results", "build/host/relu/test-results.json",
                  "--failed-results", "build/host/relu/test-results.failed.json", "--no-checks"]
    assert command_words(args) == args


def test_quoted_arguments_are_unquoted_as_the_shell_would():
    # SCons's POSIX escape: double quotes, backslash before '"' and '\\'
    args = RUN + ['"my dir/testplan.json"', "--results", '"a \\"b\\" c.json"']
    assert command_words(args) == RUN + ["my dir/testplan.json", "--results", 'a "b" c.json']


@pytest.mark.parametrize("args", [
    RUN + ["p.json", ";", "rm", "-rf", "x"],
    RUN + ["p.json", "|", "tee", "log"],
    RUN + ["p.json", ">", "log"],
    RUN + ["$PLAN"],
    RUN + ["`cat p`"],
    RUN + ["p.json", "&&", "true"],
    RUN + ["'p.json'"],
    ["/usr/bin/python3", "-m", "gpsimd_emu.shapes", "registration", "a", "-o", "b"],
    ["/usr/bin/python3", "-S", "-m", "gpsimd_build.steps", "pack"],
    ["g++", "-c", "a.cpp"],
    RUN[:3],
    ['"unterminated'],
])
def test_shell_syntax_and_other_commands_are_left_to_the_shell(args):
    assert command_words(args) is None
