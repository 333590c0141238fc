"""Run SCons (``python scons.py ARGS``): what build.ninja calls to regenerate
itself when scons itself was started as ``python -m SCons``.

SCons's ninja tool re-runs scons through ``sys.argv[0]``, prefixed with the
Python interpreter only when that file is named ``scons.py``; under ``python
-m SCons`` it is ``SCons/__main__.py``, which is not a program.
"""

import os
import sys

if __name__ == "__main__":
    # this folder is not a package folder: nothing may be imported from it
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import SCons.Script
    sys.exit(SCons.Script.main())
