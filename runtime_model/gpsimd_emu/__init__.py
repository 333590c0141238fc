"""gpsimd_emu: the Python device model of the GPSIMD engine.

Runs the ops of a host-built custom-op library against an emulated device:
HBM, the 48-byte argument descriptors and the argument stream of
customop-marshalling.txt §2, per-core objects loaded as the device loader
does, poisoned private outputs per core, and per-dtype comparisons with a
numpy reference. CLI: ``python -m gpsimd_emu run PLAN --results OUT``.

Modules: ``dtypes`` (dtype table), ``abi`` (bytes of abi.h), ``memory``
(emulated HBM and core buffers), ``loader`` (host pack format, dlopen,
registration), ``vectors`` (inputs, references), ``merge`` (who wrote what),
``compare`` (tolerances), ``runner`` (plans, forked runs, results).

This package imports only the standard library, numpy and ml_dtypes; never
SCons nor the build library (DESIGN.md "Layout").
"""

__version__ = "0.1.0"
