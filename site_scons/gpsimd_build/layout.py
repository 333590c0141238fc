"""Where the parts of gpsimd-build are, in a checkout and installed.

A checkout keeps the packages' parts side by side; ``pip install .``
(``pyproject.toml``) puts each part inside the package that uses it, so an
installed copy needs no checkout:

========================  ===================================  ==========================================
part                      checkout                             installed (``<site>``: site-packages)
========================  ===================================  ==========================================
the build library         ``site_scons/gpsimd_build``          ``<site>/gpsimd_build``
the SCons tool            ``site_scons/site_tools``            ``<site>/gpsimd_build/site_tools``
the JSON Schema           ``schema/ops.schema.json``           ``<site>/gpsimd_build/schema/ops.schema.json``
device facts, model       ``runtime_model/gpsimd_device``,     ``<site>/gpsimd_device``, ``gpsimd_emu``
                          ``gpsimd_emu``
runtime headers, sources  ``runtime_model/include``, ``src``   ``<site>/gpsimd_device/include``, ``src``
========================  ===================================  ==========================================

(The runtime's folders are found by ``gpsimd_device.headers.INCLUDE_DIR``,
which the device facts need without this package.) Each path here is
decided by what exists on disk, the installed place first; nothing here
imports the emulator.
"""

import os
from typing import List

__all__ = ["PACKAGE_DIR", "SCHEMA_PATH", "toolpath", "python_roots", "runtime_dir",
           "emulator_dir", "device_dir", "emulator_python_files", "step_python_files"]

#: This package's folder.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _first_existing(*candidates: str) -> str:
    """The first of ``candidates`` that exists, else the last one (so that
    the error that follows names the checkout's place)."""
    for path in candidates:
        if os.path.exists(path):
            return path
    return candidates[-1]


#: The manifest's JSON Schema (draft 2020-12).
SCHEMA_PATH = _first_existing(
    os.path.join(PACKAGE_DIR, "schema", "ops.schema.json"),
    os.path.join(os.path.dirname(os.path.dirname(PACKAGE_DIR)), "schema", "ops.schema.json"))


def toolpath() -> str:
    """The folder to give SCons as ``toolpath`` for ``env.Tool("gpsimd")``
    (it holds ``gpsimd.py`` and its package ``gpsimd_tool``), e.g.::

        import gpsimd_build
        env = Environment(tools=["gpsimd"], toolpath=[gpsimd_build.toolpath()])
    """
    installed = os.path.join(PACKAGE_DIR, "site_tools")
    if os.path.isfile(os.path.join(installed, "gpsimd.py")):
        return installed
    return os.path.join(os.path.dirname(PACKAGE_DIR), "site_tools")


def device_dir() -> str:
    """The folder of the ``gpsimd_device`` package."""
    import gpsimd_device
    return os.path.dirname(os.path.abspath(gpsimd_device.__file__))


def runtime_dir() -> str:
    """The folder holding the runtime's ``include/`` and ``src/``
    (``runtime_model`` in a checkout, ``gpsimd_device`` installed)."""
    from gpsimd_device.headers import INCLUDE_DIR
    return os.path.dirname(INCLUDE_DIR)


def emulator_dir() -> str:
    """The folder of the ``gpsimd_emu`` package (beside ``gpsimd_device`` in
    both layouts; found without importing it: the build never imports the
    emulator)."""
    return os.path.join(os.path.dirname(device_dir()), "gpsimd_emu")


def _python_files(tops: List[str], skip: tuple = ()) -> List[str]:
    """Every ``.py`` file below the folders ``tops`` but those below a
    folder of ``skip`` (and ``__pycache__``). Absolute paths, sorted."""
    out = []
    for top in tops:
        for folder, subfolders, names in os.walk(top):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"
                             and os.path.join(folder, d) not in skip]
            out += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return sorted(out)


def emulator_python_files() -> List[str]:
    """Every ``.py`` file of ``gpsimd_emu`` (its subpackages, the client,
    included) and of ``gpsimd_device``: the code a test's result depends
    on besides the emulator's program. Absolute paths, sorted."""
    return _python_files([emulator_dir(), device_dir()])


def step_python_files() -> List[str]:
    """Every ``.py`` file the build's own steps (``python -m
    gpsimd_build.steps``: pack, stack report, registration check...) may
    run: this package's (an installed copy's ``site_tools`` left out: the
    SCons tool runs in SCons), ``gpsimd_device``'s and the emulator's
    client's, which starts their child processes. Absolute paths, sorted."""
    return _python_files([PACKAGE_DIR, device_dir(), os.path.join(emulator_dir(), "client")],
                         skip=(os.path.join(PACKAGE_DIR, "site_tools"),))


def python_roots() -> List[str]:
    """The folders to put on ``PYTHONPATH`` so that ``gpsimd_device``,
    ``gpsimd_emu`` and this package import as they do here (the device
    model's first), without duplicates."""
    out: List[str] = []
    for path in (os.path.dirname(device_dir()), os.path.dirname(PACKAGE_DIR)):
        if path not in out:
            out.append(path)
    return out
