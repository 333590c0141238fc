// For test kernels that reach into the model: the control block
// (gz_control of gpsimd_host/zygote.h, the first page of the vector's
// image) found from an address inside the image. Used by
// tests/native/fake_core.cpp and the kernels of test_emu_forgery.py.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "gpsimd_host/zygote.h"

// the start of the image's mapping that holds addr (file offset 0 of the
// memfd), read from /proc/self/maps: a walk back page by page would read
// the 1 GiB gap after each run's outputs (gpsimd_emu.memory.OUTPUT_GAP_BYTES),
// a page allocated for each; 0 when not found
static uintptr_t image_start(uintptr_t addr) {
    FILE* f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t best = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off) == 3 && off == 0 && lo <= addr
                && lo > best && strstr(line, "gpsimd-image"))
            best = lo;
    }
    if (f) fclose(f);
    return best;
}
// the page holding the magic at or before addr (the image's start when
// found; the model's gaps on the way, PROT_NONE, made readable)
static gz_control* control_block_at(uintptr_t addr) {
    uintptr_t p = addr;
    if (uintptr_t start = image_start(p)) p = start;
    for (p &= ~(uintptr_t)4095; ; p -= 4096) {
        mprotect((void*)p, 4096, PROT_READ | PROT_WRITE);
        if (memcmp((void*)p, GPSIMD_ZY_CB_MAGIC, 8) == 0) return (gz_control*)p;
    }
}
