/*
 * output_reads.cpp -- the check that a kernel reads no output element
 * before it writes it (GPSIMD_CHECK_READS, runtime.h): the output region's
 * read map, set up at each launch (setup_read_tracking), marked by the
 * reads and writes the runtime sees (note_output_read, note_output_write)
 * and flagged where it cannot see them (note_output_untracked).
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <string.h>

#include "runtime.h"

namespace gpsimd_rt {

void setup_read_tracking() {
    CoreState& c = core();
    c.out_host = nullptr;
    c.out_size = 0;
    c.out_itemsize = 0;
    c.read_map = nullptr;
    c.writing_back = false;
    /* (the output's bounds in every run, for note_output_untracked: the
     * shared runs, which keep no read map, flag a raw pointer too) */
    for (uint32_t i = 0; i < c.binding.num_regions && i < GPSIMD_MAX_REGIONS && !c.out_host; ++i) {
        const gpsimd_region& r = c.binding.regions[i];
        if (r.flags & GPSIMD_REGION_OUTPUT) {
            c.out_host = reinterpret_cast<const unsigned char*>(static_cast<uintptr_t>(r.host));
            c.out_size = r.size;
        }
    }
    if (!c.out_host || !check_enabled(GPSIMD_CHECK_READS) || !c.binding.read_map_host ||
        !c.binding.out_itemsize) return;
    c.out_itemsize = c.binding.out_itemsize;
    c.read_map = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(c.binding.read_map_host));
}

void note_output_read(const void* host, uint64_t nbytes) {
    CoreState& c = core();
    if (!c.out_host || !nbytes) return;
    const unsigned char* p = static_cast<const unsigned char*>(host);
    const unsigned char* lo = c.out_host;
    const unsigned char* hi = c.out_host + c.out_size;
    if (p >= hi || p + nbytes <= lo) return;
    if (!c.read_map) {          /* (a shared run: a read no map follows) */
        report_flag(GPSIMD_REPORT_OUTPUT_UNTRACKED);
        return;
    }
    const uint64_t es = c.out_itemsize;
    const uint64_t a = uint64_t((p > lo ? p : lo) - lo) / es;
    const uint64_t end = uint64_t((p + nbytes < hi ? p + nbytes : hi) - lo);
    const uint64_t b = (end + es - 1) / es;
    const unsigned char poison = c.binding.poison;
    bool any = false;
    for (uint64_t e = a; e < b && (e + 1) * es <= c.out_size; ++e) {
        const unsigned char* q = lo + e * es;
        bool unwritten = true;
        for (uint64_t j = 0; j < es; ++j)
            if (q[j] != poison) { unwritten = false; break; }
        if (unwritten) {
            c.read_map[e >> 3] = uint8_t(c.read_map[e >> 3] | (1u << (e & 7)));
            any = true;
        }
    }
    if (any) report_flag(GPSIMD_REPORT_OUTPUT_READ);
}

/* Does some element of [s, s + nbytes) hold the poison in every byte?
 * (a loop the compiler vectorises for the usual element sizes) */
template <typename W>
static bool holds_poison_word(const unsigned char* s, uint64_t n, unsigned char poison) {
    W pw;
    memset(&pw, poison, sizeof pw);
    unsigned hits = 0;
    for (uint64_t i = 0; i < n; ++i) {
        W w;
        memcpy(&w, s + i * sizeof(W), sizeof(W));
        hits |= unsigned(w == pw);
    }
    return hits != 0;
}

static bool holds_poison_element(const unsigned char* s, uint64_t nbytes, uint64_t es,
                                 unsigned char poison) {
    switch (es) {
    case 1: return memchr(s, poison, nbytes) != nullptr;
    case 2: return holds_poison_word<uint16_t>(s, nbytes / 2, poison);
    case 4: return holds_poison_word<uint32_t>(s, nbytes / 4, poison);
    case 8: return holds_poison_word<uint64_t>(s, nbytes / 8, poison);
    default: return true;
    }
}

void note_output_write(const void* host, const void* src, uint64_t nbytes) {
    CoreState& c = core();
    if (!c.read_map || !nbytes || c.writing_back) return;
    const unsigned char* p = static_cast<const unsigned char*>(host);
    const unsigned char* lo = c.out_host;
    const unsigned char* hi = c.out_host + c.out_size;
    const uint64_t es = c.out_itemsize;
    if (p < lo || p + nbytes > hi || uint64_t(p - lo) % es || nbytes % es) return;
    const unsigned char* s = static_cast<const unsigned char*>(src);
    const unsigned char poison = c.binding.poison;
    if (!holds_poison_element(s, nbytes, es, poison)) return;   /* (the usual case) */
    const uint64_t first = uint64_t(p - lo) / es;
    bool any = false;
    for (uint64_t i = 0; i < nbytes / es; ++i) {
        if (s[i * es] != poison) continue;           /* (the usual case: one compare) */
        bool both = true;
        for (uint64_t j = 0; j < es && both; ++j)
            both = s[i * es + j] == poison && p[i * es + j] == poison;
        if (both) {
            const uint64_t e = first + i;
            c.read_map[e >> 3] = uint8_t(c.read_map[e >> 3] | (1u << (e & 7)));
            any = true;
        }
    }
    if (any) report_flag(GPSIMD_REPORT_OUTPUT_READ);
}

/* The output's end counts: a kernel may step back from it. A read in a run
 * without a read map (the shared ones) is flagged the same way
 * (note_output_read): the run with every other core's part written
 * (leader.c based_launch) runs again every core flagged in any run. */
void note_output_untracked(const void* host) {
    const CoreState& c = core();
    const unsigned char* p = static_cast<const unsigned char*>(host);
    if (c.out_host && p >= c.out_host && p <= c.out_host + c.out_size)
        report_flag(GPSIMD_REPORT_OUTPUT_UNTRACKED);
}

}  // namespace gpsimd_rt
