"""The manifest is validated once per change.

Loading and validating a 1,000-op collection (YAML, JSON Schema, semantic
checks) takes a third of a second; a null build should not pay it again.
:func:`load` keeps the validated model in ``<BUILD_DIR>/.gpsimd-manifest``
with everything the validation read or looked at (``Collection.reads``: the
bytes of every manifest, what every ``include:`` glob matched, the kind and
real path of every path it checked, the reference files it scanned, the
``.npy`` headers) and a key of what else decides the result: the format of
this cache, the top manifest as given, the root's absolute path, the
allowed outside roots, and a digest of the validating code and data (the
build library, the device facts and their headers, the JSON Schema); the
key is kept as a digest, so no absolute path is written. The cached model is used only
when the key is equal and every read still holds
(``gpsimd_build.manifest.reads_still_hold``); anything else, including a
damaged cache file, loads the manifest again. A manifest with errors is
never cached.
"""

import hashlib
import os
import pickle
from typing import Iterable, Optional

from gpsimd_device.atomic import open_private

__all__ = ["CACHE_NAME", "code_digest", "load", "store"]

CACHE_NAME = ".gpsimd-manifest"
_FORMAT = 1


def code_digest() -> str:
    """SHA-256 over the code and data validation depends on: the build
    library's Python files, the device facts package and its headers, and
    the JSON Schema (sorted by path; ``gpsimd_build.layout`` finds them in a
    checkout or installed)."""
    from gpsimd_build import layout
    from gpsimd_device.headers import INCLUDE_DIR
    files = [layout.SCHEMA_PATH]
    for top, suffixes in ((layout.PACKAGE_DIR, (".py",)),
                          (layout.device_dir(), (".py",)),
                          (os.path.join(INCLUDE_DIR, "gpsimd_host"), (".h",))):
        for folder, _, names in os.walk(top):
            files += [os.path.join(folder, n) for n in names if n.endswith(suffixes)]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"!")
    return h.hexdigest()


def _key(manifest: str, root: str, allow_paths: Iterable[str]) -> str:
    """A digest (so that no file under the build folder holds an absolute
    path) of the format, the manifest as given, the root's absolute path,
    the allowed outside roots and :func:`code_digest`."""
    parts = (_FORMAT, os.fspath(manifest), os.path.abspath(root),
             tuple(os.fspath(p) for p in allow_paths), code_digest())
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def load(build_dir: str, manifest: str, root: str = ".", allow_paths: Iterable[str] = ()):
    """The cached collection of ``manifest`` if it is still what loading it
    would give, else None (never raises)."""
    try:
        with open_private(os.path.join(build_dir, CACHE_NAME)) as f:     # (a pickle)
            doc = pickle.load(f)
        if doc["key"] != _key(manifest, root, allow_paths):
            return None
        from gpsimd_build.manifest import reads_still_hold
        if not reads_still_hold(doc["reads"], root):
            return None
        return doc["collection"].with_reads(doc["reads"])
    except Exception:   # a missing, old or damaged cache: load the manifest
        return None


def store(build_dir: str, collection, manifest: str, root: str = ".",
          allow_paths: Iterable[str] = ()) -> Optional[str]:
    """Keep ``collection`` (a validated ``Collection``) for :func:`load`;
    written atomically. Returns an error text instead of raising."""
    from gpsimd_device.atomic import write_atomically
    try:
        data = pickle.dumps({"key": _key(manifest, root, allow_paths),
                             "reads": tuple(collection.reads), "collection": collection},
                            protocol=pickle.HIGHEST_PROTOCOL)
        write_atomically(os.path.join(build_dir, CACHE_NAME), data, private=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as e:
        return str(e)
    return None
