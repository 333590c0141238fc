/*
 * torch/detail/scalar.h -- c10::Scalar, the boxed number a kernel receives
 * for a `Scalar` schema argument (the device ABI (gpsimd_host/abi.h): "builds a
 * boxed c10::Scalar with its own dtype tag") and passes to fill_/full/ops.
 *
 * A Scalar holds either a double (floating) or an int64 (integral).
 * Conversions to an integer type saturate (NaN -> 0) instead of being
 * undefined behaviour.
 */
#ifndef GPSIMD_TORCH_DETAIL_SCALAR_H
#define GPSIMD_TORCH_DETAIL_SCALAR_H

#include <cstdint>
#include <limits>
#include <type_traits>

#include "torch/detail/scalar_type.h"

namespace c10 {

namespace detail {
/* double -> integer T, truncating toward zero, saturating, NaN -> 0. */
template <typename T>
inline T saturating_cast(double v) {
    if (v != v) return T(0);
    const double lo = double(std::numeric_limits<T>::lowest());
    const double hi = double(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return T(v);
}

template <typename T, bool IsInt = std::is_integral<T>::value>
struct ScalarConvert {
    static T from_double(double v) { return T(float(v)); }  /* float, Half, BFloat16, fp8 */
    static T from_int(int64_t v) { return T(float(v)); }
};
template <>
struct ScalarConvert<double, false> {
    static double from_double(double v) { return v; }
    static double from_int(int64_t v) { return double(v); }
};
template <typename T>
struct ScalarConvert<T, true> {
    static T from_double(double v) { return saturating_cast<T>(v); }
    static T from_int(int64_t v) { return T(v); }
};
}  // namespace detail

class Scalar {
 public:
    Scalar() : is_float_(false), d_(0.0), i_(0) {}
    template <typename T,
              typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
    Scalar(T v) : is_float_(false), d_(0.0), i_(int64_t(v)) {}
    template <typename T,
              typename std::enable_if<std::is_floating_point<T>::value, int>::type = 0>
    Scalar(T v) : is_float_(true), d_(double(v)), i_(0) {}
    Scalar(Half v) : is_float_(true), d_(double(float(v))), i_(0) {}
    Scalar(BFloat16 v) : is_float_(true), d_(double(float(v))), i_(0) {}
    template <int E, int M>
    Scalar(Float8Base<E, M> v) : is_float_(true), d_(double(float(v))), i_(0) {}

    /* Value as T: float types through float (RNE), integer types truncated
     * and saturated from a floating Scalar, wrapped from an integral one. */
    template <typename T>
    T to() const {
        return is_float_ ? detail::ScalarConvert<T>::from_double(d_)
                         : detail::ScalarConvert<T>::from_int(i_);
    }
    double toDouble() const { return is_float_ ? d_ : double(i_); }
    float toFloat() const { return float(toDouble()); }
    int toInt() const { return to<int>(); }
    int64_t toLong() const { return to<int64_t>(); }
    Half toHalf() const { return Half(toFloat()); }
    BFloat16 toBFloat16() const { return BFloat16(toFloat()); }

    bool isFloatingPoint() const { return is_float_; }
    /* includeBool is accepted for PyTorch compatibility; there is no Bool tag. */
    bool isIntegral(bool includeBool) const { (void)includeBool; return !is_float_; }

 private:
    bool is_float_;
    double d_;
    int64_t i_;
};

}  // namespace c10

#endif  // GPSIMD_TORCH_DETAIL_SCALAR_H
