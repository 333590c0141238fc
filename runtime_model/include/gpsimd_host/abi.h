/*
 * gpsimd_host/abi.h -- the byte-level contract between the Python device
 * model (runtime_model/gpsimd_emu, which reads every struct and enum here
 * from this text) and the host C++ runtime linked into every core object.
 *
 * Two kinds of fact live here:
 *
 *  1. Facts of the device ABI (the Neuron SDK's libneuroncustomop.a, whose customop_* entries read them):
 *     the 48-byte argument descriptor NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR,
 *     its location / shape-type / ISA-dtype enums with their numeric values,
 *     the two storage arms at +24.  These are requirements.
 *
 *  2. Host-model choices where the spec is silent, each marked HOST-MODEL:
 *     the members of the 16-byte shape union, the argument-stream header,
 *     the argument-type enum values, and the core-binding structure the
 *     model hands to a core before it launches an op.  A test checks that
 *     Python and C++ agree on every size, offset and enum value.
 *
 * This header is C (and C++) compatible and has no dependencies beyond
 * <stdint.h>.
 */
#ifndef GPSIMD_HOST_ABI_H
#define GPSIMD_HOST_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPSIMD_HOST_ABI_VERSION 2u  /* 2: tcm_poison, read_map_host, out_itemsize */

/* ---- Device ABI enums (gpsimd_host/abi.h, DWARF enums) ------- */

enum NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION {
    NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_INVALID = 0,
    NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_SBUF = 1,
    NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM = 2
};

enum NEURON_ISA_TPB_CUSTOM_OP_TENSOR_SHAPE_TYPE {
    NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE8D = 0,
    NEURON_ISA_TPB_CUSTOM_OP_OUT_OF_LINE_SHAPE = 1,
    NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE4D = 2
};

/* name and value of every ISA dtype; the enum below and the runtime's name
 * table are generated from it, and Python reads it (gpsimd_device.dtypes).
 * Storage dtypes (what a tensor may hold) are the rows of gpsimd_host/dtypes.h. */
#define GPSIMD_ISA_DTYPES(X)                                                  \
    X(INVALID, 0) X(UINT64, 1) X(INT8, 2) X(UINT8, 3) X(INT16, 4)             \
    X(UINT16, 5) X(BFLOAT16, 6) X(FP16, 7) X(INT32, 8) X(UINT32, 9)           \
    X(FP32, 10) X(FP32R, 11) X(INT64, 12) X(FP8_EXP3, 13) X(FP8_EXP4, 14)     \
    X(FP8_EXP5, 15)

enum NEURON_ISA_TPB_DTYPE {
#define GPSIMD_ISA_ENUM_(name, value) NEURON_ISA_TPB_DTYPE_##name = value,
    GPSIMD_ISA_DTYPES(GPSIMD_ISA_ENUM_)
#undef GPSIMD_ISA_ENUM_
    NEURON_ISA_TPB_DTYPE_COUNT_
};

/* HOST-MODEL: the spec names the argument type TENSOR (arg_parser.hpp:67)
 * but not its value. */
enum NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE {
    NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_INVALID = 0,
    NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR = 1
};

/* ---- The 48-byte descriptor of the device ABI ------------------------------ */

/* HOST-MODEL: the shape union is 16 bytes at +8 (spec); its members are ours.
 * Inline forms store the dimensions left-aligned; unused slots are 0, and the
 * rank is the number of leading non-zero slots (so a zero-sized dimension
 * needs the out-of-line form).  A 0-D tensor has every slot 0. */
typedef union {
    uint32_t dims4[4];          /* INLINE_SHAPE4D: up to 4 dims of < 2^32   */
    uint16_t dims8[8];          /* INLINE_SHAPE8D: up to 8 dims of <= 65535 */
    struct {
        uint64_t addr;          /* OUT_OF_LINE_SHAPE: HBM address of int64 dims */
        uint32_t ndim;          /* number of int64 dims at addr (<= 8)      */
        uint32_t reserved;
    } out_of_line;
} gpsimd_shape_union;

