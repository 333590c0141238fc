"""gpsimd_build: the SCons-free build library of gpsimd-build (manifest,
code generation, target profiles, test plans, the build's own steps).

From an SConstruct outside this project::

    import gpsimd_build
    env = Environment(tools=["gpsimd"], toolpath=[gpsimd_build.toolpath()])
    env.GpsimdCollection("ops.yaml")

:func:`toolpath` is the folder of the SCons tool, in a checkout or in an
installed copy (``gpsimd_build.layout``).
"""

from .layout import toolpath

__all__ = ["toolpath"]
