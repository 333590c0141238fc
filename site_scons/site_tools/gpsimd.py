"""SCons tool ``gpsimd``: builds a GPSIMD custom-op collection from a manifest.

One builder per graph stage (ARCHITECTURE.md):

==================  ===============================================  ==========
builder             target                                           source
==================  ===============================================  ==========
GpsimdWrapper       ``<lib>/wrapper.cpp``                            Value(spec)
GpsimdObject        ``<lib>/obj/<src>.o`` (one per translation unit) .cpp
GpsimdArchive       ``runtime/libneuroncustomop.a`` (host runtime)   objects
GpsimdText          a generated text file (LSP source, plan, ...)    Value(text)
GpsimdLink          ``<lib>_cpuI.so`` / ``<lib>.so`` (one per LSP)   objects
GpsimdPack          ``<base>.packed.so`` + ``<base>.stripped.so``    linked .so
                    of every core of a library, in one action        of each core
GpsimdVendorPack    the same, by ``xt-pkg-loadlib`` (xtensa)         linked .so
GpsimdStackGraph    ``runtime/stack-graph.json`` (the runtime's     objects
                    functions, read once)
GpsimdStackReport   ``<lib>/stack-report.txt`` (frames and calls     objects, graph
                    read from the objects: ``objdump``)
GpsimdTest          ``<lib>/test-results.json``                      plan, objects
==================  ===============================================  ==========

``env.GpsimdCollection(manifest)`` loads and validates the manifest (a bad
one stops the build with located errors, no traceback), expands it into the
graph above through the target profile's plug-in
(``gpsimd_build.profiles``), defines the aliases ``<lib>``, ``test-<lib>``,
``test``, ``stack-report``, ``digests``, ``compiledb`` and the default
``all``, and returns a dict of the nodes per library.

Commands are construction variables (``$GPSIMD_CXXCOM`` over
``$GPSIMD_CXX``, ``$GPSIMD_CXXFLAGS``, ``$GPSIMD_USER_CFLAGS``...; see
``gpsimd_build.profiles.base``) that an SConstruct may ``Append`` to.

The tool is this file (``exists``/``generate``) and the package
``gpsimd_tool`` beside it (builders, the graph); they are the only modules of
the project that import SCons. An SConstruct elsewhere loads it with
``toolpath=[gpsimd_build.toolpath()]`` (a checkout's ``site_scons/site_tools``
or an installed copy's ``gpsimd_build/site_tools``).
"""

import os
import sys

# Loaded through toolpath= from another project, SCons has not put this
# project's site_scons on sys.path. The build library, the device facts and
# model, and the tool's own package are found beside this file: in a
# checkout, site_scons/ and runtime_model/ (they come first, so a checkout's
# tool uses its own library even where another copy is installed); installed
# (<site>/gpsimd_build/site_tools/), the folder that holds the packages.
_HERE = os.path.dirname(os.path.abspath(__file__))
_PARENT = os.path.dirname(_HERE)
if os.path.isfile(os.path.join(_PARENT, "gpsimd_build", "__init__.py")):
    _ROOTS = (os.path.join(os.path.dirname(_PARENT), "runtime_model"), _PARENT)
else:
    _ROOTS = (os.path.dirname(_PARENT),)
for _p in _ROOTS + (_HERE,):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from gpsimd_tool import builders, cache, graph  # noqa: E402
from gpsimd_tool import options as command_line  # noqa: E402  (a tool's "options" is a hook of SCons)


def exists(env):
    """The host profile needs a C++ compiler and strip."""
    return bool(env.Detect(env.get("CXX", "g++")) and env.Detect("strip"))


def generate(env):
    """Add the gpsimd builders and the GpsimdCollection method (idempotent)."""
    if env.get("GPSIMD_TOOL"):
        return
    env["GPSIMD_TOOL"] = True
    if not env.get("AR"):   # the host runtime is an archive
        env.Tool("ar")
    builders.add_builders(env)
    command_line.apply(env)     # the command line's options (scons -h)
    # a CacheDir (the SConstruct's or anyone's) keyed independently of
    # where BUILD_DIR and the project are (SCons's public CACHEDIR_CLASS)
    env["CACHEDIR_CLASS"] = cache.RelocatableCacheDir
    env.AddMethod(graph.GpsimdCollection, "GpsimdCollection")
