"""The cyclic garbage collector, kept off the build graph.

The graph is tens of thousands of SCons objects that all stay alive until
the build ends: each full collection of the cyclic collector rescans them
to find no garbage (2-3 s of a null build at 5,000 ops while the graph is
made, 0.4 s for one walk of it at exit). :func:`paused` turns the collector
off for a block and, with ``freeze``, moves every object alive at its end
into the permanent generation (``gc.freeze``), which later collections
never scan.
"""

import contextlib
import gc

__all__ = ["paused"]


@contextlib.contextmanager
def paused(freeze: bool = False):
    """The collector off for the ``with`` block, on again after it if it
    was on before (also when the block raises); ``freeze``: the objects
    alive at its end are frozen first (``gc.freeze``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()
