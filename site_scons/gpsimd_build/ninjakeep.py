"""``build.ninja`` outlives a ninja run stopped while it regenerated it.

When a manifest (or another file ``build.ninja`` is made from) changes,
ninja's first step runs scons to write ``build.ninja`` again. A ninja run
stopped while that step runs (``kill -TERM`` of ninja, which waits for
its step, a Ctrl-C, a CI timeout) removes the outputs of its running
steps that changed, as for any step: ``build.ninja`` itself, complete and
new, so that every later ``ninja -f build/build.ninja`` stopped at once
(``loading 'build/build.ninja': No such file or directory``) until
``scons --experimental=ninja`` was run by hand. So the regeneration,
once it has written the file, keeps a second name of it
(``<BUILD_DIR>/.ninja/build.ninja.kept``) and leaves a process that waits
for that ninja run to end and gives ``build.ninja`` its name back when
the run removed it (``buildlock.when_gone``); either way it then removes
the second name. The file it gives back is the complete one this
regeneration wrote, for the sources as they were then: a later edit makes
it regenerate again as usual.
"""

import os

from . import buildlock

__all__ = ["KEPT", "keep"]

#: The second name of the regenerated ``build.ninja``, in ninja's folder.
KEPT = "build.ninja.kept"


def _runner(ninja_file: str):
    """(pid, start) of the ninja run this regeneration is a step of: the
    parent of this process, or of the shell ninja ran it with, when its
    command line names ``ninja_file`` (``-f FILE``); else None (scons run
    by hand)."""
    from gpsimd_emu.client.protocol import proc_stat, runner_of
    parent = os.getppid()
    runner = runner_of(parent)
    if runner is None:                  # (a shell: ninja's /bin/sh -c)
        stat = proc_stat(parent)
        runner = runner_of(stat[1]) if stat is not None else None
    if runner is None:
        return None
    if not buildlock.runs_ninja_file(runner[0], ninja_file):
        return None
    return runner


def keep(ninja_file: str, ninja_dir: str) -> None:
    """After a regeneration run by ninja wrote ``ninja_file``: keep its
    second name and leave the process that gives it back (module text)."""
    runner = _runner(ninja_file)
    if runner is None:
        return
    target = os.path.abspath(ninja_file)
    kept = os.path.abspath(os.path.join(ninja_dir, KEPT))
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    temporary = f"{kept}.{os.getpid()}"
    try:
        os.link(target, temporary)
        os.replace(temporary, kept)
    except OSError:
        return
    inode = os.stat(kept).st_ino

    def give_back() -> None:
        try:
            if os.stat(kept).st_ino != inode:
                return                  # (a later regeneration's)
            if not os.path.lexists(target):
                os.link(kept, target)
            os.unlink(kept)
        except OSError:
            pass

    buildlock.when_gone(*runner, then=give_back)
