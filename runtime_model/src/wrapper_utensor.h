/*
 * wrapper_utensor.h -- UTensor: one tensor descriptor of the argument stream
 * (or the output descriptor), wrapped, with the conversions the marshalling
 * entries apply to it and the ISA dtype -> ScalarType table.  Included by
 * wrapper_api.cpp alone (its definitions have internal linkage).
 */
#ifndef GPSIMD_RT_WRAPPER_UTENSOR_H
#define GPSIMD_RT_WRAPPER_UTENSOR_H

#if !defined(GPSIMD_RUNTIME_INTERNAL) || !defined(GPSIMD_NO_ARG_POSITION_TAGS)
#error "wrapper_utensor.h is wrapper_api.cpp's: it needs that file's two definitions first"
#endif

#include <stdio.h>
#include <string.h>

#include "custom_op.h"
#include "gpsimd_host/dtypes.h"
#include "neuron/wrapper_api.h"
#include "runtime.h"
#include "tensor_impl.h"

namespace gpsimd_rt {

using c10::ScalarType;

/* ---- ISA dtype -> ScalarType ("isa_to_torch_dtype", internal linkage) -----
 * FP32R (11) has no torch type: the spec's ISA enum keeps it distinct from
 * FP32 (10), docs/kernel-api.md lists no such creatable dtype, and the spec gives
 * no table row or bit layout for it, so a descriptor carrying it fails with
 * the table's default-case trap, "Unknown ScalarType", like INVALID (0). */
static const char* isa_dtype_name(uint8_t d) {
    switch (d) {
#define GPSIMD_ISA_NAME_(name, value) case value: return #name;
        GPSIMD_ISA_DTYPES(GPSIMD_ISA_NAME_)
#undef GPSIMD_ISA_NAME_
    default: return "out of range";
    }
}

/* The torch name of an ISA dtype ("float32"), or null when it has none
 * (the rows of gpsimd_host/dtypes.h). */
static const char* torch_name(uint8_t d) {
    switch (d) {
#define GPSIMD_TORCH_NAME_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol) \
    case NEURON_ISA_TPB_DTYPE_##isa: return #name;
        GPSIMD_DTYPES(GPSIMD_TORCH_NAME_)
#undef GPSIMD_TORCH_NAME_
    default: return nullptr;
    }
}

static ScalarType isa_to_torch_dtype(uint8_t d, const char* context) {
    switch (d) {
#define GPSIMD_ISA_TO_TORCH_(name, isa, st, c10v, ctype, bytes, kind, fmax, rtol, atol) \
    case NEURON_ISA_TPB_DTYPE_##isa: return ScalarType::st;
        GPSIMD_DTYPES(GPSIMD_ISA_TO_TORCH_)
#undef GPSIMD_ISA_TO_TORCH_
    default:
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "Unknown ScalarType (ISA dtype %u %s, %s)", unsigned(d),
                     isa_dtype_name(d), context);
    }
}

/* ---- UTensor: one descriptor, wrapped ------------------------------------ */

class UTensor {
 public:
    /* index < 0: the output descriptor. */
    UTensor(const arg_tensor_t* desc, int index, uint32_t count) : d_(*desc), index_(index), count_(count) {
        if (index_ < 0)
            snprintf(ctx_, sizeof ctx_, "the output descriptor");
        else
            snprintf(ctx_, sizeof ctx_, "argument index %d of %u", index_, count_);
    }
    const char* context() const { return ctx_; }

    /* abi.h storage union: HBM arm (addr +24 u64, num_elem +32) or SBUF arm
     * (addr +24 u32 offset in the SBUF window, num_elem +28).  SBUF adds the
     * _sbuf_window base (binding.sbuf_window_base). */
    uint64_t base() const {
        switch (d_.location) {
        case NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM: return d_.storage.hbm.addr;
        case NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_SBUF:
            return core().binding.sbuf_window_base + d_.storage.tpb.addr;
        default:
            gpsimd_fault(GPSIMD_FAULT_DESCRIPTOR, "%s: location %u is neither SBUF (1) nor HBM (2)", ctx_,
                         unsigned(d_.location));
        }
    }
    uint32_t num_elem() const {
        base();  /* validates the location */
        return d_.location == NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM ? d_.storage.hbm.num_elem
                                                                          : d_.storage.tpb.num_elem;
    }
    ScalarType dtype() const { return isa_to_torch_dtype(d_.dtype, ctx_); }