typedef struct {
    uint64_t addr;              /* +24 64-bit HBM address                    */
    uint32_t num_elem;          /* +32                                       */
    uint32_t reserved0;         /* +36                                       */
} gpsimd_hbm_storage;

typedef struct {
    uint32_t addr;              /* +24 32-bit offset in the SBUF window      */
    uint32_t num_elem;          /* +28                                       */
    uint8_t  num_partitions;    /* +32                                       */
    uint8_t  reserved0[3];
    uint32_t num_elem_per_block;/* +36                                       */
} gpsimd_tpb_storage;

typedef union {
    gpsimd_hbm_storage hbm;
    gpsimd_tpb_storage tpb;
} gpsimd_storage_union;

typedef struct {
    uint8_t  location;              /* +0  NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION   */
    uint8_t  framework_shape_type;  /* +1  NEURON_ISA_TPB_CUSTOM_OP_TENSOR_SHAPE_TYPE */
    uint8_t  dtype;                 /* +2  NEURON_ISA_TPB_DTYPE                     */
    uint8_t  reserved0;             /* +3                                           */
    uint8_t  pad0[4];               /* +4  (alignment of the union at +8)           */
    gpsimd_shape_union framework_shape;  /* +8, 16 bytes                            */
    gpsimd_storage_union storage;        /* +24, 16 bytes                           */
    uint8_t  reserved1[8];          /* +40                                          */
} NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR;

typedef NEURON_ISA_TPB_CUSTOM_OP_ARG_TENSOR arg_tensor_t;

/* ---- The argument stream (HOST-MODEL layout) ---------------------------
 * Bytes, as the model writes them:
 *   +0   uint32 num_args            number of descriptors that follow
 *   +4   uint32 reserved (0)
 *   +8   uint8  types[GPSIMD_MAX_ARGS]   one ARG_TYPE per argument
 *   +40  arg_tensor_t args[num_args]     48 bytes each, in schema order
 * GPSIMD_MAX_ARGS is the capacity behind the "num_args < max_args_" guard
 * (arg_extractor.hpp:16). */
#define GPSIMD_MAX_ARGS 32u

typedef struct {
    uint32_t num_args;
    uint32_t reserved;
    uint8_t  types[GPSIMD_MAX_ARGS];
    /* arg_tensor_t args[] follows at +40 */
} gpsimd_arg_stream_header;

#define GPSIMD_ARG_STREAM_ARGS_OFFSET 40u

/* ---- Device memory map (docs/kernel-api.md "Limits") ------------------------ */
#define GPSIMD_DATARAM_BASE      0x80000u     /* dataram/TCM window [0x80000, 0x90000) */
#define GPSIMD_DATARAM_SIZE      0x10000u     /* 64 KiB                                */
#define GPSIMD_TCM_POOL_SIZE     0x4000u      /* 16 KiB per core (docs/kernel-api.md)       */
#define GPSIMD_STREAM_TCM_BYTES  0x1000u      /* 4 KiB per active stream accessor      */
#define GPSIMD_SCRATCH_BASE      0x84000000u  /* core i: BASE + i * 2 MiB (multicore)  */
#define GPSIMD_SCRATCH_CORE_SIZE 0x200000u    /* 2 MiB per core, multicore             */
#define GPSIMD_SCRATCH_SINGLE_SIZE 0x2000000u /* 32 MiB, single-core                   */
#define GPSIMD_PRINTF_CAPACITY   0x20000u     /* 128 KiB, oldest data dropped          */
#define GPSIMD_NUM_CORES         8u          /* SPMD cores (build_custom_op.py's NUM_CPUS) */
#define GPSIMD_DEFAULT_STACK_SIZE 4196u       /* stack_switch.hpp:16, the Neuron SDK's build driver, build_custom_op.py */

/* ---- Limits of a library and its tensors (docs/kernel-api.md "Limits") ------
 * Python reads every `#define GPSIMD_<NAME> <number>u` of this header
 * (gpsimd_device.limits); the manifest checks, the JSON Schema (tested) and
 * the runtime use these values. */
