"""Command signatures without SCons's substitution (site_tools/gpsimd_tool/
signature.py): every input SCons's own signature depends on changes it,
what SCons leaves out stays out, and anything not modelled falls back to
SCons's own signature."""

import pytest
import SCons.Action
import SCons.Environment
import SCons.Errors
import SCons.Node.FS
import SCons.Subst

from site_tools.gpsimd_tool.signature import MAX_DEPTH, SignedCommand, signature_text


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    SCons.Node.FS.default_fs = None
    e = SCons.Environment.Environment(tools=[])
    e.Replace(
        CXX="g++", FLAGS=["-O2", "-Wall"], PREFIX=["-ffile-prefix-map=/abs/top=."],
        LAUNCHER="ccache", LEVEL=2, EMPTY=[],
        NESTED="$FLAGS -DLEVEL=$LEVEL",
        COM="$( $LAUNCHER $) $CXX $NESTED $( $PREFIX $) -o $TARGET -c $SOURCE $EMPTY",
        TWOCOM="tool --out ${TARGETS[1]} --base ${TARGET.base} $SOURCES",
    )
    return e


def presig(env, var="COM", targets=("a.o",), sources=("a.cpp",)):
    t = [env.File(x) for x in targets]
    s = [env.File(x) for x in sources]
    return SignedCommand(var, None).get_presig(t, s, env)


def test_text_expands_variables_and_leaves_out_what_scons_leaves_out(env):
    assert signature_text(env["COM"], env) == " g++ -O2 -Wall -DLEVEL=2  -o ${TARGET} -c ${SOURCE} "
    assert signature_text("cost $$5", env) == "cost $5"


def test_signature_holds_the_paths_of_every_target_and_source(env):
    sig = presig(env, "TWOCOM", ("x/p.so", "x/s.so"), ("l.so", "m.so"))
    assert sig == (b"gpsimd-signature-1\0tool --out ${TARGETS[1]} --base ${TARGET.base} "
                   b"${SOURCES}\0T\0x/p.so\0x/s.so\0S\0l.so\0m.so")


@pytest.mark.parametrize("change", [
    {"CXX": "clang++"}, {"FLAGS": ["-O1", "-Wall"]}, {"FLAGS": ["-O2"]}, {"LEVEL": 3},
    {"NESTED": "$FLAGS"}, {"EMPTY": ["-g"]},
])
def test_any_value_the_command_names_changes_the_signature(env, change):
    before = presig(env)
    env.Replace(**change)
    assert presig(env) != before


def test_one_flag_with_a_space_is_not_two_flags(env):
    """The command holds a list element with a space in double quotes, one
    word: ``["-DA=1 -DB"]`` and ``["-DA=1", "-DB"]`` are other commands,
    whose signatures were the same (an object not compiled again when a
    manifest's cflags changed between them: found in review)."""
    env.Replace(FLAGS=["-DA=1 -DB"])
    one = presig(env)
    env.Replace(FLAGS=["-DA=1", "-DB"])
    assert presig(env) != one
    assert signature_text("$FLAGS", env) == "-DA=1 -DB"
    env.Replace(FLAGS=["-DA=1 -DB"])
    assert signature_text("$FLAGS", env) == '"-DA=1 -DB"'


@pytest.mark.parametrize("change", [
    {"LAUNCHER": "distcc"}, {"PREFIX": ["-ffile-prefix-map=/other=."]}, {"UNUSED": "x"},
])
def test_what_scons_leaves_out_of_its_signature_stays_out(env, change):
    before = presig(env)
    scons_before = SCons.Action.Action("$COM").get_presig(
        [env.File("a.o")], [env.File("a.cpp")], env)
    env.Replace(**change)
    assert presig(env) == before
    # the same verdict as SCons's own signature
    assert SCons.Action.Action("$COM").get_presig(
        [env.File("a.o")], [env.File("a.cpp")], env) == scons_before


def test_other_nodes_change_the_signature(env):
    assert presig(env, targets=("b.o",)) != presig(env)
    assert presig(env, sources=("b.cpp",)) != presig(env)


@pytest.mark.parametrize("com", [
    "$CXX ${'-x' if LEVEL else ''} $SOURCE",   # a Python expression
    "$CXX $( $FLAGS $SOURCE",                    # an unbalanced $(
    "$CXX $) $SOURCE",
    "$CXX $FUNC $SOURCE",                        # a callable value
    "$CXX $LIT $SOURCE",                         # an object this does not model
    "$CXX cost$ $SOURCE",                        # a lone $
])
def test_what_is_not_modelled_falls_back_to_scons(env, com):
    env.Replace(OTHERCOM=com, FUNC=lambda target, source, env, for_signature: "-DF",
                LIT=SCons.Subst.Literal("x y"))
    assert signature_text(com, env) is None
    t, s = [env.File("a.o")], [env.File("a.cpp")]

    def outcome(action):
        try:
            return action.get_presig(t, s, env)
        except SCons.Errors.UserError as e:   # SCons's verdict on an unbalanced $(
            return str(e)
    assert outcome(SignedCommand("OTHERCOM", None)) == \
        outcome(SCons.Action.CommandAction("${OTHERCOM}"))


def test_a_multiline_command_falls_back(env):
    env.Replace(MULTICOM="$CXX -c\n$CXX -o")
    t, s = [env.File("a.o")], [env.File("a.cpp")]
    assert not SignedCommand("MULTICOM", None).get_presig(t, s, env).startswith(b"gpsimd-")


def test_a_cycle_of_variables_falls_back(env):
    env.Replace(LOOP="$LOOP")
    assert signature_text("$LOOP", env) is None
    env.Replace(**{f"V{i}": f"$V{i + 1}" for i in range(MAX_DEPTH + 2)})
    assert signature_text("$V0", env) is None
    env.Replace(**{f"W{i}": f"$W{i + 1}" for i in range(MAX_DEPTH - 2)})
    assert signature_text("$W0", env) == ""


def test_override_environments_are_read(env):
    base = presig(env)
    over = env.Override({"FLAGS": ["-O3"]})
    t, s = [env.File("a.o")], [env.File("a.cpp")]
    assert SignedCommand("COM", None).get_presig(t, s, over) != base
    assert b"-O3" in SignedCommand("COM", None).get_presig(t, s, over)
