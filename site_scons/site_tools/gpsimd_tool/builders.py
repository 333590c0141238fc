"""The builders of the ``gpsimd`` tool, their default construction
variables, emitters and the few actions that are Python functions.

Commands are construction variables. What the target profile gives
(``$GPSIMD_CXXCOM``, ``$GPSIMD_LINKCOM``, ``$GPSIMD_STRIP``,
``$GPSIMD_OBJDUMP``, ``$GPSIMD_VENDORPACKCOM`` and their flags) is set by
the graph code from ``Profile.construction_vars``; what is the project's own
(``$GPSIMD_PACKCOM``, ``$GPSIMD_STACKCOM``, ``$GPSIMD_TESTCOM``) is set here.
A compiler launcher (``$GPSIMD_LAUNCHER``) and the path prefix map sit in
``$( $)``: they change how a command runs, not what it produces, so they are
not part of a node's signature.

No action is a Python function: every one is a command line, so the same
graph runs under ninja.
"""

import json
import sys
from typing import Any, List, Tuple

import SCons.Action
import SCons.Builder
import SCons.Subst

from gpsimd_build import layout
from gpsimd_build.buildnames import EMU_DIR
from gpsimd_build import results_summary as states
from gpsimd_build import zygote_recipe
from gpsimd_build.report_files import EXPLORE_RECORD
from gpsimd_device import zygote
from gpsimd_device.atomic import write_atomically

from . import depfiles, probes
from .signature import SignedCommand


__all__ = ["add_builders"]


# ---- Python function actions ------------------------------------------------

# ---- emitters ---------------------------------------------------------------

def _strip_suffix(path, suffixes):
    for suffix in suffixes:
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


def _pack_emitter(target, source, env):
    """``<base>`` (or either name) -> ``<base>.packed.so``, ``<base>.stripped.so``;
    both names given in that order are kept as they are (no new nodes)."""
    names = [str(t) for t in target]
    base = _strip_suffix(names[0], (".packed.so", ".stripped.so", ".so"))
    if names == [base + ".packed.so", base + ".stripped.so"]:
        return target, source
    return [base + ".packed.so", base + ".stripped.so"], source


#: Every compile of the graph: ``(object, source, env)``, the compile
#: database's entries (:func:`_write_compile_db`).
COMPILES: List[Tuple[Any, Any, Any]] = []


def _compiles_emitter(target, source, env):
    """Note each compile for the compile database."""
    COMPILES.append((target[0], source[0], env))
    return target, source


def _write_compile_db(target, source, env) -> None:
    """Write ``compile_commands.json`` (the JSON Compilation Database
    format clangd and other tools read, as SCons's compilation_db tool
    writes it: ``command``, ``directory``, ``file``, ``output``, sorted
    keys, four-space indent) from every compile of the graph."""
    top = env.Dir("#").get_abspath()
    entries = []
    for obj, src, compile_env in COMPILES:
        entries.append({
            # (each word as the build's command holds it: one with a space
            # in double quotes, as SCons passes it to the shell)
            "command": " ".join(SCons.Subst.quote_spaces(str(word)) for word in
                                compile_env.subst_list("$GPSIMD_CXXCOM", target=[obj],
                                                       source=[src])[0]),
            "directory": top,
            "file": (src if src.is_derived() else src.srcnode()).get_path(),
            "output": obj.get_path(),
        })
    write_atomically(str(target[0]), json.dumps(entries, sort_keys=True, indent=4) + "\n")


# ---- builders -----------------------------------------------------------------

_COMPILE = SignedCommand("GPSIMD_CXXCOM", "$GPSIMD_CXXCOMSTR")


