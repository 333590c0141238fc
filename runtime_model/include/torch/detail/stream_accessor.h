/*
 * torch/detail/stream_accessor.h -- the stream accessors of at::Tensor
 * (docs/kernel-api.md "Accessors and memory"); included by
 * torch/detail/tensor.h in namespace c10, after TensorImpl and ImplRef.
 */
#ifndef GPSIMD_TORCH_DETAIL_STREAM_ACCESSOR_H
#define GPSIMD_TORCH_DETAIL_STREAM_ACCESSOR_H

#ifndef GPSIMD_TORCH_DETAIL_TENSOR_H
#error "include <torch/torch.h>"
#endif

namespace c10 {
namespace detail {

/* Stream accessors (docs/kernel-api.md "Accessors and memory"): sequential access,
 * one element at a time, each active stream holding 4 KiB of the TCM pool
 * (when the pool is full the stream still works: on the device it is then
 * just slow).  Reading or writing past the end is a GPSIMD_FAULT_OUT_OF_RANGE
 * fault, use after close() a GPSIMD_FAULT_BAD_ARGUMENT fault.
 *
 * A write stream buffers as the device's does: its writes collect in its
 * 4 KiB buffer (the TCM block stream_open gave, or one of the runtime's when
 * the pool is full) and reach the tensor's memory when the buffer is full,
 * on close() and on destruction, not before.  Whatever reads the tensor
 * while the stream is open reads memory without the unflushed writes. */
constexpr size_t kStreamBufferBytes = 4096;   /* = GPSIMD_STREAM_TCM_BYTES (checked in tensor.cpp) */

template <typename T, bool Write>
class StreamAccessor {
 public:
    StreamAccessor(TensorImpl* p, const char* kind)
        : ref_(p), pos_(0), open_(true), tcm_(stream_open(p, Write, kind, ElementType<T>::name())),
          buf_(Write ? static_cast<T*>(stream_buffer(tcm_)) : nullptr), pending_(0) {}
    StreamAccessor(StreamAccessor&& o) noexcept
        : ref_(std::move(o.ref_)), pos_(o.pos_), open_(o.open_), tcm_(o.tcm_), buf_(o.buf_), pending_(o.pending_) {
        o.open_ = false; o.tcm_ = nullptr; o.buf_ = nullptr; o.pending_ = 0;
    }
    StreamAccessor(const StreamAccessor&) = delete;
    StreamAccessor& operator=(const StreamAccessor&) = delete;
    ~StreamAccessor() { close(); }
    /* A write stream flushes its buffer on close. */
    void close() {
        if (open_) {
            flush();
            stream_close(ref_.get(), Write, tcm_, buf_);
        }
        tcm_ = nullptr;
        buf_ = nullptr;
        open_ = false;
    }
 protected:
    T* slot(const char* kind) {
        if (!open_) fault_stream_closed(kind, ElementType<T>::name());
        TensorImpl* p = ref_.get();
        if (pos_ >= p->numel) fault_out_of_range(kind, ElementType<T>::name(), 0, pos_, 1, p->numel);
        return static_cast<T*>(p->data) + pos_++;
    }
    void put(const char* kind, const T& v) {
        if (!open_) fault_stream_closed(kind, ElementType<T>::name());
        TensorImpl* p = ref_.get();
        if (pos_ >= p->numel) fault_out_of_range(kind, ElementType<T>::name(), 0, pos_, 1, p->numel);
        buf_[pending_++] = v;
        ++pos_;
        if (pending_ == int64_t(kStreamBufferBytes / sizeof(T))) flush();
    }
 private:
    void flush() {
        if (pending_) stream_flush(ref_.get(), buf_, pos_ - pending_, pending_);
        pending_ = 0;
    }
    ImplRef ref_;
    int64_t pos_;
    bool open_;
    void* tcm_;
    T* buf_;           /* a write stream's buffer: elements [pos_ - pending_, pos_) */
    int64_t pending_;
};
}  // namespace detail

template <typename T>
class ReadStreamAccessor : public detail::StreamAccessor<T, false> {
 public:
    explicit ReadStreamAccessor(TensorImpl* p) : detail::StreamAccessor<T, false>(p, "read_stream_accessor") {}
    ReadStreamAccessor(ReadStreamAccessor&&) = default;
    /* The next element. */
    T read() { return *this->slot("read_stream_accessor"); }
};

template <typename T>
class WriteStreamAccessor : public detail::StreamAccessor<T, true> {
 public:
    explicit WriteStreamAccessor(TensorImpl* p) : detail::StreamAccessor<T, true>(p, "write_stream_accessor") {}
    WriteStreamAccessor(WriteStreamAccessor&&) = default;
    /* Store v as the next element (in the stream's buffer until it flushes). */
    void write(const T& v) { this->put("write_stream_accessor", v); }
};

}  // namespace c10

#endif  // GPSIMD_TORCH_DETAIL_STREAM_ACCESSOR_H
