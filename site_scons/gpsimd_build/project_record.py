"""The build folder's record of its project (stdlib only): where the
project's root (the folder the build ran in, which every path of the
build's plans and records is relative to) and its manifest are, so that a
front end started in another folder (the pytest plugin, from any working
directory or on another machine that received the built tree) reads them
from the build folder instead of its own working directory.

``<BUILD_DIR>/project.json``::

    {"format": 1, "root": "..", "manifest": "ops.yaml"}

``root``: the project's folder relative to the build folder (a built tree
that travels with its project keeps working; no absolute path is
written); ``manifest``: the top manifest relative to the root. Written by
every build (``gpsimd_tool``), only when the text changes, link-safe.
"""

import json
import os
from typing import Optional, Tuple

from gpsimd_device.atomic import write_if_changed

__all__ = ["RECORD_NAME", "write", "read"]

#: The record's name in ``<BUILD_DIR>/``.
RECORD_NAME = "project.json"


def write(build_dir: str, root: str, manifest: str) -> None:
    """Record, in ``build_dir``, the project at ``root`` and its manifest
    (a path relative to ``root``, or absolute).

    Raises:
        OSError: the record cannot be written.
    """
    build_abs = os.path.abspath(os.path.join(root, build_dir))
    text = json.dumps({"format": 1, "root": os.path.relpath(os.path.abspath(root), build_abs),
                       "manifest": os.path.relpath(os.path.join(os.path.abspath(root), manifest),
                                                   os.path.abspath(root))},
                      sort_keys=True) + "\n"
    write_if_changed(os.path.join(build_abs, RECORD_NAME), text)


def read(build_dir: str) -> Optional[Tuple[str, str]]:
    """``(absolute project root, absolute manifest path)`` recorded in
    ``build_dir`` (absolute, or relative to the working directory); None
    when there is no readable record of format 1."""
    try:
        with open(os.path.join(build_dir, RECORD_NAME), encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("format") != 1:
            return None
        root = os.path.normpath(os.path.join(os.path.abspath(build_dir), str(doc["root"])))
        return root, os.path.normpath(os.path.join(root, str(doc["manifest"])))
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None