#define GPSIMD_MAX_STACK_SIZE    409600u      /* bytes: -DSTACK_SIZE=N "up to 400 KB"   */
#define GPSIMD_MAX_OPS_PER_LIBRARY 10u        /* functions in one custom-op library     */
#define GPSIMD_MAX_NAME_LENGTH   32u          /* an op name is shorter than this        */
/* A tensor has either at most GPSIMD_MAX_DIMS_4D dimensions of up to
 * GPSIMD_MAX_DIM_SIZE_4D each (the INLINE_4D shape form, u32 slots), or at
 * most GPSIMD_MAX_DIMS dimensions of up to GPSIMD_MAX_DIM_SIZE each (the
 * INLINE_8D form, u16 slots); either way at most GPSIMD_MAX_ELEMENTS
 * elements.  gpsimd_device.limits.shape_problem() states the rule once for
 * Python; the runtime's factories apply the same lines. */
#define GPSIMD_MAX_DIMS          8u           /* dimensions of a tensor                 */
#define GPSIMD_MAX_DIM_SIZE      65535u       /* each dimension, rank 5..8 (INLINE_8D)  */
#define GPSIMD_MAX_DIMS_4D       4u           /* ranks whose dimensions may be wider    */
#define GPSIMD_MAX_DIM_SIZE_4D   0xFFFFFFFFu  /* each dimension, rank <= 4 (INLINE_4D)  */
#define GPSIMD_MAX_ELEMENTS      0xFFFFFFFFu  /* num_elem is a u32 (+32 HBM / +28 SBUF) */
#define GPSIMD_RESERVED_LIBRARY_NAME "builtin" /* no library may be named so          */

/* ---- The linker spec of one core object (HOST-MODEL) --------------------
 * On the device, -mlsp=<dir> fixes the core's scratch window at link time.
 * On the host, each link pulls in one LSP object that defines this constant,
 * so a core object carries its own identity. */
#define GPSIMD_LSP_SINGLE 0xFFFFFFFFu

typedef struct {
    uint32_t core_id;           /* 0..7, or GPSIMD_LSP_SINGLE                 */
    uint32_t reserved;
    uint64_t scratch_origin;    /* device address of the scratch window       */
    uint64_t scratch_size;      /* bytes                                      */
    char     name[32];          /* "lsp_fll_load_cpu3", "lsp_fll_load_cpu_single" */
} gpsimd_lsp_info;

/* ---- Binding a core before a launch (HOST-MODEL) ------------------------ */

/* One HBM region the model allocated: [device_addr, device_addr + size)
 * is backed by host memory at `host`. */
#define GPSIMD_REGION_READONLY 1u
#define GPSIMD_REGION_OUTPUT   2u   /* the output (copy) this core writes: reads of its
                                       never-written elements are recorded (read_map_host) */
typedef struct {
    uint64_t device_addr;
    uint64_t size;              /* bytes */
    uint64_t host;              /* host pointer, as an integer */
    uint32_t flags;             /* GPSIMD_REGION_* */
    uint32_t reserved;
} gpsimd_region;

#define GPSIMD_MAX_REGIONS 64u

/* What a launch reports back; the runtime writes it, the model reads it. */
enum gpsimd_status {
    GPSIMD_STATUS_OK = 0,
    GPSIMD_STATUS_FAULT = 1        /* the op was stopped; message says why */
};

#define GPSIMD_MESSAGE_CAPACITY 2048u
/* HOST-MODEL: bytes of gpsimd_core_report.warnings.  Warnings that do not
 * fit are counted in warning_count but not kept. */
#define GPSIMD_WARNINGS_CAPACITY 1024u

/* HOST-MODEL: gpsimd_core_report.flags, set by the runtime during a launch
 * so that the model can phrase what it finds in the output. */
