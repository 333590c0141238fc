"""``gpsimd-build`` (gpsimd_build.command): SCons with the package's
SConstruct read from its standard input, every argument passed through,
``-Q`` added with a true ``QUIET``."""
import sys

from gpsimd_build import command


def test_the_scons_command_line():
    head = [sys.executable, "-m", "SCons", "-f", "-"]
    assert command.scons_argv([]) == head
    assert command.scons_argv(["-j4", "test-relu", "QUIET=1"]) == \
        head + ["-Q", "-j4", "test-relu", "QUIET=1"]
    for quiet in ("QUIET=yes", "QUIET=True", "QUIET=on"):
        assert command.scons_argv([quiet])[5] == "-Q"
    for loud in (["QUIET=0"], ["QUIET=no"], ["XQUIET=1"], ["-Q", "QUIET=1"]):
        assert command.scons_argv(loud) == head + loud
    assert command.SCONSTRUCT.endswith("gpsimd_build/SConstruct")
    text = open(command.SCONSTRUCT, encoding="utf-8").read()
    assert "toolpath=[gpsimd_build.toolpath()]" in text and "env.GpsimdCollection()" in text
