"""The host pack format: what ``<base>.packed.so`` holds on the host profile.

On the device, ``xt-pkg-loadlib -e lib_func`` turns each linked object into
a packed and a stripped object (build-front-end.txt §5d). On the host the
stripped object is ``strip --strip-unneeded`` of the linked one, and the
packed object is a small container around the same bytes, so that the
emulator loads only what was packed, for the core it was packed for, and
detects a damaged or wrong file. Layout (all integers little-endian), as in
ARCHITECTURE.md:

=======  ====  ===================================================
offset   size  field
=======  ====  ===================================================
0        8     magic ``b"GPSIMDPK"``
8        4     format version (1)
12       4     metadata size M (bytes)
16       8     payload size P (bytes)
24       4     CRC-32 (zlib) of the payload
28       4     reserved, 0
32       M     metadata, UTF-8 JSON with sorted keys, no spaces
32+M..   pad   zero bytes up to a multiple of 16
..       P     payload: the stripped ELF shared object
=======  ====  ===================================================

The reader lives in the device model (``gpsimd_emu.loader``), which may not
import the build side; a test writes with this module and reads with that one.
"""

import json
import struct
import zlib
from typing import Mapping, Optional

MAGIC = b"GPSIMDPK"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQII")  # 32 bytes
ALIGN = 16
#: The entry name of the packer (build-front-end.txt §5d: -e lib_func).
ENTRY = "lib_func"


def pack_metadata(library: str, lsp: str, core: Optional[int],
                  versions: Mapping[str, str]) -> dict:
    """The metadata of one packed object (see the module docstring)."""
    return {"entry": ENTRY, "library": library, "lsp": lsp, "core": core,
            "versions": dict(versions)}


def pack_bytes(payload: bytes, metadata: Mapping) -> bytes:
    """Return the packed container for ``payload`` (an ELF object's bytes).

    Deterministic: the same payload and metadata give the same bytes.
    """
    meta = json.dumps(metadata, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta), len(payload),
                         zlib.crc32(payload) & 0xFFFFFFFF, 0)
    body = header + meta
    body += b"\0" * (-len(body) % ALIGN)
    return body + payload


def pack_file(stripped_path: str, packed_path: str, metadata: Mapping) -> None:
    """Write ``packed_path`` from the stripped object at ``stripped_path``.

    Raises OSError when a file cannot be read or written.
    """
    with open(stripped_path, "rb") as f:
        payload = f.read()
    with open(packed_path, "wb") as f:
        f.write(pack_bytes(payload, metadata))