#define GPSIMD_REPORT_COPY_PATH 1u  /* customop_return_tensor copied a result              */
#define GPSIMD_REPORT_GET_DST   2u  /* the kernel called get_dst_tensor                    */
#define GPSIMD_REPORT_TCM_NULL  4u  /* a tcm_malloc returned null (pool exhausted)         */
#define GPSIMD_REPORT_OUTPUT_SIZE 8u /* the result's element count is not the output
                                       descriptor's (the copy path)                     */
#define GPSIMD_REPORT_TCM_USED  16u /* the kernel got memory that starts uninitialised on
                                       the device: a tcm_malloc block or dataram staging */
#define GPSIMD_REPORT_EMPTY_USED 32u /* the kernel made a torch::empty() tensor           */
#define GPSIMD_REPORT_OUTPUT_READ 64u /* a read of never-written output elements was
                                       recorded in the binding's read map               */
#define GPSIMD_REPORT_OUTPUT_UNTRACKED 128u /* the kernel took a standard or stream accessor,
                                       or a raw pointer (neuron_translate), on the output
                                       or at its end, in any run:
                                       reads through those are not in the read map      */
#define GPSIMD_REPORT_SCRATCH_USED 256u /* the kernel got a neuron_hbm_allocate block (HBM
                                       scratch, uninitialised on the device)            */
#define GPSIMD_REPORT_STACK_POISONED 512u /* the launch ran on a stack filled with
                                       `tcm_poison` (GPSIMD_CHECK_POISON_STACK): a local
                                       variable read before it is written holds it      */
#define GPSIMD_REPORT_HEAP_POISONED 1024u /* malloc / new blocks of the launch start filled
                                       with `tcm_poison` (GPSIMD_CHECK_POISON_HEAP)     */
#define GPSIMD_REPORT_INPUT_RAW 2048u /* the kernel took a raw pointer (neuron_translate)
                                       into an input region: a read before or past an
                                       input through it is not checked (the bytes around
                                       each input hold `tcm_poison` under the checks)   */

typedef struct {
    uint32_t status;            /* gpsimd_status                              */
    uint32_t fault_kind;        /* runtime-defined code, 0 when status == OK  */
    uint64_t printf_total;      /* bytes the kernel printed in all            */
    uint64_t printf_len;        /* bytes kept in printf_buf (<= capacity)     */
    uint64_t printf_head;       /* offset of the oldest kept byte (ring)      */
    uint64_t tcm_peak;          /* bytes of the TCM pool in use, at most      */
    uint64_t scratch_peak;      /* bytes of the scratch window in use, at most */
    uint64_t dataram_peak;      /* bytes of dataram staging in use, at most   */
    char     message[GPSIMD_MESSAGE_CAPACITY]; /* NUL-terminated fault text   */
    uint32_t flags;             /* GPSIMD_REPORT_* bits: what the launch did  */
    uint32_t warning_count;     /* warnings raised (may exceed those kept)    */
    char     warnings[GPSIMD_WARNINGS_CAPACITY]; /* kept warnings, each ending in '\n' */
} gpsimd_core_report;

