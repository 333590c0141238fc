"""gpsimd_emu: the Python device model of the GPSIMD engine.

Runs the ops of a host-built custom-op library against an emulated device:
HBM, the 48-byte argument descriptors and the argument stream of
the device ABI (gpsimd_host/abi.h), per-core objects loaded as the device loader
does, poisoned private outputs per core, and per-dtype comparisons with a
numpy reference. CLI: ``python -m gpsimd_emu run PLAN --results OUT``; API:
``gpsimd_emu.session.LibrarySession``.

Modules: ``__main__`` (``python -m``: a ninja step's hand-off, then the
CLI), ``cli`` (the command line, the supervising process), ``client``
(what the front ends import: the server's protocol and client,
``VectorClient``), ``server`` (the build's emulator server),
``vector_service`` (a plan's vectors on request), ``session`` (a library
session: run and judge a vector),
``settings`` (``RunOptions``), ``budget`` (the memory limit), ``vectors``
(inputs, references), ``image`` (a vector's device memory), ``runs``,
``memory`` (buffers, the image memfd), ``control`` (the control block),
``zygote_client`` (the ``gpsimd-zygote`` program: ``zygote.c``,
``sandbox.c``, ``leader.c``), ``contain`` (the supervisor's process
helpers), ``judge`` (how the runs ended), ``checks`` (what the outputs
show), ``merge`` (who wrote what), ``compare`` (tolerances),
``cores``/``loader`` (objects), ``dtypes``, ``abi``/``binding`` (bytes of
abi.h), ``shapelib``/``shapes`` (shape functions).

This package imports only the standard library, numpy and ml_dtypes; never
SCons nor the build library (ARCHITECTURE.md).
"""

__version__ = "0.1.0"
