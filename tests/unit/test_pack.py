"""The host pack format: written by the build (gpsimd_device.pack), read by the
device model (gpsimd_emu.loader), which may not import the build side."""
import struct
import zlib

import pytest

from gpsimd_build import profiles
from gpsimd_device import pack
from gpsimd_emu import loader

ELF = b"\x7fELF" + bytes(range(60))


def test_layout_bytes():
    meta = pack.pack_metadata("lib", "lsp_fll_load_cpu2", 2, profiles.VERSIONS)
    blob = pack.pack_bytes(ELF, meta)
    meta_json = (b'{"core":2,"entry":"lib_func","library":"lib","lsp":"lsp_fll_load_cpu2",'
                 b'"versions":{"ulib_to_isa_version":"1.0.2520.0",'
                 b'"ulib_to_ucode_version":"1.21.1.0","version":"0.21.2.0"}}')
    assert blob[:8] == b"GPSIMDPK"
    assert struct.unpack_from("<IIQII", blob, 8) == (
        1, len(meta_json), len(ELF), zlib.crc32(ELF), 0)
    assert blob[32:32 + len(meta_json)] == meta_json
    payload_at = 32 + len(meta_json) + (-(32 + len(meta_json)) % 16)
    assert payload_at % 16 == 0
    assert blob[32 + len(meta_json):payload_at] == bytes(payload_at - 32 - len(meta_json))
    assert blob[payload_at:] == ELF


def test_build_writes_what_the_model_reads():
    meta = pack.pack_metadata("spmd", "lsp_fll_load_cpu7", 7, profiles.VERSIONS)
    obj = loader.parse_pack(pack.pack_bytes(ELF, meta), "x.packed.so")
    assert obj.packed and obj.payload == ELF and obj.metadata == meta


def test_damaged_pack_is_rejected_by_the_model():
    meta = pack.pack_metadata("relu", "lsp_fll_load_cpu_single", None, profiles.VERSIONS)
    blob = bytearray(pack.pack_bytes(ELF, meta))
    blob[-1] ^= 0xFF
    with pytest.raises(loader.LoadError, match="x.packed.so"):
        loader.parse_pack(bytes(blob), "x.packed.so")


def test_deterministic():
    meta = pack.pack_metadata("a", "lsp_fll_load_cpu0", 0, profiles.VERSIONS)
    assert pack.pack_bytes(ELF, meta) == pack.pack_bytes(ELF, dict(reversed(list(meta.items()))))
