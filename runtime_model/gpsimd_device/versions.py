"""Version metadata the vendor driver pins (the Neuron SDK's build driver, build_custom_op.py:
``__version__`` and the ``versions`` dict, "metadata the host build
reads"): written with every built library (``versions.json``) and into
every host pack's metadata."""

from __future__ import annotations

import json

__all__ = ["VERSIONS", "versions_json"]

VERSIONS = {
    "version": "0.21.2.0",
    "ulib_to_ucode_version": "1.21.1.0",
    "ulib_to_isa_version": "1.0.2520.0",
}


def versions_json(library: str, profile: str) -> str:
    """The text of ``<build>/<profile>/<lib>/versions.json``: JSON with sorted
    keys, 1-space indent, one trailing newline::

        {"library": "relu", "profile": "host", "ulib_to_isa_version": "1.0.2520.0",
         "ulib_to_ucode_version": "1.21.1.0", "version": "0.21.2.0"}
    """
    doc = {"library": library, "profile": profile, **VERSIONS}
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"
