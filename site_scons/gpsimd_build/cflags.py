"""What a compile's flags say it reads besides its source: the include
folders they add and the files they force in, as GCC (and Clang) spell
them. The build's C scanner searches those folders and the object depends
on those files from its first build on; the compiler's depfile
(``gpsimd_build.depfile``) remains the authority for what was read.
"""

from typing import List, Sequence, Tuple

__all__ = ["named_inputs"]

#: Include-folder options, in the order the compiler searches their folders.
_FOLDERS = ("-iquote", "-I", "-isystem", "-idirafter")
#: Options whose argument is a file the compiler reads first.
_FORCED = ("-include", "-imacros")
_LONG = {"--include-directory": "-I", "--include": "-include", "--imacros": "-imacros"}


def named_inputs(flags: Sequence[str]) -> Tuple[List[str], List[str], List[str]]:
    """``(folders searched before the given ones, folders searched after
    them, forced files)`` that ``flags`` name (as written: relative to the
    folder the compiler runs in, or absolute). ``-iquote`` and ``-I``
    folders come before those of a later ``-I`` (the build's own
    ``GPSIMD_INCFLAGS``, after the library's ``cflags``); ``-isystem`` and
    ``-idirafter`` ones after. Forced files: ``-include F``, ``-imacros
    F`` and their ``--include=F``, ``--imacros=F`` spellings."""
    found = {option: [] for option in _FOLDERS + _FORCED}   # type: dict
    k = 0
    while k < len(flags):
        flag = flags[k]
        option, value = None, None
        if flag.startswith("--") and "=" in flag and flag.split("=", 1)[0] in _LONG:
            name, value = flag.split("=", 1)
            option = _LONG[name]
        elif flag in _LONG:
            option = _LONG[flag]
        elif flag in found:
            option = flag
        else:
            for name in _FOLDERS:      # (attached: -Idir, -isystemdir)
                if flag.startswith(name) and len(flag) > len(name):
                    option, value = name, flag[len(name):]
                    break
        if option is not None and value is None:
            k += 1
            value = flags[k] if k < len(flags) else None
        if option is not None and value:
            found[option].append(value)
        k += 1
    before = found["-iquote"] + found["-I"]
    after = found["-isystem"] + found["-idirafter"]
    return before, after, found["-include"] + found["-imacros"]
