"""gpsimd_emu: the Python device model of the GPSIMD engine.

Runs the ops of a host-built custom-op library against an emulated device:
HBM, the 48-byte argument descriptors and the argument stream of
the device ABI (gpsimd_host/abi.h), per-core objects loaded as the device loader
does, poisoned private outputs per core, and per-dtype comparisons with a
numpy reference. CLI: ``python -m gpsimd_emu run PLAN --results OUT``; API:
``gpsimd_emu.session.LibrarySession``.

Its modules: ARCHITECTURE.md "The map" (the ``gpsimd_emu`` row).

This package imports only the standard library, numpy and ml_dtypes; never
SCons nor the build library (ARCHITECTURE.md).
"""

__version__ = "0.1.0"
