"""The collection's own targets, once every library's nodes are in the
graph (``library_nodes``): ``compiledb``, ``digests``, ``schemas``,
``test``, ``explore``, ``stack-report`` and the default ``all``; on the
ninja path also the summary step, its failure rules and what makes
``build.ninja`` regenerate; and the ``scons -h`` text.
"""

from typing import Any, List

import SCons.Script

from gpsimd_build import buildnames as names
from gpsimd_build import ninjarecord, testplan

from . import ninja_path as ninja
from .library_nodes import Libraries
from .targets import help_text

__all__ = ["add_targets"]


def add_targets(top_env, libs: Libraries, collection, libraries: List[Any],
                build_dir: str) -> None:
    """Add the collection's targets for ``libraries`` (those of the
    ``collection`` this build's graph holds) to ``libs.env``; ``top_env``:
    the environment the ninja tool was loaded into."""
    env, graph, profile, profile_dir = libs.env, libs.graph, libs.profile, libs.profile_dir
    if not libs.to_ninja:   # under ninja: ninja -t compdb
        # in the build folder, where clangd looks (build/), so that another
        # collection's database never overwrites it
        db = env.GpsimdCompileDb(f"{build_dir}/compile_commands.json", [])
        env.AlwaysBuild(db)
        env.NoCache(db)
        env.Alias(names.COMPILEDB, db)
    # `scons digests`: computed and printed every time, never from a cache
    # (named from BUILD_DIR: the same text for any BUILD_DIR)
    top = env.Dir(build_dir)
    listing = graph.text(f"{profile_dir}/artifacts.txt", "".join(sorted(
        f"{n.get_path(top)}\n" for n in libs.artifacts)))
    digests = graph.step(env.GpsimdDigests(f"{profile_dir}/digests.txt",
                                           [listing] + libs.artifacts))
    env.AlwaysBuild(digests)
    env.NoCache(digests)
    env.Alias(names.DIGESTS, digests)
    # `scons schemas`: every op's canonical schema (derived ones too); on
    # the ninja path an edge whose output is never made, so `ninja schemas`
    # prints them on every run too (an alias's own action is not written
    # into build.ninja)
    if libs.to_ninja:
        env.Alias(names.SCHEMAS, env.GpsimdPrint(f"{profile_dir}/.schemas-printed", libs.schemas))
    else:
        env.AlwaysBuild(env.Alias(names.SCHEMAS, libs.schemas, "@cat $SOURCES"))
    if profile.runs_tests:
        env.Alias(names.TEST, libs.results + libs.verdicts)
        env.Alias(names.EXPLORE, libs.explore)
        env.Alias(names.STACK_REPORT, libs.stack)
        # library by library, each one's stack report before its tests (a
        # report found up to date leaves the progress total before the
        # test line; a library's results come before the next one's compiles)
        default = [n for pair in zip(libs.stack, libs.results) for n in pair] + libs.versions
        if libs.to_ninja:
            # (what ninja built each library from, recorded by the summary step)
            spec = graph.text(f"{profile_dir}/{ninjarecord.SPEC_NAME}",
                              ninja.inputs_spec(libs.inputs, graph.programs()))
            default += ninja.summary(env, graph, libs.results, profile_dir,
                                     len(collection.libraries),
                                     [lib.name for lib in libraries if lib.multicore], spec)
            ninja.failure_rules(top_env, env.subst("$GPSIMD_STEP"), profile_dir)
        env.Default(env.Alias(names.ALL, default))
    else:
        env.Default(env.Alias(names.ALL, libs.loadable + libs.versions))
    if libs.to_ninja:
        files = [f for lib in libraries for f in testplan.plan_files(lib)]
        from gpsimd_build.manifest import SCHEMA_PATH
        # (and the emulator program's sources: its digest is in its command)
        ninja.regenerate_on(top_env, list(collection.manifests) + files + [SCHEMA_PATH]
                            + ninja.build_library_files()
                            + ([s.path for s in libs.program.sources] if libs.program else []))
    SCons.Script.Help(help_text(collection.libraries, profile), append=True)
