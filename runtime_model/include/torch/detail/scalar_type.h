/*
 * torch/detail/scalar_type.h -- c10::ScalarType, the 16-bit and 8-bit float
 * element types, the TypeMeta returned by Tensor::dtype(), and the C type ->
 * ScalarType traits used by accessors.
 *
 * Follows docs/kernel-api.md "Limits" (the dtypes a kernel may create) and
 * the device ABI (gpsimd_host/abi.h) (the 16-value NEURON_ISA_TPB_DTYPE enum the
 * runtime maps onto these types, see isa_to_torch_dtype in the runtime).
 *
 * Deliberately absent: kDouble (the device has no float64) and kBool; a
 * kernel naming them fails to compile ("'kDouble' is not a member of
 * 'torch'"), and accessor<double> fails with a static_assert.
 */
#ifndef GPSIMD_TORCH_DETAIL_SCALAR_TYPE_H
#define GPSIMD_TORCH_DETAIL_SCALAR_TYPE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <type_traits>

namespace c10 {

/* ScalarType -- values of the PyTorch enum where PyTorch has the type
 * (Byte..Float, BFloat16, Float8_e5m2, UInt16..UInt64), our own values for
 * the two IEEE-style fp8 formats PyTorch lacks (docs/kernel-api.md: "the ISA
 * dtype enum ... incl. three fp8 formats"). */
enum class ScalarType : int8_t {
    Byte = 0,          /* uint8   ISA UINT8    */
    Char = 1,          /* int8    ISA INT8     */
    Short = 2,         /* int16   ISA INT16    */
    Int = 3,           /* int32   ISA INT32    */
    Long = 4,          /* int64   ISA INT64    */
    Half = 5,          /* float16 ISA FP16     */
    Float = 6,         /* float32 ISA FP32     */
    BFloat16 = 15,     /* bfloat16 ISA BFLOAT16 */
    Float8_e5m2 = 23,  /* ISA FP8_EXP5 */
    UInt16 = 27,       /* ISA UINT16 */
    UInt32 = 28,       /* ISA UINT32 */
    UInt64 = 29,       /* ISA UINT64 */
    Float8_e4m3 = 40,  /* ISA FP8_EXP4 (IEEE-style, as ml_dtypes.float8_e4m3) */
    Float8_e3m4 = 41,  /* ISA FP8_EXP3 (IEEE-style, as ml_dtypes.float8_e3m4) */
    Undefined = -1
};

constexpr ScalarType kByte = ScalarType::Byte;
constexpr ScalarType kChar = ScalarType::Char;
constexpr ScalarType kShort = ScalarType::Short;
constexpr ScalarType kInt = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kUInt16 = ScalarType::UInt16;
constexpr ScalarType kUInt32 = ScalarType::UInt32;
constexpr ScalarType kUInt64 = ScalarType::UInt64;
constexpr ScalarType kFloat8_e3m4 = ScalarType::Float8_e3m4;
constexpr ScalarType kFloat8_e4m3 = ScalarType::Float8_e4m3;
constexpr ScalarType kFloat8_e5m2 = ScalarType::Float8_e5m2;

/* Bytes per element; 0 for Undefined. */
inline size_t elementSize(ScalarType t) {
    switch (t) {
    case ScalarType::Byte: case ScalarType::Char:
    case ScalarType::Float8_e3m4: case ScalarType::Float8_e4m3: case ScalarType::Float8_e5m2:
        return 1;
    case ScalarType::Short: case ScalarType::UInt16: case ScalarType::Half: case ScalarType::BFloat16:
        return 2;
    case ScalarType::Int: case ScalarType::UInt32: case ScalarType::Float:
        return 4;
    case ScalarType::Long: case ScalarType::UInt64:
        return 8;
    default:
        return 0;
    }
}

/* numpy / ml_dtypes spelling ("float32", "bfloat16", "float8_e4m3"...), the
 * names fault messages use; "undefined" for anything else. */
inline const char* dtype_name(ScalarType t) {
    switch (t) {
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::UInt16: return "uint16";
    case ScalarType::UInt32: return "uint32";
    case ScalarType::UInt64: return "uint64";
    case ScalarType::Float8_e3m4: return "float8_e3m4";
    case ScalarType::Float8_e4m3: return "float8_e4m3";
    case ScalarType::Float8_e5m2: return "float8_e5m2";
    default: return "undefined";
    }
}
inline const char* toString(ScalarType t) { return dtype_name(t); }

inline bool isFloatingType(ScalarType t) {
    return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16 ||
           t == ScalarType::Float8_e3m4 || t == ScalarType::Float8_e4m3 ||
           t == ScalarType::Float8_e5m2;
}
inline bool isIntegralType(ScalarType t) {
    return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short ||
           t == ScalarType::Int || t == ScalarType::Long || t == ScalarType::UInt16 ||
           t == ScalarType::UInt32 || t == ScalarType::UInt64;
}
inline bool isSignedType(ScalarType t) {
    return t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int ||
           t == ScalarType::Long || isFloatingType(t);
}

namespace detail {

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

/* float32 -> IEEE-754-style binary format with E exponent bits, M mantissa
 * bits, bias 2^(E-1)-1, all-ones exponent for inf/NaN (float16 = <5,10>,
 * ml_dtypes float8_e5m2 = <5,2>, float8_e4m3 = <4,3>, float8_e3m4 = <3,4>).
 * Round to nearest, ties to even; overflow -> inf; NaN -> quiet NaN keeping
 * the sign; subnormals exact.  Bit-exact with numpy/ml_dtypes astype. */
inline uint32_t float_to_minifloat(float f, int E, int M) {
    const uint32_t x = f32_bits(f);
    const uint32_t out_sign = (x >> 31) << (E + M);
    const uint32_t ax = x & 0x7fffffffu;
    const uint32_t exp_all = (1u << E) - 1u;
    if (ax > 0x7f800000u) return out_sign | (exp_all << M) | (1u << (M - 1));  /* NaN */
    if (ax == 0x7f800000u) return out_sign | (exp_all << M);                   /* inf */
    if ((ax >> 23) == 0) return out_sign;  /* float32 zero/subnormal: below every target subnormal */
    const int bias = (1 << (E - 1)) - 1;
    int te = int(ax >> 23) - 127 + bias;           /* target biased exponent */
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;  /* 24-bit significand */
    int shift = (te >= 1) ? (23 - M) : (23 - M + (1 - te));
    if (shift > 24) return out_sign;               /* rounds to zero */
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    if (te >= 1) {
        if (q >> (M + 1)) { q >>= 1; ++te; }
        if (te >= int(exp_all)) return out_sign | (exp_all << M);  /* overflow -> inf */
        return out_sign | (uint32_t(te) << M) | (q & ((1u << M) - 1u));
    }
    return out_sign | q;  /* subnormal; q == 2^M is exactly the smallest normal */
}

/* The exact inverse widening: every minifloat value is a float32 value. */
inline float minifloat_to_float(uint32_t b, int E, int M) {
    const uint32_t sign = (b >> (E + M)) & 1u;
    const uint32_t exp_all = (1u << E) - 1u;
    const uint32_t e = (b >> M) & exp_all;
    const uint32_t m = b & ((1u << M) - 1u);
    const int bias = (1 << (E - 1)) - 1;
    float v;
    if (e == exp_all) v = m ? f32_from_bits(0x7fc00000u) : f32_from_bits(0x7f800000u);
    else if (e == 0) v = std::ldexp(float(m), 1 - bias - M);
    else v = std::ldexp(float(m | (1u << M)), int(e) - bias - M);
    return sign ? -v : v;
}

/* float32 -> bfloat16: round to nearest even on the upper half; NaN stays
 * a (quiet) NaN. */
inline uint16_t float_to_bfloat16_bits(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}
inline float bfloat16_bits_to_float(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

}  // namespace detail

/* 16-bit IEEE half.  Storage only: arithmetic goes through float. */
struct Half {
    uint16_t x;
    struct from_bits_t {};
    static constexpr from_bits_t from_bits() { return from_bits_t(); }
    Half() = default;
    constexpr Half(uint16_t bits, from_bits_t) : x(bits) {}
    Half(float f) : x(uint16_t(detail::float_to_minifloat(f, 5, 10))) {}
    operator float() const { return detail::minifloat_to_float(x, 5, 10); }
};

/* bfloat16: the upper half of a float32. */
struct BFloat16 {
    uint16_t x;
    struct from_bits_t {};
    static constexpr from_bits_t from_bits() { return from_bits_t(); }
    BFloat16() = default;
    constexpr BFloat16(uint16_t bits, from_bits_t) : x(bits) {}
    BFloat16(float f) : x(detail::float_to_bfloat16_bits(f)) {}
    operator float() const { return detail::bfloat16_bits_to_float(x); }
};

/* The three ISA fp8 formats (FP8_EXP3/4/5), IEEE-style like ml_dtypes'
 * float8_e3m4 / float8_e4m3 / float8_e5m2 (inf and NaN, bias 2^(E-1)-1). */
template <int E, int M>
struct Float8Base {
    uint8_t x;
    struct from_bits_t {};
    static constexpr from_bits_t from_bits() { return from_bits_t(); }
    Float8Base() = default;
    constexpr Float8Base(uint8_t bits, from_bits_t) : x(bits) {}
    Float8Base(float f) : x(uint8_t(detail::float_to_minifloat(f, E, M))) {}
    operator float() const { return detail::minifloat_to_float(x, E, M); }
};
typedef Float8Base<3, 4> Float8_e3m4;
typedef Float8Base<4, 3> Float8_e4m3;
typedef Float8Base<5, 2> Float8_e5m2;

/* What Tensor::dtype() returns (caffe2::TypeMeta in PyTorch):
 * toScalarType(), itemsize(), name(), comparable with a ScalarType. */
class TypeMeta {
 public:
    constexpr TypeMeta() : t_(ScalarType::Undefined) {}
    constexpr TypeMeta(ScalarType t) : t_(t) {}
    constexpr ScalarType toScalarType() const { return t_; }
    size_t itemsize() const { return elementSize(t_); }
    const char* name() const { return dtype_name(t_); }
    static TypeMeta fromScalarType(ScalarType t) { return TypeMeta(t); }
    friend bool operator==(TypeMeta a, TypeMeta b) { return a.t_ == b.t_; }
    friend bool operator!=(TypeMeta a, TypeMeta b) { return a.t_ != b.t_; }
 private:
    ScalarType t_;
};

/* C type -> ScalarType, for accessor<T,N>() and the tcm accessor.  Only the
 * types below are element types; anything else is a static_assert. */
template <typename T> struct CTypeTraits { static constexpr bool supported = false; };
#define GPSIMD_CTYPE_(ctype, st, spelled)                                     \
    template <> struct CTypeTraits<ctype> {                                   \
        static constexpr bool supported = true;                               \
        static constexpr ScalarType scalar_type = ScalarType::st;             \
        static const char* name() { return spelled; }                         \
    };
GPSIMD_CTYPE_(float, Float, "float")
GPSIMD_CTYPE_(Half, Half, "c10::Half")
GPSIMD_CTYPE_(BFloat16, BFloat16, "c10::BFloat16")
GPSIMD_CTYPE_(Float8_e3m4, Float8_e3m4, "c10::Float8_e3m4")
GPSIMD_CTYPE_(Float8_e4m3, Float8_e4m3, "c10::Float8_e4m3")
GPSIMD_CTYPE_(Float8_e5m2, Float8_e5m2, "c10::Float8_e5m2")
GPSIMD_CTYPE_(char, Char, "char")
GPSIMD_CTYPE_(signed char, Char, "int8_t")
GPSIMD_CTYPE_(unsigned char, Byte, "uint8_t")
GPSIMD_CTYPE_(short, Short, "int16_t")
GPSIMD_CTYPE_(unsigned short, UInt16, "uint16_t")
GPSIMD_CTYPE_(int, Int, "int32_t")
GPSIMD_CTYPE_(unsigned int, UInt32, "uint32_t")
GPSIMD_CTYPE_(long, Long, sizeof(long) == 8 ? "int64_t" : "long")
GPSIMD_CTYPE_(unsigned long, UInt64, sizeof(long) == 8 ? "uint64_t" : "unsigned long")
GPSIMD_CTYPE_(long long, Long, "long long")
GPSIMD_CTYPE_(unsigned long long, UInt64, "unsigned long long")
#undef GPSIMD_CTYPE_

template <typename T>
struct ElementType {
    typedef typename std::remove_cv<T>::type type;
    static_assert(!std::is_same<type, double>::value,
                  "double is not a device element type: the GPSIMD device has no float64");
    static_assert(!std::is_same<type, bool>::value,
                  "bool is not a device element type: use uint8_t");
    static_assert(std::is_same<type, double>::value || std::is_same<type, bool>::value ||
                      CTypeTraits<type>::supported,
                  "unsupported element type: use float, c10::Half, c10::BFloat16, c10::Float8_*, "
                  "or a fixed-width integer type");
    static constexpr ScalarType scalar_type = CTypeTraits<type>::scalar_type;
    static const char* name() { return CTypeTraits<type>::name(); }
};

}  // namespace c10

#endif  // GPSIMD_TORCH_DETAIL_SCALAR_TYPE_H
