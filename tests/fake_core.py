"""The stand-in core object (``tests/native/fake_core.cpp``), compiled for
the emulator's tests as a single-core library's object or as one core of
a multicore library's, with the defines that pick its misbehaviours."""

from __future__ import annotations

import os
import shutil
import subprocess

from gpsimd_emu import abi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The C++ compiler the stand-in is compiled with (None: none here).
CXX = shutil.which("g++") or shutil.which("c++")


def compile_fake_core(out, core=None, *defines, wait=True):
    """Compile the stand-in into ``out``: for core ``core`` of a multicore
    library (0-7: its LSP, scratch origin and size), or a single-core
    library's object (None), with ``defines`` (``-DNAME`` arguments).
    ``wait``: return once it is compiled (raising CalledProcessError when
    it fails), else the running ``Popen``."""
    if core is None:
        lsp = (abi.LSP_SINGLE, abi.SCRATCH_BASE, abi.SCRATCH_SINGLE_SIZE,
               "lsp_fll_load_cpu_single")
    else:
        lsp = (core, abi.scratch_origin(core), abi.SCRATCH_CORE_SIZE, abi.lsp_name(core))
    argv = [CXX, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wl,-Bsymbolic",
            "-I", os.path.join(ROOT, "runtime_model", "include"), f"-DCORE_ID={lsp[0]}u",
            f"-DORIGIN={lsp[1]}ull", f"-DSIZE={lsp[2]}ull", f'-DNAME="{lsp[3]}"', *defines,
            "-o", str(out), os.path.join(ROOT, "tests", "native", "fake_core.cpp")]
    return subprocess.run(argv, check=True) if wait else subprocess.Popen(argv)