typedef struct {
    uint32_t abi_version;       /* GPSIMD_HOST_ABI_VERSION                    */
    uint32_t core_id;           /* the core this object is being run as       */
    uint32_t core_count;        /* 8 multicore, 1 single-core                 */
    uint32_t num_regions;       /* entries used in regions[]                  */
    gpsimd_region regions[GPSIMD_MAX_REGIONS];
    uint64_t scratch_host;      /* host backing of the core's scratch window (size from the LSP) */
    uint64_t dataram_host;      /* host backing of the 64 KiB dataram window  */
    uint64_t sbuf_window_base;  /* device address added to SBUF offsets (_sbuf_window) */
    uint64_t arg_stream_host;   /* host pointer to the argument stream bytes  */
    uint64_t retval_host;       /* host pointer to the 48-byte output descriptor */
    uint64_t printf_host;       /* host buffer of GPSIMD_PRINTF_CAPACITY bytes */
    uint64_t report_host;       /* host pointer to a gpsimd_core_report       */
    uint32_t stack_scale;       /* host stack = stack_size * stack_scale bytes */
    uint16_t checks;            /* GPSIMD_CHECK_* bits; 0: the device's behaviour */
    uint8_t  poison;            /* byte torch::empty() storage is filled with
                                   (GPSIMD_CHECK_POISON_EMPTY), and that never-written
                                   elements of the output copy hold (GPSIMD_CHECK_READS) */
    uint8_t  tcm_poison;        /* ABI 2: byte tcm_malloc / neuron_dataram_allocate
                                   blocks are filled with (GPSIMD_CHECK_POISON_TCM), and
                                   neuron_hbm_allocate blocks, the launcher stack and
                                   malloc / new blocks (GPSIMD_CHECK_POISON_SCRATCH,
                                   _STACK, _HEAP);
                                   another byte than `poison`, so that a value made
                                   from never-written TCM never looks like an
                                   unwritten output element */
    /* ABI 2 (GPSIMD_CHECK_READS): one bit per element of the output region
     * (GPSIMD_REGION_OUTPUT), bit i of byte i/8 set when the kernel read
     * element i through the runtime (tensor_to_tcm, neuron_memcpy, the
     * element-wise ops) while all its bytes still held `poison`, i.e. before
     * this core wrote it; 0: no tracking.  out_itemsize: bytes per element. */
    uint64_t read_map_host;
    uint32_t out_itemsize;
    uint32_t reserved2;
} gpsimd_core_binding;

/* HOST-MODEL: gpsimd_core_binding.checks -- checks the runtime makes beyond
 * what the device does (the device gives a wrong answer or hangs where these
 * fault).  The model sets GPSIMD_CHECK_ALL unless run with --no-checks. */
#define GPSIMD_CHECK_POISON_EMPTY 1u  /* fill torch::empty() storage with `poison`             */
#define GPSIMD_CHECK_MULTICORE    2u  /* docs/kernel-api.md multicore rules: standard/stream accessor
                                         in multicore mode, no get_dst_tensor (MULTICORE fault) */
#define GPSIMD_CHECK_COHERENCE    4u  /* stream coherence policy (COHERENCE fault / warning)   */
#define GPSIMD_CHECK_ARG_DTYPE    8u  /* customop_next_int/longlong/float vs the descriptor
                                         dtype (the device ABI (gpsimd_host/abi.h) GOTCHA; DTYPE)     */
#define GPSIMD_CHECK_POISON_TCM  16u  /* fill what tcm_malloc and neuron_dataram_allocate hand
                                         the kernel with `tcm_poison`                           */
#define GPSIMD_CHECK_READS       32u  /* record reads of never-written output elements in the
                                         binding's read map (read_map_host)                    */
#define GPSIMD_CHECK_POISON_SCRATCH 64u /* fill neuron_hbm_allocate blocks with `tcm_poison`    */
#define GPSIMD_CHECK_POISON_STACK 128u /* fill the launcher stack with `tcm_poison` before each
                                         launch                                                 */
#define GPSIMD_CHECK_POISON_HEAP 256u  /* malloc / new blocks start filled with `tcm_poison`
                                         (glibc's mallopt(M_PERTURB), set at bind time)        */
#define GPSIMD_CHECK_ALL         511u

/* Exported by every core object (the host runtime), called by the model:
 *   int gpsimd_bind_core(const gpsimd_core_binding*);   0 on success, else a
 *       fault is written to the binding's report (e.g. the LSP of this object
 *       does not match core_id).
 *   const gpsimd_lsp_info* gpsimd_linker_spec_info(void);
 * and the registration trio of the generated wrapper (C++ linkage):
 *   int get_func_cnt();  char const* get_func_name(int);  wrapper_fn get_func_ptr(int);
 * A launcher returned by get_func_ptr returns GPSIMD_STATUS_*. */
int gpsimd_bind_core(const gpsimd_core_binding* binding);
const gpsimd_lsp_info* gpsimd_linker_spec_info(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GPSIMD_HOST_ABI_H */
