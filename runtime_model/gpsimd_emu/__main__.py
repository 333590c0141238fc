"""``python -m gpsimd_emu``: a ninja step's run is first handed to its
build's emulator server (``gpsimd_emu.client.run_step``, before any other
import: the same output, results and exit status); else, or when the
server says so, the command line runs here (``gpsimd_emu.cli``).
Importing this module does nothing.
"""

if __name__ == "__main__":
    import os
    import sys

    from .client.served import prestart_step, run_step

    _status = (prestart_step(sys.argv[1:]) if sys.argv[1:2] == ["prestart"]
               else run_step(sys.argv[1:]))
    if _status is not None:     # (nothing of this process is left to finalise)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_status)

    from .cli import main

    sys.exit(main())
