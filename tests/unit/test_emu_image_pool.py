"""The image files a session keeps between vectors (gpsimd_emu.memory's
``ImagePool``, ``ImageFile.reset``): for random layouts and random
sequences of vectors, each run on by a "kernel" that scribbles over any
bytes of the file (its outputs, records, inputs, gaps: what a vector that
crashed or was killed half-way leaves too), the file a vector is given
holds, once laid out, the very bytes of a new file laid out for that
vector alone."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpsimd_emu import abi
from gpsimd_emu import dtypes as dt
from gpsimd_emu.image import DeviceImage
from gpsimd_emu.memory import ImageFile, ImagePool
from gpsimd_emu.vectors import Input

DTYPES = ["float32", "int8", "bfloat16", "int64"]


def _extents(f: ImageFile):
    """The ``(offset, end)`` extents of the file that hold pages (the
    rest reads as zeros: holes)."""
    out, at = [], 0
    while at < f.size:
        try:
            start = os.lseek(f.fd, at, os.SEEK_DATA)
        except OSError:          # (ENXIO: no data after at)
            break
        at = os.lseek(f.fd, start, os.SEEK_HOLE)
        out.append((start, at))
    return out


def _same_bytes(a: ImageFile, b: ImageFile) -> None:
    """Every byte of ``a`` and ``b`` equal (compared where either holds pages)."""
    assert a.size == b.size
    for start, end in sorted(set(_extents(a)) | set(_extents(b))):
        diff = np.flatnonzero(a.u8[start:end] != b.u8[start:end])
        assert diff.size == 0, f"byte {start + int(diff[0])} differs from a new file's"


@st.composite
def layouts(draw):
    """The arguments of one vector's ``DeviceImage`` (sizes from small sets,
    so that different layouts often have files of one size)."""
    n_in = draw(st.integers(1, 3))
    inputs = []
    for k in range(n_in):
        d = dt.by_name(draw(st.sampled_from(DTYPES)))
        n = draw(st.sampled_from([1, 3, 8, 100, 1000]))
        raw = draw(st.binary(min_size=n * d.itemsize, max_size=n * d.itemsize))
        a = np.frombuffer(raw, np.uint8).copy()      # (its bytes are what the image holds)
        inputs.append(Input(f"x{k}", "tensor", d, a, a,
                            location=draw(st.sampled_from(["hbm", "sbuf"]))))
    checks = draw(st.booleans())
    cores = draw(st.sampled_from([1, 8]))
    second = None
    if checks and draw(st.booleans()):
        second = [Input(i.name, "tensor", i.dtype, np.frombuffer(draw(st.binary(
            min_size=i.array.nbytes, max_size=i.array.nbytes)), np.uint8).copy(), None,
            location=i.location) for i in inputs]
    out = dt.by_name(draw(st.sampled_from(DTYPES)))
    return dict(inputs=inputs, out_dtype=out, out_shape=(draw(st.sampled_from([1, 8, 100, 1000])),),
                num_cores=cores, checks=checks,
                scratch_size=abi.SCRATCH_CORE_SIZE if cores > 1 else abi.SCRATCH_SINGLE_SIZE,
                out_location=draw(st.sampled_from(["hbm", "sbuf"])), second_inputs=second)


def _made(layout, pool=None, nonce=7):
    """A laid-out image (as the session makes it: the control block too)."""
    image = DeviceImage(layout["inputs"], layout["out_dtype"], layout["out_shape"],
                        layout["num_cores"], layout["scratch_size"], layout["out_location"],
                        checks=layout["checks"], second_inputs=layout["second_inputs"], pool=pool)
    image.ctl.init(nonce, len(image.runs), image.num_cores, [list(r.order) for r in image.runs])
    return image


def _scribble(image, data):
    """What a vector's processes may leave: random bytes at random offsets
    of the whole file, the gaps included (written through the file, as a
    process of another address space writes)."""
    f = image.file
    for _ in range(data.draw(st.integers(1, 12))):
        at = data.draw(st.integers(0, f.size - 1))
        n = data.draw(st.integers(1, min(3 * 4096, f.size - at)))
        os.pwrite(f.fd, bytes([data.draw(st.integers(1, 255))]) * n, at)


@settings(max_examples=60)
@given(st.lists(layouts(), min_size=1, max_size=3),
       st.lists(st.integers(0, 2), min_size=2, max_size=6), st.data())
def test_a_kept_file_laid_out_again_holds_a_new_files_bytes(kinds, order, data):
    pool = ImagePool(most=2, max_bytes=1 << 40)
    given_back = set()
    reused = 0
    try:
        for i in order:
            layout = kinds[i % len(kinds)]
            image = _made(layout, pool)
            reused += id(image.file) in given_back
            fresh = _made(layout)
            try:
                _same_bytes(image.file, fresh.file)
            finally:
                fresh.close()
            _scribble(image, data)
            given_back.add(id(image.file))
            image.close(reuse=True)
    finally:
        pool.close()
    # (the same layout twice running: its file is the one given back)
    if any(a == b for a, b in zip(order, order[1:])) or len(kinds) == 1:
        assert reused


def test_reset_zeroes_all_but_the_kept_spans_to_the_byte():
    f = ImageFile(5 * 4096)
    try:
        os.pwrite(f.fd, b"\xAA" * f.size, 0)
        f.reset([(100, 50), (4096 + 7, 8190)])      # (spans cutting pages)
        want = np.zeros(f.size, np.uint8)
        want[100:150] = want[4103:4103 + 8190] = 0xAA
        assert (f.u8 == want).all()
        with pytest.raises(OSError, match="overlap or are not sorted"):
            f.reset([(200, 10), (100, 10)])
        assert f.fd is None         # (closed: not given back)
    finally:
        f.close()


def test_the_pool_keeps_at_most_its_number_of_small_files():
    pool = ImagePool(most=2, max_bytes=3 * 4096)
    files = [ImageFile(8 * 4096) for _ in range(3)]
    big = ImageFile(8 * 4096)
    os.pwrite(big.fd, b"\1" * (4 * 4096), 0)        # (its spans more memory than it keeps)
    for f, keep in zip(files + [big], ([], [(0, 4096)], [], [(0, 4 * 4096)])):
        pool.give(f, keep)
    assert [f.fd is None for f in files + [big]] == [True, False, False, True]
    assert pool.take(8 * 4096, []) is files[2]      # (the file taken with the same spans)
    assert pool.take(8 * 4096, [(0, 4096)]) is files[1]
    others = [pool.take(8 * 4096, []), pool.take(9 * 4096, [(0, 4096)])]
    assert not set(map(id, others)) & set(map(id, files))
    for f in [files[1], files[2]] + others:
        f.close()
    pool.close()


def test_an_image_of_no_pool_closes_its_file():
    x = np.arange(8, dtype=np.float32)
    image = DeviceImage([Input("x", "tensor", dt.by_name("float32"), x, x)],
                        dt.by_name("float32"), (8,), 1, abi.SCRATCH_SINGLE_SIZE)
    f = image.file
    image.close(reuse=True)
    image.close()
    assert f.fd is None


def test_a_file_given_back_holds_no_page_but_its_spans():
    # (the pages a vector's processes made are charged to the sandbox's
    # memory cgroup: held until a later vector took the file, they counted
    # against the next vectors' memory limit)
    pool = ImagePool(most=2, max_bytes=1 << 30)
    f = ImageFile(8 * 4096)
    try:
        os.pwrite(f.fd, b"\1" * f.size, 0)          # (a vector's processes wrote it all)
        pool.give(f, [(4096, 4096)])
        assert (f.fd is not None, _extents(f)) == (True, [(4096, 2 * 4096)])
        assert pool.take(8 * 4096, [(4096, 4096)]) is f
    finally:
        pool.close()
        f.close()
