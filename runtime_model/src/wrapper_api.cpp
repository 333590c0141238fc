/*
 * wrapper_api.cpp -- the customop_* marshalling entries and get_dst_tensor
 * (ARCHITECTURE.md "The device's marshalling"; libneuroncustomop.a(wrapper_api.o)
 * on the device).
 *
 * The three file-local globals: the ArgParser (one cursor over the
 * argument stream of abi.h), the get_dst_tensor_called flag, and retval (a
 * POINTER to the 48-byte output descriptor).  Every argument is read by the
 * one templated reader next_ucode_arg; what differs per entry is the
 * conversion applied to the UTensor it returns (wrapper_utensor.h).
 *
 * Assertion texts of the shipped library are kept verbatim with their
 * file:line, followed by the op-independent context the host has:
 *   "<file>:<line>: assertion '<expr>' failed (<context>)".
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <stdio.h>
#include <string.h>

#include <atomic>

#define GPSIMD_NO_ARG_POSITION_TAGS 1
#include "custom_op.h"
#include "gpsimd_host/dtypes.h"
#include "neuron/wrapper_api.h"
#include "runtime.h"
#include "tensor_impl.h"

#include "wrapper_utensor.h"

namespace gpsimd_rt {

/* ---- ArgParser ----------------------------------------------------------- */

class ArgParser {
 public:
    static const uint32_t max_args_ = GPSIMD_MAX_ARGS;

    void reset() { stream_ = nullptr; num_ = 0; curr_arg_ = 0; base_tag_ = 0; tagged_ = false; }

    /* Host model (neuron/wrapper_api.h "Argument positions"): the tag of the
     * customop_setup of the running wrapper. */
    void set_base_tag(unsigned tag) { base_tag_ = tag; tagged_ = true; }

    /* Position the cursor on the argument whose textual tag is `tag`. */
    void seek_tag(unsigned tag, const char* entry) {
        if (!tagged_ || tag <= base_tag_)
            gpsimd_fault(GPSIMD_FAULT_ARG_STREAM, "%s: argument tag %u without a preceding customop_setup", entry, tag);
        curr_arg_ = tag - base_tag_ - 1;
    }

    /* Bind to an argument stream (abi.h layout); the extractor admits the
     * arguments one by one under arg_extractor.hpp:16. */
    void init(const uint8_t* stream) {
        reset();
        if (!stream) gpsimd_fault(GPSIMD_FAULT_BINDING, "customop_setup: the binding has no argument stream");
        gpsimd_arg_stream_header h;
        memcpy(&h, stream, sizeof h);
        for (uint32_t num_args = 0; num_args < h.num_args; ++num_args) {
            if (!(num_args < max_args_))
                gpsimd_fault(GPSIMD_FAULT_ARG_STREAM,
                             "arg_extractor.hpp:16: assertion 'num_args < max_args_' failed "
                             "(the argument stream declares %u arguments, at most %u fit)",
                             h.num_args, max_args_);
        }
        stream_ = stream;
        num_ = h.num_args;
    }

    /* next_ucode_arg<UTensor>(): the cursor protocol with its two guards. */
    UTensor next_ucode_arg(const char* entry) {
        if (!stream_)
            gpsimd_fault(GPSIMD_FAULT_ARG_STREAM, "%s: called before customop_setup", entry);
        if (!(curr_arg_ < num_))
            gpsimd_fault(GPSIMD_FAULT_ARG_STREAM,
                         "arg_parser.hpp:66: assertion 'curr_arg_ < isa_args.get_num()' failed "
                         "(%s reads argument index %u, the stream has %u argument(s))",
                         entry, curr_arg_, num_);
        const uint8_t type = stream_[offsetof(gpsimd_arg_stream_header, types) + curr_arg_];
        if (!(type == NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR))
            gpsimd_fault(GPSIMD_FAULT_ARG_STREAM,
                         "arg_parser.hpp:67: assertion 'isa_args.get_types()[curr_arg_] == "
                         "NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR' failed "
                         "(argument index %u of %u has type %u)",
                         curr_arg_, num_, unsigned(type));
        arg_tensor_t desc;
        memcpy(&desc, stream_ + GPSIMD_ARG_STREAM_ARGS_OFFSET + size_t(curr_arg_) * sizeof(arg_tensor_t),
               sizeof desc);
        const uint32_t index = curr_arg_;
        curr_arg_ += 1;
        return UTensor(&desc, int(index), num_);
    }

 private:
    const uint8_t* stream_ = nullptr;
    uint32_t num_ = 0;
    uint32_t curr_arg_ = 0;
    unsigned base_tag_ = 0;
    bool tagged_ = false;
};

/* The three file-local globals. */
static ArgParser arg_parser;
static bool get_dst_tensor_called = false;
static const arg_tensor_t* retval = nullptr;

void marshalling_reset() {
    arg_parser.reset();
    get_dst_tensor_called = false;
    retval = nullptr;
}

static const arg_tensor_t* output_descriptor(const char* entry) {
    if (!retval) {
        const uint64_t h = core().binding.retval_host;
        if (!h) gpsimd_fault(GPSIMD_FAULT_BINDING, "%s: the binding has no output descriptor", entry);
        retval = reinterpret_cast<const arg_tensor_t*>(static_cast<uintptr_t>(h));
    }
    return retval;
}

