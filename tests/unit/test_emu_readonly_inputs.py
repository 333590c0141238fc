"""The inputs of a multicore op are read-only pages in its checked launches
(runtime_model/src/stack_switch.cpp mprotects each binding region flagged
REGION_READONLY, whole pages from its start, and skips one that does not
start on a page): every run's input arenas must start on a page and be
flagged, the output not."""
import ctypes

import numpy as np

from gpsimd_emu import abi
from gpsimd_emu import dtypes as dt
from gpsimd_emu.image import PAGE, DeviceImage
from gpsimd_emu.vectors import Input


def test_every_run_s_input_arenas_start_on_a_page_and_are_read_only():
    x = np.arange(1000, dtype=np.float32)
    inputs = [Input("x", "tensor", dt.by_name("float32"), x, x),
              Input("y", "tensor", dt.by_name("float32"), x[:7].copy(), x[:7].copy(), "sbuf")]
    image = DeviceImage(inputs, dt.by_name("float32"), (1000,), 8, abi.SCRATCH_CORE_SIZE)
    try:
        for r in image.runs:
            for arena in image.arenas[r.index]:
                assert arena.file_offset % PAGE == 0, (r.index, arena.file_offset)
        b = abi.GpsimdCoreBinding.from_buffer_copy(
            bytes(image.file.mm[image._bindings_at:image._bindings_at
                                + ctypes.sizeof(abi.GpsimdCoreBinding)]))
        flags = [b.regions[i].flags for i in range(b.num_regions)]
        assert flags == [abi.REGION_READONLY, abi.REGION_READONLY, abi.REGION_OUTPUT]
        assert all(b.regions[i].host % PAGE == 0 for i in range(2))
    finally:
        image.close()
