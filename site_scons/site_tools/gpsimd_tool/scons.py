"""Run SCons (``python scons.py ARGS``): what build.ninja calls to regenerate
itself when scons itself was started as ``python -m SCons``.

SCons's ninja tool re-runs scons through ``sys.argv[0]``, prefixed with the
Python interpreter only when that file is named ``scons.py``; under ``python
-m SCons`` it is ``SCons/__main__.py``, which is not a program.
``python scons.py --stdin-sconstruct FILE ARGS``: SCons reads ``FILE`` as
its standard input (``-f -`` among ARGS: ``gpsimd-build``'s SConstruct).
"""

import os
import sys

#: The flag that gives SCons its standard input from a file.
STDIN_FLAG = "--stdin-sconstruct"

if __name__ == "__main__":
    if sys.argv[1:2] == [STDIN_FLAG] and len(sys.argv) > 2:
        fd = os.open(sys.argv[2], os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        del sys.argv[1:3]
    # this folder is not a package folder: nothing may be imported from it
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import SCons.Script
    sys.exit(SCons.Script.main())