def add_builders(env):
    """Add the builders and the default construction variables to ``env``."""
    env.SetDefault(
        PYTHON=sys.executable,
        GPSIMD_LAUNCHER="",
        GPSIMD_USER_CFLAGS=[],
        GPSIMD_INCFLAGS=[],
        # the compiler's depfile of every file a compile read (the
        # profile's: the host's -MD -MF $TARGET.d), read by the compile's
        # target scanner (depfiles.py) and by ninja (deps = gcc)
        GPSIMD_DEPFLAGS=[],
        GPSIMD_ARCOM="$AR rcsD $TARGET $SOURCES",
        # our own steps: stdlib-only modules, started without site-packages
        GPSIMD_STEP="$PYTHON -S -m gpsimd_build.steps",
        # strip, then pack, every core of a library in one action (targets:
        # packed, stripped of each core; $GPSIMD_PACK_MEMBERS: graph.py)
        # (the summary and the report removed first, as a test run does)
        GPSIMD_PACKCOM=("$GPSIMD_STEP pack --strip $GPSIMD_STRIP --library $GPSIMD_LIBRARY "
                        f"--stale ${{TARGET.dir.dir}}/{states.SUMMARY_FILE} "
                        f"--stale ${{TARGET.dir.dir}}/{states.REPORT_FILE} "
                        "$GPSIMD_PACK_MEMBERS"),
        GPSIMD_STACKCOM="$GPSIMD_STEP stack-report --library $GPSIMD_LIBRARY "
                        "--objdump $GPSIMD_OBJDUMP $GPSIMD_STACK_OPS -o $TARGET $SOURCES",
        # the runtime's functions, read once for every library's report
        GPSIMD_STACKGRAPHCOM="$GPSIMD_STEP stack-report --objdump $GPSIMD_OBJDUMP "
                             "--graph-out $TARGET $SOURCES",
        GPSIMD_DIGESTSCOM="$GPSIMD_STEP digests -o $TARGET --base $GPSIMD_BUILD_DIR $SOURCE",
        # (the ninja path's; its arguments in a file: ninja_path.summary)
        GPSIMD_SUMMARYCOM="$GPSIMD_STEP summary @$GPSIMD_SUMMARY_ARGS",
        GPSIMD_EMU_FLAGS=[],   # e.g. ["--no-checks", "--timeout", "5"] (SConstruct)
        # the results file exists only after a run in which every vector
        # passed; a failed run leaves its results in <lib>/test-results.failed.json.
        # The summary and the report are removed as a run starts (--stale):
        # a build that stops, or cannot write them, leaves none that is not true
        GPSIMD_TESTCOM=("$PYTHON -m gpsimd_emu run $SOURCE --results $TARGET "
                        "--failed-results ${TARGET.base}.failed.json "
                        f"--stale ${{TARGET.dir.dir}}/{states.SUMMARY_FILE} "
                        f"--stale ${{TARGET.dir.dir}}/{states.REPORT_FILE} "
                        "--locations $GPSIMD_LOCATIONS --zygote $GPSIMD_ZYGOTE $GPSIMD_EMU_FLAGS"
                        " $GPSIMD_TEST_NINJA_ARGS"),
        GPSIMD_TEST_NINJA_ARGS=[],   # the ninja path's (ninja_path.record_failures)
        # `scons explore-<lib>`: a search for a failing input per op (never
        # up to date: it always runs; gpsimd_explore); its record,
        # explore.json, says what each op's search (or probe) found
        GPSIMD_EXPLORECOM=("$PYTHON -m gpsimd_explore $SOURCE --zygote $GPSIMD_ZYGOTE "
                           f"--record ${{TARGET.dir}}/{EXPLORE_RECORD} $GPSIMD_EXPLORE_SHAPES "
                           "--database ${TARGET.dir}/explore-db --save-dir $GPSIMD_EXPLORE_DIR "
                           "--save-prefix explore/ --examples $EXPLORE_EXAMPLES "
                           "--seed $EXPLORE_SEED ${EXPLORE_TIME and '--time-limit ' + "
                           "EXPLORE_TIME or ''} $GPSIMD_EMU_FLAGS"),
        # the ninja path's step before the test steps: their server, loading
        # (gpsimd_emu.client.prestart_step; run as the test command runs, so
        # that the server it starts is the one the test steps find)
        GPSIMD_PRESTARTCOM="$PYTHON -m gpsimd_emu prestart $TARGET",
        # the emulator's native program (gpsimd_device.zygote), with the host compiler
        GPSIMD_ZYGOTECOM=" ".join(zygote_recipe.compile_command(
            "$GPSIMD_CXX", [f"${{GPSIMD_ZYGOTE_SOURCES[{i}]}}" for i in range(
                len(zygote_recipe.c_sources(list(zygote.SOURCE_NAMES))))],
            "$GPSIMD_ZYGOTE_INCLUDE", "$TARGET",
            "$GPSIMD_ZYGOTE_DIGEST")) + " && " + " ".join(
                zygote_recipe.protect_command("$TARGET")),
        GPSIMD_ZYGOTECOMSTR="CC       $TARGET",
        GPSIMD_CXXCOMSTR="CXX      $TARGET",
        GPSIMD_LINKCOMSTR="LINK     $TARGET",
        GPSIMD_COMPILEDBCOMSTR="COMPDB   $TARGET",
        GPSIMD_ARCOMSTR="AR       $TARGET",
        GPSIMD_PACKCOMSTR="PACK     $GPSIMD_PACK_LABEL",
        GPSIMD_PACK_LABEL="${TARGETS[0]}",
        # a test node's line names its library and vector count (graph.py
        # sets the label per node; it is not part of the command)
        GPSIMD_TEST_LABEL="$TARGET",
        GPSIMD_TESTCOMSTR="TEST     $GPSIMD_TEST_LABEL",
        GPSIMD_EXPLORECOMSTR="EXPLORE  $GPSIMD_TEST_LABEL",
        GPSIMD_STACKCOMSTR="STACK    $TARGET",
    )
    cscan = probes.CScanner()   # (SCons's, and literal __has_include: probes.py)
    act = SignedCommand   # SCons's "$VAR" action, signed without substitution
    env.Append(BUILDERS={
        "GpsimdObject": SCons.Builder.Builder(
            action=_COMPILE, suffix=".o", src_suffix=".cpp", source_scanner=cscan,
            target_scanner=depfiles.SCANNER, emitter=_compiles_emitter),
        "GpsimdArchive": SCons.Builder.Builder(action=act("GPSIMD_ARCOM", "$GPSIMD_ARCOMSTR"),
                                               suffix=".a"),
        "GpsimdLink": SCons.Builder.Builder(action=act("GPSIMD_LINKCOM", "$GPSIMD_LINKCOMSTR"),
                                            suffix=".so"),
        "GpsimdPack": SCons.Builder.Builder(
            action=act("GPSIMD_PACKCOM", "$GPSIMD_PACKCOMSTR")),
        "GpsimdVendorPack": SCons.Builder.Builder(
            action=act("GPSIMD_VENDORPACKCOM", "$GPSIMD_PACKCOMSTR"), emitter=_pack_emitter),
        "GpsimdStackReport": SCons.Builder.Builder(
            action=act("GPSIMD_STACKCOM", "$GPSIMD_STACKCOMSTR")),
        "GpsimdStackGraph": SCons.Builder.Builder(
            action=act("GPSIMD_STACKGRAPHCOM", "$GPSIMD_STACKCOMSTR")),
        "GpsimdTest": SCons.Builder.Builder(action=act("GPSIMD_TESTCOM", "$GPSIMD_TESTCOMSTR")),
        "GpsimdExplore": SCons.Builder.Builder(
            action=act("GPSIMD_EXPLORECOM", "$GPSIMD_EXPLORECOMSTR")),
        "GpsimdPrestart": SCons.Builder.Builder(action=act("GPSIMD_PRESTARTCOM", None)),
        "GpsimdZygote": SCons.Builder.Builder(
            action=act("GPSIMD_ZYGOTECOM", "$GPSIMD_ZYGOTECOMSTR"), source_scanner=cscan),
        # (its first source lists the artifacts; the others are the artifacts)
        "GpsimdDigests": SCons.Builder.Builder(action=act("GPSIMD_DIGESTSCOM", None)),
        "GpsimdSummary": SCons.Builder.Builder(action=act("GPSIMD_SUMMARYCOM", None)),
        "GpsimdPrint": SCons.Builder.Builder(action=SCons.Action.Action("cat $SOURCES", None)),
        "GpsimdSummaryPrint": SCons.Builder.Builder(action=act("GPSIMD_SUMMARY_PRINTCOM", None)),
        "GpsimdCompileDb": SCons.Builder.Builder(
            action=SCons.Action.Action(_write_compile_db, "$GPSIMD_COMPILEDBCOMSTR")),
    })


def zygote_node(env, graph, profile_dir: str, include: str) -> Any:
    """The emulator's native program (``<profile>/emu/gpsimd-zygote``),
    compiled once per build folder with the runtime's headers ``include``;
    every test run starts it (``--zygote``). Its sources are every file it
    is built from, whose digest it carries."""
    paths = zygote.source_paths(layout.emulator_dir(), include)
    compiled = zygote_recipe.c_sources(paths)
    return graph.uses(env.GpsimdZygote(
        f"{profile_dir}/{EMU_DIR}/{zygote.PROGRAM_NAME}", [env.File(p) for p in paths],
        GPSIMD_ZYGOTE_INCLUDE=include, CPPPATH=[env.Dir(include)],
        GPSIMD_ZYGOTE_SOURCES=[env.File(p) for p in compiled],
        GPSIMD_ZYGOTE_DIGEST=zygote.source_digest(layout.emulator_dir(), include)),
        "$GPSIMD_CXX")[0]
