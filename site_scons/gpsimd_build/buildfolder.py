"""Is a build folder safe to build in? (stdlib only)

Every file the build writes in ``BUILD_DIR`` (ours, the compiler's, the
linker's, SCons's database, ninja's) is written by whoever runs the build,
root included. Another user who can create entries in that folder can
plant a symbolic or hard link where an output will be written, and have
the build overwrite any file its user may write; or plant a file the build
reads back (its cached manifest is a pickle). Our own writes refuse links
(``gpsimd_device.atomic``, the lock), but the other tools' do not, so the
real protection is the folder, as git's ``safe.directory`` check is for a
repository: :func:`check` refuses a build folder that, or any folder above
it up to the first one owned by root or carrying the sticky bit, is owned
by another user or writable by others.
"""

import os
import pwd
import stat

__all__ = ["UnsafeBuildFolder", "check"]


class UnsafeBuildFolder(Exception):
    """The build folder is not safe to build in; the message says why and
    how to fix it."""


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def check(build_dir: str) -> None:
    """Check ``build_dir`` (which need not exist yet: its first existing
    folder is checked, then each folder above it) before anything is read
    from or written to it.

    Walks the real path upwards (symbolic links resolved) and stops after
    the first folder owned by root or carrying the sticky bit (``/tmp``:
    others can make entries there, but not replace ours), or at ``/``.

    Raises:
        UnsafeBuildFolder: a folder on the way is owned by a user other
            than this process's effective user and root, or is writable by
            others (``o+w``) without the sticky bit; or ``build_dir`` is
            not a folder. The message names the folder, the owner or mode,
            and the fix.
    """
    me = os.geteuid()
    path = os.path.realpath(os.path.abspath(build_dir))
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent
    first = True
    while True:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeBuildFolder(f"the build folder {build_dir} is not a folder ({path})")
        sticky = bool(st.st_mode & stat.S_ISVTX)
        what = "the build folder" if first else f"{path}, a folder above the build folder,"
        where = path if first else f"{build_dir} ({path} is above it)"
        if st.st_uid not in (me, 0):
            raise UnsafeBuildFolder(
                f"{what} {path} is owned by {_owner(st.st_uid)}, not by you "
                f"({_owner(me)}): that user could plant links there that this build would "
                f"write through. Build into a folder of your own (BUILD_DIR=...), or "
                f"give this one to yourself (chown)")
        if st.st_mode & stat.S_IWOTH and not sticky:
            raise UnsafeBuildFolder(
                f"{what} {path} is writable by every user (mode "
                f"{stat.S_IMODE(st.st_mode):o}): another user could plant links there that "
                f"this build would write through. Take that right away (chmod o-w "
                f"{path}), or build into a folder of your own instead of {where}")
        if st.st_uid == 0 or sticky:
            return
        parent = os.path.dirname(path)
        if parent == path:
            return
        path, first = parent, False
