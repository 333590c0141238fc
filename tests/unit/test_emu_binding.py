"""binding.header_struct, the one reader of the host headers' C structures
(the real headers' sizes and offsets are compared with the compiler's here
for shape_abi.h, by test_emu_abi.py and test_emu_zygote_program.py for the
others)."""
import ctypes

import pytest

from c_layout import CC, check_layouts
from gpsimd_device import headers
from gpsimd_emu import shapelib
from gpsimd_emu.binding import header_struct

_A = "#define GPSIMD_N 3\ntypedef struct { uint16_t x; char name[GPSIMD_N]; } rd_a;\n"
_B = """#include "gpsimd_host/rd_a.h"
#define GPSIMD_M 2
typedef struct rd_tag { int64_t first, second[GPSIMD_M]; } rd_pair;   /* two fields */
typedef union { uint32_t w; uint8_t b[4]; } rd_u;
typedef struct {
    rd_pair p[2 * GPSIMD_M];
    rd_a a;                       /* of the header it includes */
    struct { uint8_t k; } inner;
    const char *s;
    rd_u u;
} rd_b;
typedef struct { int32_t x : 3; } rd_bits;
"""


def test_the_structures_a_header_writes(tmp_path, monkeypatch):
    (tmp_path / "gpsimd_host").mkdir()
    (tmp_path / "gpsimd_host" / "rd_a.h").write_text(_A)
    (tmp_path / "gpsimd_host" / "rd_b.h").write_text(_B)
    monkeypatch.setattr(headers, "INCLUDE_DIR", str(tmp_path))
    b, pair = header_struct("rd_b.h", "rd_b"), header_struct("rd_b.h", "rd_pair")
    assert pair._fields_ == [("first", ctypes.c_int64), ("second", ctypes.c_int64 * 2)]
    assert [name for name, _ in b._fields_] == ["p", "a", "inner", "s", "u"]
    assert b.p.size == 4 * ctypes.sizeof(pair)
    # one class per structure: the one of the header that defines it
    assert dict(b._fields_)["a"] is header_struct("rd_a.h", "rd_a")
    assert header_struct("rd_a.h", "rd_a")._fields_ == [("x", ctypes.c_uint16),
                                                       ("name", ctypes.c_char * 3)]
    assert dict(b._fields_)["s"] is ctypes.c_char_p
    assert issubclass(dict(b._fields_)["u"], ctypes.Union) and b.u.size == 4
    assert (b.a.offset, b.inner.offset, b.s.offset, b.u.offset, ctypes.sizeof(b)) == (
        96, 102, 104, 112, 120)
    with pytest.raises(headers.HeaderError, match="rd_b.h: no struct or union rd_tag$"):
        header_struct("rd_b.h", "rd_tag")    # (a tag is not a typedef)
    with pytest.raises(headers.HeaderError, match=r"rd_bits: cannot read 'int32_t x : 3;'$"):
        header_struct("rd_b.h", "rd_bits")


@pytest.mark.slow
@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_the_shape_librarys_structures_are_the_compilers(tmp_path):
    """Every size and field offset of the structures shapelib reads, as a C
    program compiled from shape_abi.h says them (a shape library checks only
    their sizes, at load)."""
    names = ("gpsimd_shape_arg", "gpsimd_shape_result", "gpsimd_shape_library_info",
             "gpsimd_shape_def_info")
    structs = {t: header_struct("shape_abi.h", t) for t in names}
    assert tuple(structs.values()) == (shapelib._Arg, shapelib._Result, shapelib._LibraryInfo,
                                       shapelib._DefInfo)
    checked = check_layouts(tmp_path, ["gpsimd_host/shape_abi.h"], structs)
    assert list(checked.values()) == [7, 6, 4, 12]
