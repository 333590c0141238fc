"""The host pack format: what ``<base>.packed.so`` holds on the host profile.

On the device, ``xt-pkg-loadlib -e lib_func`` turns each linked object into
a packed and a stripped object (the Neuron SDK's build driver, build_custom_op.py). On the host the
stripped object is ``strip --strip-unneeded`` of the linked one, and the
packed object is a small container around the same bytes, so that the
emulator loads only what was packed, for the core it was packed for, and
detects a damaged or wrong file. The build writes it (:func:`pack_bytes`),
the emulator reads it (:func:`parse_pack`). Layout, all integers
little-endian:

=======  ====  ===================================================
offset   size  field
=======  ====  ===================================================
0        8     magic ``b"GPSIMDPK"``
8        4     format version (1)
12       4     metadata size M (bytes)
16       8     payload size P (bytes)
24       4     CRC-32 (zlib) of the payload
28       4     reserved, 0
32       M     metadata, UTF-8 JSON with sorted keys, no spaces:
               ``entry`` ("lib_func"), ``library``, ``lsp``, ``core``
               (0..7 or null), ``versions`` (the Neuron SDK's build driver, build_custom_op.py)
32+M..   pad   zero bytes up to a multiple of 16
..       P     payload: the stripped ELF shared object
=======  ====  ===================================================
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["MAGIC", "FORMAT_VERSION", "HEADER", "HEADER_SIZE", "ALIGN", "ENTRY",
           "REQUIRED_KEYS", "PackError", "pack_metadata", "pack_bytes", "parse_pack"]

MAGIC = b"GPSIMDPK"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQII")
HEADER_SIZE = HEADER.size  # 32 bytes
ALIGN = 16
#: The entry name of the packer (the Neuron SDK's build driver, build_custom_op.py: -e lib_func).
ENTRY = "lib_func"
REQUIRED_KEYS = ("core", "entry", "library", "lsp", "versions")
_ELF_MAGIC = b"\x7fELF"


class PackError(ValueError):
    """A packed object is damaged or not one; the message starts with the
    file's name."""


def pack_metadata(library: str, lsp: str, core: Optional[int],
                  versions: Mapping[str, str]) -> Dict[str, Any]:
    """The metadata of one packed object (see the module docstring)."""
    return {"entry": ENTRY, "library": library, "lsp": lsp, "core": core,
            "versions": dict(versions)}


def pack_bytes(payload: bytes, metadata: Mapping[str, Any]) -> bytes:
    """The packed container for ``payload`` (an ELF object's bytes).
    Deterministic: the same payload and metadata give the same bytes."""
    meta = json.dumps(metadata, sort_keys=True, separators=(",", ":")).encode("utf-8")
    header = HEADER.pack(MAGIC, FORMAT_VERSION, len(meta), len(payload),
                         zlib.crc32(payload) & 0xFFFFFFFF, 0)
    body = header + meta
    body += b"\0" * (-len(body) % ALIGN)
    return body + payload


def parse_pack(data: bytes, path: str = "<bytes>") -> Tuple[Dict[str, Any], bytes]:
    """Verify and split a packed object: ``(metadata, payload)``.

    Args:
        data: the file's bytes.
        path: the file name, for messages.

    Raises:
        PackError: ``"<path>: ..."`` for a truncated header/metadata/payload,
            bad magic, unsupported version, non-zero reserved word, metadata
            that is not a JSON object or lacks a key, an entry other than
            ``lib_func``, a CRC-32 mismatch, bytes after the payload that are
            not zero padding, or a payload that is not ELF.
    """
    if len(data) < HEADER_SIZE:
        raise PackError(f"{path}: truncated: {len(data)} bytes, a pack header is {HEADER_SIZE}")
    magic, version, msize, psize, crc, reserved = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise PackError(f"{path}: bad magic {magic!r}, expected {MAGIC!r} (not a GPSIMD host pack)")
    if version != FORMAT_VERSION:
        raise PackError(f"{path}: pack format version {version}, this model reads {FORMAT_VERSION}")
    if reserved != 0:
        raise PackError(f"{path}: reserved header word is {reserved:#x}, not 0")
    if HEADER_SIZE + msize > len(data):
        raise PackError(f"{path}: truncated: metadata of {msize} bytes "
                        f"ends past the file end ({len(data)} bytes)")
    try:
        meta = json.loads(data[HEADER_SIZE:HEADER_SIZE + msize].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PackError(f"{path}: metadata is not UTF-8 JSON: {e}") from None
    if not isinstance(meta, dict):
        raise PackError(f"{path}: metadata is not a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise PackError(f"{path}: metadata lacks {', '.join(missing)}")
    if meta["entry"] != ENTRY:
        raise PackError(f"{path}: wrong entry {meta['entry']!r}, expected {ENTRY!r}")
    start = (HEADER_SIZE + msize + ALIGN - 1) // ALIGN * ALIGN
    end = start + psize
    if end > len(data):
        raise PackError(f"{path}: truncated: payload of {psize} bytes at offset "
                        f"{start} needs {end} bytes, file has {len(data)}")
    if any(data[end:]):
        raise PackError(f"{path}: {len(data) - end} unexpected bytes after the payload")
    payload = bytes(data[start:end])
    actual = zlib.crc32(payload) & 0xFFFFFFFF
    if actual != crc:
        raise PackError(f"{path}: CRC mismatch: header says {crc:#010x}, payload has {actual:#010x}")
    if not payload.startswith(_ELF_MAGIC):
        raise PackError(f"{path}: payload is not an ELF object")
    return meta, payload