    /* abi.h shape union: inline 8D (u16 dims), inline 4D (u32 dims), or an
     * out-of-line array of int64 dims in HBM; returns the rank. */
    int shape(int64_t* sizes) const {
        int nd = 0;
        switch (d_.framework_shape_type) {
        case NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE8D:
            while (nd < 8 && d_.framework_shape.dims8[nd]) { sizes[nd] = d_.framework_shape.dims8[nd]; ++nd; }
            return nd;
        case NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE4D:
            while (nd < 4 && d_.framework_shape.dims4[nd]) { sizes[nd] = d_.framework_shape.dims4[nd]; ++nd; }
            return nd;
        case NEURON_ISA_TPB_CUSTOM_OP_OUT_OF_LINE_SHAPE: {
            const uint32_t n = d_.framework_shape.out_of_line.ndim;
            if (n > c10::kMaxTensorDims)
                gpsimd_fault(GPSIMD_FAULT_DESCRIPTOR, "%s: out-of-line shape of %u dimensions (at most %zu)", ctx_, n,
                             c10::kMaxTensorDims);
            const void* dims = translate_range(d_.framework_shape.out_of_line.addr, uint64_t(n) * 8, ctx_);
            memcpy(sizes, dims, size_t(n) * 8);
            for (uint32_t i = 0; i < n; ++i)
                if (sizes[i] < 0)
                    gpsimd_fault(GPSIMD_FAULT_DESCRIPTOR, "%s: out-of-line dimension %u is negative (%lld)", ctx_, i,
                                 (long long)sizes[i]);
            return int(n);
        }
        default:
            gpsimd_fault(GPSIMD_FAULT_DESCRIPTOR, "%s: framework_shape_type %u is not INLINE_SHAPE8D (0), "
                         "OUT_OF_LINE_SHAPE (1) or INLINE_SHAPE4D (2)", ctx_, unsigned(d_.framework_shape_type));
        }
    }

    /* UTensor::operator at::Tensor(): a non-owning tensor (delete_nothing)
     * over the descriptor's storage, sized contiguously. */
    at::Tensor to_tensor() const {
        const ScalarType t = dtype();
        int64_t sizes[c10::kMaxTensorDims];
        const int nd = shape(sizes);
        int64_t prod = 1;
        for (int i = 0; i < nd; ++i) prod *= sizes[i];
        const uint32_t n = num_elem();
        if (prod != int64_t(n)) {
            char buf[160];
            size_t k = size_t(snprintf(buf, sizeof buf, "["));
            for (int i = 0; i < nd; ++i) k += size_t(snprintf(buf + k, sizeof buf - k, i ? ", %lld" : "%lld", (long long)sizes[i]));
            snprintf(buf + k, sizeof buf - k, "]");
            gpsimd_fault(GPSIMD_FAULT_DESCRIPTOR, "%s: shape %s has %lld elements but num_elem is %u", ctx_, buf,
                         (long long)prod, n);
        }
        const uint64_t addr = base();
        void* ctx = neuron_translate_ctx();
        (void)ctx;
        void* host = translate_range(addr, uint64_t(n) * c10::elementSize(t), ctx_);
        return make_borrowed_tensor(t, sizes, nd, host, addr);
    }

    /* UTensor::operator c10::Scalar(): exactly one element, boxed with
     * its dtype tag (utypes.hpp:172 HBM arm / :178 SBUF arm, host-model
     * attribution of the two recovered guard lines). */
    c10::Scalar to_scalar() const {
        const uint32_t n = num_elem();
        const int line = d_.location == NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM ? 172 : 178;
        if (n > 1)
            gpsimd_fault(GPSIMD_FAULT_SCALAR,
                         "utypes.hpp:%d: Cannot create an at::Scalar. Argument has more than 1 element (%s has %u elements)",
                         line, ctx_, n);
        if (n == 0)
            gpsimd_fault(GPSIMD_FAULT_SCALAR, "Cannot create an at::Scalar. Argument has no element (%s)", ctx_);
        const ScalarType t = dtype();
        const void* p = translate_range(base(), c10::elementSize(t), ctx_);
        if (c10::isFloatingType(t)) return c10::Scalar(load_double(t, p, 0));
        return c10::Scalar(load_int(t, p, 0));
    }

    /* customop_next_int/longlong/float: the first element's bytes read as
     * T through neuron_translate.  The device makes no dtype check ("a wrong
     * choice silently reinterprets bytes"); under GPSIMD_CHECK_ARG_DTYPE the
     * host model faults (DTYPE) when the descriptor dtype is not `want`
     * (int: INT32, long long: INT64, float: FP32), naming the entry, the
     * argument, the descriptor dtype and the C type asked for. */
    template <typename T>
    T read_raw(const char* entry, uint8_t want, const char* ctype) const {
        if (d_.dtype != want && check_enabled(GPSIMD_CHECK_ARG_DTYPE))
            gpsimd_fault(GPSIMD_FAULT_DTYPE,
                         "%s reads %s as %s (%s), but its descriptor dtype is %s%s%s%s: the device would "
                         "reinterpret the bytes silently (docs/checks.md)",
                         entry, ctx_, ctype, isa_dtype_name(want), isa_dtype_name(d_.dtype),
                         torch_name(d_.dtype) ? " (" : "", torch_name(d_.dtype) ? torch_name(d_.dtype) : "",
                         torch_name(d_.dtype) ? ")" : "");
        void* ctx = neuron_translate_ctx();
        const uint64_t addr = base();
        /* the whole word must be mapped; checked first so that a fault names
         * the argument, not just the address */
        translate_range(addr, sizeof(T), ctx_);
        void* win = neuron_translate(ctx, addr);
        T v;
        memcpy(&v, win, sizeof v);
        return v;
    }

