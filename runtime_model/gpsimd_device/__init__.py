"""Device facts and the build <-> emulator contract, shared by both sides.

A small, stdlib-only package that the build library (``gpsimd_build``, on
the SCons side) and the device model (``gpsimd_emu``) both import, and that
imports neither (ARCHITECTURE.md). What it holds:

==================  ==========================================================
module              holds
==================  ==========================================================
``headers``         where the host headers are; reading ``#define`` values and
                    X-macro rows out of them
``limits``          device limits: cores, windows, stack, names, dims, ops per
                    library, TCM, printf (read from ``gpsimd_host/abi.h``)
``dtypes``          the dtype table (read from ``gpsimd_host/dtypes.h``)
``lsp``             the linker specs (LSPs) of the cores and object names
``faults``          fault kinds (read from ``gpsimd_host/faults.h``)
``pack``            the host pack format, writer and reader
``versions``        the driver's version metadata (the Neuron SDK's build driver, build_custom_op.py)
``plan``            the test plan the build writes and the emulator reads
``results``         the results the emulator writes and the build reads
==================  ==========================================================

The C++ side reads the same facts from the same headers (X-macros and
``#define`` lines), so each fact is written once.
"""
