"""Host pack format reading and verification (gpsimd_emu.loader)."""
import json
import struct
import zlib

import pytest

from gpsimd_emu import abi, loader
from gpsimd_emu.loader import LoadError

ELF = b"\x7fELF" + bytes(range(60))
META = {"entry": "lib_func", "library": "relu", "lsp": "lsp_fll_load_cpu3", "core": 3,
        "versions": {"ulib_to_ucode_version": "1.21.1.0"}}


def by_hand(payload=ELF, meta=META, magic=b"GPSIMDPK", version=1, crc=None, reserved=0):
    m = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    head = struct.pack("<8sIIQII", magic, version, len(m), len(payload),
                       zlib.crc32(payload) if crc is None else crc, reserved) + m
    head += b"\0" * (-len(head) % 16)
    return head + payload


def test_hand_written_container_reads(tmp_path):
    data = by_hand()
    assert (32 + len(json.dumps(META, sort_keys=True, separators=(",", ":")))) <= data.index(ELF)
    assert data.index(ELF) % 16 == 0
    p = tmp_path / "relu_cpu3.packed.so"
    p.write_bytes(data)
    obj = loader.read_object(str(p))
    assert obj.payload == ELF and obj.packed and obj.metadata["core"] == 3
    assert obj.metadata["lsp"] == "lsp_fll_load_cpu3"
    from gpsimd_device.pack import pack_bytes
    assert pack_bytes(ELF, META) == data


def test_build_side_writer_matches_reader():
    pack = pytest.importorskip("gpsimd_device.pack")
    data = pack.pack_bytes(ELF, pack.pack_metadata("relu", "lsp_fll_load_cpu_single", None,
                                                   {"a": "1"}))
    obj = loader.parse_pack(data, "x.packed.so")
    assert obj.payload == ELF and obj.metadata["core"] is None


@pytest.mark.parametrize("mutate,message", [
    (lambda d: b"GPSIMDPX" + d[8:], "bad magic"),
    (lambda d: d[:20], "truncated"),
    (lambda d: d[:-1], "truncated"),
    (lambda d: d[:-3] + bytes([d[-3] ^ 1]) + d[-2:], "CRC mismatch"),
    (lambda d: d + b"junk", "unexpected bytes after the payload"),
])
def test_corruption_is_reported_with_file_name(mutate, message):
    with pytest.raises(LoadError, match=message) as info:
        loader.parse_pack(mutate(by_hand()), "build/host/relu/relu.packed.so")
    assert str(info.value).startswith("build/host/relu/relu.packed.so: ")


def test_header_field_errors():
    with pytest.raises(LoadError, match="version 2"):
        loader.parse_pack(by_hand(version=2), "f")
    with pytest.raises(LoadError, match="reserved"):
        loader.parse_pack(by_hand(reserved=1), "f")
    with pytest.raises(LoadError, match="wrong entry 'main'"):
        loader.parse_pack(by_hand(meta=dict(META, entry="main")), "f")
    with pytest.raises(LoadError, match="lacks lsp"):
        loader.parse_pack(by_hand(meta={k: v for k, v in META.items() if k != "lsp"}), "f")
    with pytest.raises(LoadError, match="not an ELF"):
        loader.parse_pack(by_hand(payload=b"MZ" + bytes(20)), "f")
    with pytest.raises(LoadError, match="CRC mismatch: header says 0x00000000"):
        loader.parse_pack(by_hand(crc=0), "f")


def test_trailing_zero_padding_is_accepted():
    obj = loader.parse_pack(by_hand() + bytes(16), "f")
    assert obj.payload == ELF


def test_read_object_plain_so_and_missing(tmp_path):
    p = tmp_path / "relu.so"
    p.write_bytes(ELF)
    obj = loader.read_object(str(p))
    assert not obj.packed and obj.metadata == {} and obj.payload == ELF
    with pytest.raises(LoadError, match="nope.packed.so: cannot read"):
        loader.read_object(str(tmp_path / "nope.packed.so"))
    q = tmp_path / "garbage.so"
    q.write_bytes(b"hello world, not an object at all")
    with pytest.raises(LoadError, match="bad magic"):
        loader.read_object(str(q))


def test_the_linker_spec_an_object_reports_is_checked():
    """``check_lsp`` reads the zygote's ``gpsimd_lsp_info`` (binding.GpsimdLspInfo)."""
    obj = loader.PackedObject("c.so", {}, ELF, False)
    spec = abi.GpsimdLspInfo(core_id=3, scratch_origin=abi.scratch_origin(3),
                             scratch_size=abi.SCRATCH_CORE_SIZE, name=b"lsp_fll_load_cpu3")
    loader.check_lsp(obj, spec, "lsp_fll_load_cpu3", 3)
    loader.check_lsp(obj, None, "lsp_fll_load_cpu3", 3)
    with pytest.raises(LoadError, match=r"^c.so: wrong linker spec for core 4: name "
                       r"'lsp_fll_load_cpu3' \(expected 'lsp_fll_load_cpu4'\), core_id 0x3 "
                       r"\(expected 0x4\), scratch_origin 0x84600000 \(expected 0x84800000\)$"):
        loader.check_lsp(obj, spec, "lsp_fll_load_cpu4", 4)
    with pytest.raises(LoadError, match=r"single-core: .*scratch_size 0x200000 \(expected "):
        loader.check_lsp(obj, spec, "lsp_fll_load_cpu_single", None)
