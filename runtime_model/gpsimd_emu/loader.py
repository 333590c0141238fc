"""Read host packed objects and load core objects, as the device loader does
(ARCHITECTURE.md "The host pack format"; the format's reader and writer are
``gpsimd_device.pack``'s).

A plain (unpacked) ELF ``.so`` is accepted too: with ``-g`` in the user's
cflags no pack step exists (the Neuron SDK's build driver, build_custom_op.py GOTCHA).

Loading: ``payload_fd`` puts the payload in the ``memfd`` that the zygote
(``zygote.c``) ``dlopen``-s through ``/proc/self/fd/N``; the object lists
its ops through the generated trio (ARCHITECTURE.md "The generated
wrapper"); ``check_lsp`` checks what it reports of its linker spec.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

from gpsimd_device import pack as _pack

from . import abi

__all__ = ["LoadError", "PackedObject", "check_lsp", "parse_pack", "read_object", "payload_fd"]

_ELF_MAGIC = b"\x7fELF"


class LoadError(Exception):
    """A core object cannot be read, verified or loaded. The message names
    the file and what is wrong."""


@dataclass(frozen=True)
class PackedObject:
    """A verified core object.

    Attributes:
        path: the file it came from.
        metadata: the pack's metadata dict (empty for a plain ``.so``).
        payload: the ELF shared object bytes.
        packed: True for a ``GPSIMDPK`` container, False for a plain ``.so``.
        file: the filesystem path actually read, when it differs from
            ``path`` (a plain ``.so`` is dlopen-ed from it).
    """

    path: str
    metadata: Dict[str, Any]
    payload: bytes
    packed: bool
    file: Optional[str] = None


def parse_pack(data: bytes, path: str = "<bytes>") -> PackedObject:
    """Verify and split a packed object (``gpsimd_device.pack.parse_pack``).

    Raises:
        LoadError: with the reader's message (``"<path>: ..."``).
    """
    try:
        meta, payload = _pack.parse_pack(data, path)
    except _pack.PackError as e:
        raise LoadError(str(e)) from None
    return PackedObject(path, meta, payload, True)


def read_object(path: str, name: Optional[str] = None) -> PackedObject:
    """Read a core object: a pack (verified) or a plain ELF ``.so``.

    Args:
        path: the file to read.
        name: how messages and ``PackedObject.path`` call it (default
            ``path``), e.g. the path as the plan spells it.

    Raises:
        LoadError: unreadable, neither a pack nor ELF, or a bad pack.
    """
    name = path if name is None else name
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LoadError(f"{name}: cannot read: {e.strerror or e}") from None
    if data.startswith(_ELF_MAGIC):
        return PackedObject(name, {}, data, False, path)
    return replace(parse_pack(data, name), file=path)


def check_lsp(obj: PackedObject, info: Optional[abi.GpsimdLspInfo], lsp: str,
              core: Optional[int]) -> None:
    """Check a core object was linked with linker spec ``lsp`` for ``core``
    (None = single-core): the pack metadata's ``lsp`` and ``core`` when
    present, then ``info`` (what its ``gpsimd_linker_spec_info()`` gave,
    read by the zygote): name, core id, scratch size (2 MiB multicore,
    32 MiB single) and, multicore, origin ``0x84000000 + core * 2 MiB``
    (docs/kernel-api.md, Limits).

    Raises:
        LoadError: naming the expected and the actual value.
    """
    meta = obj.metadata
    if meta and (meta.get("lsp") != lsp or meta.get("core") != core):
        raise LoadError(f"{obj.path}: pack metadata says lsp {meta.get('lsp')!r} "
                        f"core {meta.get('core')}, the plan says {lsp!r} core {core}")
    if info is None:
        return
    fields = [("name", info.name.decode("utf-8", "replace"), lsp),
              ("core_id", info.core_id, abi.LSP_SINGLE if core is None else core),
              ("scratch_size", info.scratch_size, abi.scratch_size(core))]
    if core is not None:
        fields.append(("scratch_origin", info.scratch_origin, abi.scratch_origin(core)))
    shown = lambda v: repr(v) if isinstance(v, str) else f"{v:#x}"  # noqa: E731
    problems = [f"{field} {shown(got)} (expected {shown(want)})"
                for field, got, want in fields if got != want]
    if problems:
        raise LoadError(f"{obj.path}: wrong linker spec for "
                        f"{'single-core' if core is None else f'core {core}'}: "
                        + ", ".join(problems))


def payload_fd(obj: PackedObject) -> int:
    """Write a packed object's payload to a new memfd; returns the fd (the
    caller closes it). Plain ``.so`` objects need no fd.

    Raises:
        LoadError: memfd_create or the write failed.
    """
    try:
        fd = os.memfd_create(os.path.basename(obj.path) or "gpsimd-core", os.MFD_CLOEXEC)
        view = memoryview(obj.payload)
        while view:                 # os.write may write less than asked
            view = view[os.write(fd, view):]
        return fd
    except OSError as e:
        raise LoadError(f"{obj.path}: cannot create a memfd: {e}") from None
