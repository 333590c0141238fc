/*
 * streams.cpp -- the stream accessors' runtime side (docs/kernel-api.md
 * "Accessors and memory"): the TCM block and the buffer of each stream, the
 * write stream's flush, and the coherence policy of a tensor with an open
 * write stream.
 *
 * The device's write stream collects its writes in a 4 KiB buffer and
 * writes them to the tensor's memory when the buffer is full, on close()
 * and on destruction.  Until then, anything else that reads the tensor (a
 * standard accessor, a read stream, tensor_to_tcm, an element-wise op)
 * reads memory without them: the model does the same under every policy
 * (a kernel that depends on unflushed writes FAILs by its output), and,
 * under its checks (GPSIMD_CHECK_COHERENCE), reports the access itself
 * (not an element-wise op's: its output shows it): a COHERENCE fault
 * under COHERENT, a warning under INCOHERENT_VERBOSE.  A read stream's
 * own buffer is not modelled: a write to its tensor while it is open is
 * neither reported nor hidden from it (docs/kernel-api.md).
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "custom_op.h"
#include "runtime.h"
#include "tensor_impl.h"

static_assert(c10::detail::kStreamBufferBytes == GPSIMD_STREAM_TCM_BYTES,
              "torch/detail/tensor.h differs from gpsimd_host/abi.h");

using namespace gpsimd_rt;
using c10::AccessorCoherencePolicy;
using c10::TensorImpl;

static const char* policy_name(AccessorCoherencePolicy p) {
    switch (p) {
    case c10::COHERENT: return "COHERENT";
    case c10::INCOHERENT_VERBOSE: return "INCOHERENT_VERBOSE";
    case c10::INCOHERENT_QUIET: return "INCOHERENT_QUIET";
    }
    return "unknown";
}

/* The coherence policy's verdict on `what` (already worded) under impl's
 * policy: a fault, a warning or nothing. */
static void coherence_verdict(const TensorImpl* impl, const char* what) {
    if (impl->coherence == c10::COHERENT)
        gpsimd_fault(GPSIMD_FAULT_COHERENCE,
                     "%s (coherence policy COHERENT: many read streams or one write stream per tensor at a time, "
                     "and no other access while a write stream is open)", what);
    if (impl->coherence == c10::INCOHERENT_VERBOSE)
        record_warning("%s (coherence policy %s)", what, policy_name(impl->coherence));
}

namespace gpsimd_rt {

void check_open_write_stream(const TensorImpl* impl, const char* what) {
    if (impl->numel <= 0 || !check_enabled(GPSIMD_CHECK_COHERENCE)) return;
    CoreState& c = core();
    std::map<const void*, std::pair<int, int> >::const_iterator it = c.streams.find(impl->data);
    if (it == c.streams.end() || it->second.second <= 0) return;
    const int writers = it->second.second;
    char text[256];
    snprintf(text, sizeof text, "%s on a tensor with %d write_stream_accessor%s open (its unflushed writes "
             "are not in memory yet: close() the stream first)", what, writers, writers > 1 ? "s" : "");
    coherence_verdict(impl, text);
}

}  // namespace gpsimd_rt

namespace c10 {
namespace detail {

/* docs/kernel-api.md "Accessors and memory": safe use is many read streams, or one
 * write stream, per tensor at a time.  Opening a stream that breaks this is
 * a COHERENCE fault under COHERENT (the default), a warning under
 * INCOHERENT_VERBOSE, nothing under INCOHERENT_QUIET.  Open streams are
 * counted per storage, so two handles of one tensor count together. */
void* stream_open(const TensorImpl* impl, bool write, const char* kind, const char* type_name) {
    CoreState& c = core();
    /* a tensor without elements has no storage to race on (and no address) */
    if (impl->numel > 0 && check_enabled(GPSIMD_CHECK_COHERENCE)) {
        std::pair<int, int>& open = c.streams[impl->data];
        const int readers = open.first, writers = open.second;
        if (writers > 0 || (write && readers > 0)) {
            char what[224];
            if (writers > 0)
                snprintf(what, sizeof what, "%s<%s> opened on a tensor with %d write_stream_accessor%s already open",
                         kind, type_name, writers, writers > 1 ? "s" : "");
            else
                snprintf(what, sizeof what, "%s<%s> opened on a tensor with %d read_stream_accessor%s already open",
                         kind, type_name, readers, readers > 1 ? "s" : "");
            coherence_verdict(impl, what);
        }
        if (write) open.second += 1;
        else open.first += 1;
    }
    return tcm_allocate(GPSIMD_STREAM_TCM_BYTES, false);
}

/* A write stream's buffer: its TCM block, or (the pool full: on the device
 * the stream is then slow, not lost) a block of the runtime's. */
void* stream_buffer(void* tcm_block) {
    if (tcm_block) return tcm_block;
    void* p = malloc(GPSIMD_STREAM_TCM_BYTES);
    if (!p) gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "write_stream_accessor: out of host memory for its buffer");
    return p;
}

/* Elements [first, first + count) of the tensor reach memory. */
void stream_flush(const TensorImpl* impl, const void* buf, int64_t first, int64_t count) {
    if (count <= 0 || !impl->data) return;
    const size_t es = elementSize(impl->dtype);
    memcpy(static_cast<char*>(impl->data) + size_t(first) * es, buf, size_t(count) * es);
}

void stream_close(const TensorImpl* impl, bool write, void* tcm_block, void* buf) {
    CoreState& c = core();
    std::map<const void*, std::pair<int, int> >::iterator it = c.streams.find(impl->data);
    if (impl->numel > 0 && it != c.streams.end()) {
        int& n = write ? it->second.second : it->second.first;
        if (n > 0) --n;
        if (!it->second.first && !it->second.second) c.streams.erase(it);
    }
    if (buf && buf != tcm_block) free(buf);
    if (tcm_block) torch::neuron::tcm_free(tcm_block);
}

void fault_stream_closed(const char* kind, const char* type_name) {
    gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "%s<%s> used after close()", kind, type_name);
}

}  // namespace detail
}  // namespace c10