    /* The runtime copies a result by element count: a returned tensor of
     * another shape (the public examples return 1-D tensors for inputs of
     * any rank) is copied as it is, so this is a warning, not a fault. */
    GPSIMD_HOST_ONLY void warn_if_other_shape(const at::Tensor& src) const {
        int64_t want[c10::kMaxTensorDims];
        const int nd = shape(want);
        const int64_t got_nd = src.dim();
        bool same = got_nd == nd;
        for (int d = 0; same && d < nd; ++d) same = src.sizes()[size_t(d)] == want[d];
        if (same) return;
        char got_text[160], want_text[160];
        shape_text(src.sizes().data(), int(got_nd), got_text, sizeof got_text);
        shape_text(want, nd, want_text, sizeof want_text);
        record_warning("the kernel returned a tensor of shape %s for an output descriptor of shape %s "
                       "(same %u elements: the runtime copies by element count)",
                       got_text, want_text, num_elem());
    }

    static void shape_text(const int64_t* sizes, int nd, char* out, size_t cap) {
        size_t used = size_t(snprintf(out, cap, "["));
        for (int d = 0; d < nd && used < cap; ++d)
            used += size_t(snprintf(out + used, cap - used, d ? ", %lld" : "%lld", (long long)sizes[d]));
        if (used < cap) snprintf(out + used, cap - used, "]");
    }

    /* UTensor::copy: the dtype gate, the element count, then the
     * staged writeback HBM -> dataram -> HBM, chunked to the free dataram. */
    void copy(const at::Tensor& src) const {
        const ScalarType want = dtype();
        if (src.scalar_type() != want)
            gpsimd_fault(GPSIMD_FAULT_DTYPE,
                         "utypes.hpp:65: assertion 'aten_t.dtype().toScalarType() == isa_to_torch_dtype(t_.dtype)' "
                         "failed (result tensor is %s, %s is %s)",
                         c10::dtype_name(src.scalar_type()), ctx_, c10::dtype_name(want));
        const uint32_t n = num_elem();
        if (src.numel() != int64_t(n)) {
            report_flag(GPSIMD_REPORT_OUTPUT_SIZE);
            gpsimd_fault(GPSIMD_FAULT_SHAPE, "UTensor::copy: the result tensor has %lld elements, %s has %u",
                         (long long)src.numel(), ctx_, n);
        }
        warn_if_other_shape(src);
        const size_t es = c10::elementSize(want);
        const uint64_t total = uint64_t(n) * es;
        if (!total) return;
        const uint64_t src_hbm = src.unsafeGetTensorImpl()->device_addr;
        const uint64_t dst_hbm = base();
        translate_range(dst_hbm, total, ctx_);

        uint32_t free_bytes = 0;
        neuron_dataram_max_free_space(&free_bytes, 64);
        uint64_t chunk = free_bytes / es * es;
        if (chunk > total) chunk = total;
        if (!chunk)
            gpsimd_fault(GPSIMD_FAULT_DATARAM,
                         "UTensor::copy: no dataram for the staging buffer: the kernel holds %llu of the %u bytes "
                         "of dataram staging in %zu block(s) (largest free block %u bytes, an element is %zu; "
                         "docs/checks.md)",
                         (unsigned long long)core().dataram.used(), GPSIMD_DATARAM_SIZE - GPSIMD_TCM_POOL_SIZE,
                         core().dataram.live_blocks(), free_bytes, es);
        void* stage = nullptr;
        if (dataram_allocate(uint32_t(chunk), &stage, 64) != 0)
            gpsimd_fault(GPSIMD_FAULT_DATARAM, "UTensor::copy: neuron_dataram_allocate(%llu) failed",
                         (unsigned long long)chunk);
        void* ctx = neuron_translate_ctx();
        (void)ctx;
        core().writing_back = true;
        for (uint64_t off = 0; off < total; off += chunk) {
            const uint64_t len = total - off < chunk ? total - off : chunk;
            neuron_memcpy(stage, src_hbm + off, size_t(len));   /* HBM -> dataram */
            neuron_memcpy(dst_hbm + off, stage, size_t(len));   /* dataram -> HBM */
        }
        core().writing_back = false;
        neuron_dataram_deallocate(stage);
    }

 private:
    arg_tensor_t d_;
    int index_;
    uint32_t count_;
    char ctx_[64];
};

}  // namespace gpsimd_rt

#endif  // GPSIMD_RT_WRAPPER_UTENSOR_H