/* init_dma_queue (setup) / fsync(dir) (cleanup): the host copies
 * synchronously, so there is nothing to arm or drain; the calls keep the
 * device's structure. */
static void init_dma_queue() {}
static void drain_dma_queue(int direction) { (void)direction; }

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

/* customop_setup(bool). */
void customop_setup(bool has_return) {
    (void)has_return;  /* always true from the codegen (the Neuron SDK's build driver, build_custom_op.py) */
    if (!core().bound) gpsimd_fault(GPSIMD_FAULT_BINDING, "customop_setup: the core is not bound");
    init_dma_queue();
    get_dst_tensor_called = false;
    retval = nullptr;
    arg_parser.init(reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(core().binding.arg_stream_host)));
}

/* Host model: the tagged forms the wrapper_api.h macros call (neuron/
 * wrapper_api.h "Argument positions"); same entries, argument chosen by
 * textual position.  These are the calls the wrapper makes before the
 * kernel: where GPSIMD_STACK_REFILL is 1 the entries are thunks
 * (stack_switch.cpp) that run these bodies and then poison the launcher
 * stack below the wrapper's frame again, over what they left there. */
#if GPSIMD_STACK_REFILL
#define GPSIMD_TAGGED(entry) gpsimd_rt_##entry
extern "C" {
#else
#define GPSIMD_TAGGED(entry) entry
#endif

void GPSIMD_TAGGED(customop_setup_tagged)(bool has_return, unsigned tag) {
    customop_setup(has_return);
    arg_parser.set_base_tag(tag);
}

at::Tensor GPSIMD_TAGGED(customop_next_tensor_tagged)(unsigned tag) {
    arg_parser.seek_tag(tag, "customop_next_tensor");
    return customop_next_tensor();
}

at::Scalar GPSIMD_TAGGED(customop_next_scalar_tagged)(unsigned tag) {
    arg_parser.seek_tag(tag, "customop_next_scalar");
    return customop_next_scalar();
}

int GPSIMD_TAGGED(customop_next_int_tagged)(unsigned tag) {
    arg_parser.seek_tag(tag, "customop_next_int");
    return customop_next_int();
}

long long GPSIMD_TAGGED(customop_next_longlong_tagged)(unsigned tag) {
    arg_parser.seek_tag(tag, "customop_next_longlong");
    return customop_next_longlong();
}

float GPSIMD_TAGGED(customop_next_float_tagged)(unsigned tag) {
    arg_parser.seek_tag(tag, "customop_next_float");
    return customop_next_float();
}

#if GPSIMD_STACK_REFILL
}  /* extern "C" */
#endif

/* customop_next_tensor. */
at::Tensor customop_next_tensor() {
    UTensor u = arg_parser.next_ucode_arg("customop_next_tensor");
    return u.to_tensor();
}

/* customop_next_scalar. */
at::Scalar customop_next_scalar() {
    UTensor u = arg_parser.next_ucode_arg("customop_next_scalar");
    return u.to_scalar();
}

/* customop_next_int. */
int customop_next_int() {
    UTensor u = arg_parser.next_ucode_arg("customop_next_int");
    return u.read_raw<int>("customop_next_int", NEURON_ISA_TPB_DTYPE_INT32, "int");
}

/* customop_next_longlong. */
long long customop_next_longlong() {
    UTensor u = arg_parser.next_ucode_arg("customop_next_longlong");
    return u.read_raw<long long>("customop_next_longlong", NEURON_ISA_TPB_DTYPE_INT64, "long long");
}

/* customop_next_float. */
float customop_next_float() {
    UTensor u = arg_parser.next_ucode_arg("customop_next_float");
    return u.read_raw<float>("customop_next_float", NEURON_ISA_TPB_DTYPE_FP32, "float");
}

/* get_dst_tensor: claim the output, writable, in place. */
at::Tensor get_dst_tensor() {
    forbid_in_shape_call("get_dst_tensor()");
    get_dst_tensor_called = true;
    report_flag(GPSIMD_REPORT_GET_DST);
    UTensor out(output_descriptor("get_dst_tensor"), -1, 0);
    return out.to_tensor();
}

/* customop_return_tensor: no-op once get_dst_tensor was called. */
void customop_return_tensor(at::Tensor& t) {
    if (get_dst_tensor_called) return;
    UTensor out(output_descriptor("customop_return_tensor"), -1, 0);
    /* docs/kernel-api.md "Multicore (SPMD) libraries": get_dst_tensor is
     * required in multicore mode; without it every core would copy a whole
     * result over the same output. */
    if (core().binding.core_count > 1 && check_enabled(GPSIMD_CHECK_MULTICORE))
        gpsimd_fault(GPSIMD_FAULT_MULTICORE,
                     "multicore op returned a result without calling get_dst_tensor(): in multicore mode each "
                     "core must write its own part of the output it claims with get_dst_tensor(), or every core "
                     "copies a whole result over the same output (docs/kernel-api.md \"Multicore (SPMD) libraries\")");
    if (!t.defined())
        gpsimd_fault(GPSIMD_FAULT_UNDEFINED_TENSOR, "customop_return_tensor: the kernel returned an undefined tensor");
    out.copy(t);
    report_flag(GPSIMD_REPORT_COPY_PATH);
}

/* customop_cleanup: fsync(2); fsync(1); memw. */
void customop_cleanup() {
    drain_dma_queue(2);
    drain_dma_queue(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}
