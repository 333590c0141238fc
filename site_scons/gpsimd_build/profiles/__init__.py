"""Target profiles: plug-ins that say how a library is built for a target.

A profile is an object with the interface of :class:`base.Profile`; the
SCons tool's graph code calls that interface and never asks which profile
it holds. Two ship with the project:

* ``host`` (:mod:`.host`, the default): shared objects for this machine,
  linked with the project's own runtime (``runtime_model/``), which the
  emulator loads and runs;
* ``xtensa`` (:mod:`.xtensa`): the vendor driver's exact commands
  (the Neuron SDK's build driver, build_custom_op.py); nothing runs.

A third profile is a new module with a class implementing the interface,
registered in :data:`PROFILES`.

Everything that differs between the host and the device in the *generated
text* is a :class:`base.WrapperDialect` (``HOST_DIALECT``,
``DEVICE_DIALECT``), and nowhere else.
"""

from typing import Dict, Mapping, Type

from gpsimd_device.lsp import (MULTICORE_LSPS, SINGLE_LSP, LinkerSpec, linked_names,  # noqa: F401
                               linker_specs)
from gpsimd_device.versions import VERSIONS, versions_json  # noqa: F401

from .base import (DEVICE_DIALECT, HOST_DIALECT, Graph, Profile, ProfileError, Shared,  # noqa: F401
                   WrapperDialect)
from .host import HOST_CXXFLAGS, HOST_LINKFLAGS, HostProfile, lsp_source  # noqa: F401
from .xtensa import XTENSA_COMMON_FLAGS, XtensaProfile  # noqa: F401

#: Cores of the SPMD model (the Neuron SDK's build driver, build_custom_op.py: NUM_CPUS = 8).
NUM_CPUS = len(MULTICORE_LSPS)

#: Profile name -> class.
PROFILES: Dict[str, Type[Profile]] = {"host": HostProfile, "xtensa": XtensaProfile}


def get_profile(name: str, environ: Mapping[str, str], cxx: str = "g++") -> Profile:
    """The profile called ``name``, configured from the environment of the
    shell (``environ``: the xtensa profile reads ``Q7_CORE``,
    ``NEURON_CUSTOM_OP``, ``Q7_TOOLS``) and the host compiler ``cxx``.

    Raises:
        ProfileError: no such profile (the message lists the known ones).
    """
    try:
        cls = PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown toolchain '{name}' ({' or '.join(PROFILES)})") from None
    return cls.configure(environ, cxx)
