"""The part of the emulator the build side may import (stdlib only).

The SCons tool and the build library start the emulator as commands
(``python -m gpsimd_emu``, ``python -m gpsimd_emu.server``) and never
import its model; what they need in-process lives here, and
``tests/unit/test_layers.py`` fails on any other import of ``gpsimd_emu``
from ``site_scons/``.
"""

from __future__ import annotations

import os
import signal
from typing import Callable

from . import contain

__all__ = ["tied_to_me"]


def tied_to_me(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess``: the child gets ``sig`` when the
    process that calls this dies (``PR_SET_PDEATHSIG``, ``kill -9``
    included), and exits at once if it already has. The C library is
    loaded here, before the fork (``contain.libc``)."""
    contain.libc()
    me = os.getpid()
    return lambda: contain.die_with_parent(me, sig)
