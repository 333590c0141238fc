/*
 * gpsimd_host/dtypes.h -- THE table of element types (one row per dtype a
 * tensor may hold), read by C++ through the X-macro below and by Python
 * (runtime_model/gpsimd_device/dtypes.py parses the rows at import).  Every
 * other list of dtypes in the project is generated from it or tested
 * against it: the ISA mapping of the runtime (wrapper_api.cpp), the element
 * load/store switches (tensor.cpp), c10::ScalarType (checked at compile time
 * at the end of torch/detail/scalar_type.h), the emulator's numpy types, the
 * manifest checks and the JSON Schema's dtype enum (tests).
 *
 * Adding a dtype is one row here plus what is genuinely new code (a C++
 * element type for a new float format, a numpy/ml_dtypes type of that name).
 *
 * Columns:
 *   name      manifest / numpy / ml_dtypes name
 *   isa       NEURON_ISA_TPB_DTYPE_<isa> (the device ABI (gpsimd_host/abi.h))
 *   st        c10::ScalarType member (torch/detail/scalar_type.h)
 *   c10       its numeric value (PyTorch's where PyTorch has the type)
 *   ctype     the C++ element type of one value
 *   bytes     bytes per element
 *   kind      FLOAT, INT (signed) or UINT
 *   fmax      largest finite value of a FLOAT kind (0 for integers, whose
 *             range follows from bytes and kind)
 *   rtol atol default comparison tolerances, |actual - expected| <=
 *             atol + rtol * |expected|: float32/float16/bfloat16 are torch's
 *             assert_close defaults; fp8 (not in torch's table): rtol = the
 *             format's machine epsilon 2^-m (one ulp at 1.0), atol = its
 *             smallest positive subnormal; integers compare exactly.
 *
 * FP32R (ISA 11) and INVALID (0) have no row: FP32R is a rounding mode of
 * fp32, not a storage type a test vector can hold.
 *
 * C-compatible (the ctype column is only expanded by C++ code).
 */
#ifndef GPSIMD_HOST_DTYPES_H
#define GPSIMD_HOST_DTYPES_H

/*  name          isa        st            c10  ctype              bytes kind   fmax                     rtol      atol          */
#define GPSIMD_DTYPES(X)                                                                                                              \
    X(float32,     FP32,      Float,          6, float,              4, FLOAT, 3.4028234663852886e+38,  1.3e-06,  1e-05)             \
    X(float16,     FP16,      Half,           5, c10::Half,          2, FLOAT, 65504.0,                 0.001,    1e-05)             \
    X(bfloat16,    BFLOAT16,  BFloat16,      15, c10::BFloat16,      2, FLOAT, 3.3895313892515355e+38,  0.016,    1e-05)             \
    X(int8,        INT8,      Char,           1, int8_t,             1, INT,   0,                       0,        0)                 \
    X(int16,       INT16,     Short,          2, int16_t,            2, INT,   0,                       0,        0)                 \
    X(int32,       INT32,     Int,            3, int32_t,            4, INT,   0,                       0,        0)                 \
    X(int64,       INT64,     Long,           4, int64_t,            8, INT,   0,                       0,        0)                 \
    X(uint8,       UINT8,     Byte,           0, uint8_t,            1, UINT,  0,                       0,        0)                 \
    X(uint16,      UINT16,    UInt16,        27, uint16_t,           2, UINT,  0,                       0,        0)                 \
    X(uint32,      UINT32,    UInt32,        28, uint32_t,           4, UINT,  0,                       0,        0)                 \
    X(uint64,      UINT64,    UInt64,        29, uint64_t,           8, UINT,  0,                       0,        0)                 \
    X(float8_e3m4, FP8_EXP3,  Float8_e3m4,   41, c10::Float8_e3m4,   1, FLOAT, 15.5,                    0.0625,   0.015625)          \
    X(float8_e4m3, FP8_EXP4,  Float8_e4m3,   40, c10::Float8_e4m3,   1, FLOAT, 240.0,                   0.125,    0.001953125)       \
    X(float8_e5m2, FP8_EXP5,  Float8_e5m2,   23, c10::Float8_e5m2,   1, FLOAT, 57344.0,                 0.25,     1.52587890625e-05)

/* The dtypes a KERNEL may create (torch::empty/zeros/ones/full/eye; the
 * public "Custom Operators API Reference Guide", "Limits"): name and
 * c10::ScalarType member of rows above.  A factory asked for another dtype
 * faults (runtime_model/src/tensor.cpp); docs/kernel-api.md "Limits" lists
 * these (a test checks the list against this macro). */
#define GPSIMD_KERNEL_DTYPES(X)     \
    X(float32,  Float)              \
    X(bfloat16, BFloat16)           \
    X(float16,  Half)               \
    X(int32,    Int)                \
    X(int8,     Char)               \
    X(int16,    Short)              \
    X(uint8,    Byte)               \
    X(int64,    Long)

#endif /* GPSIMD_HOST_DTYPES_H */
