"""``compile_commands.json`` (site_tools/gpsimd_tool/builders.py): each
entry's command holds every word as the build's command does."""

import json
import shlex

import SCons.Environment
import SCons.Node.FS

from site_tools.gpsimd_tool import builders


def test_a_flag_with_a_space_is_one_quoted_word_of_the_command(tmp_path, monkeypatch):
    """A manifest flag with a space is one word of the compile (SCons
    passes it in double quotes); the database wrote it bare, two words for
    clangd (found in review)."""
    monkeypatch.chdir(tmp_path)
    SCons.Node.FS.default_fs = None
    env = SCons.Environment.Environment(tools=[])
    env.Replace(GPSIMD_CXXCOM="g++ $GPSIMD_USER_CFLAGS -c $SOURCE -o $TARGET",
                GPSIMD_USER_CFLAGS=["-DA=1 -DB", '-DM=\\"a b\\"', "-O2"])
    monkeypatch.setattr(builders, "COMPILES", [(env.File("k.o"), env.File("k.cpp"), env)])
    builders._write_compile_db([env.File("cc.json")], [], env)
    (entry,) = json.loads((tmp_path / "cc.json").read_text())
    assert entry["command"] == 'g++ "-DA=1 -DB" "-DM=\\"a b\\"" -O2 -c k.cpp -o k.o'
    assert shlex.split(entry["command"])[1:4] == ["-DA=1 -DB", '-DM="a b"', "-O2"]
    assert (entry["file"], entry["output"], entry["directory"]) == ("k.cpp", "k.o", str(tmp_path))
