/*
 * ops.cpp -- the element-wise operations of docs/kernel-api.md ("Element-wise
 * operations (no broadcasting; shapes must match)"); rules in
 * torch/detail/ops.h.  Computation goes element by element through double
 * (floating results) or int64 with two's-complement wrap (integral results
 * of integral operands), then converts into the result dtype like
 * Scalar::to<T>().
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#include <math.h>
#include <stdio.h>

#include "runtime.h"
#include "tensor_impl.h"

namespace gpsimd_rt {
namespace {

using at::Scalar;
using at::Tensor;
using c10::ScalarType;
using c10::TensorImpl;

/* One operand: a tensor, or a scalar broadcast over every element (the one
 * broadcast the device API has: tensor-scalar forms). */
struct Operand {
    const TensorImpl* t;
    Scalar s;
    bool integral() const { return t ? c10::isIntegralType(t->dtype) : s.isIntegral(false); }
    double d(int64_t i) const { return t ? load_double(t->dtype, t->data, i) : s.toDouble(); }
    int64_t n(int64_t i) const { return t ? load_int(t->dtype, t->data, i) : s.toLong(); }
};

Operand of(const Tensor& t, const char* op) {
    forbid_in_shape_call(op);
    if (!t.defined()) gpsimd_fault(GPSIMD_FAULT_UNDEFINED_TENSOR, "%s: undefined tensor operand", op);
    Operand o = {t.unsafeGetTensorImpl(), Scalar()};
    /* every element of an operand is read (before an _out form writes it) */
    note_output_read(o.t->data, o.t->nbytes);
    return o;
}
Operand of(const Scalar& s) {
    Operand o = {nullptr, s};
    return o;
}

void check_same_shape(const char* op, const TensorImpl* a, const TensorImpl* b, const char* what) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; ++d) same = a->sizes[d] == b->sizes[d];
    if (!same) {
        char sa[128], sb[128];
        gpsimd_fault(GPSIMD_FAULT_SHAPE, "%s: %s shape %s does not match %s (no broadcasting on the device)", op, what,
                     shape_string(b, sb, sizeof sb), shape_string(a, sa, sizeof sa));
    }
}

void check_same_dtype(const char* op, const TensorImpl* a, const TensorImpl* b) {
    if (a->dtype != b->dtype)
        gpsimd_fault(GPSIMD_FAULT_DTYPE, "%s: dtype mismatch %s vs %s (no type promotion on the device)", op,
                     c10::dtype_name(a->dtype), c10::dtype_name(b->dtype));
}

void check_integral(const char* op, const Operand& o) {
    if (!o.integral())
        gpsimd_fault(GPSIMD_FAULT_UNSUPPORTED, "%s: needs integral operands, got %s", op,
                     o.t ? c10::dtype_name(o.t->dtype) : "a floating-point scalar");
}

/* Validate operands against each other and the result; allocate the result
 * when out is null (dtype `alloc_dtype`). */
TensorImpl* prepare(const char* op, Tensor* out, Tensor& holder, const Operand& a, const Operand& b,
                    ScalarType alloc_dtype) {
    const TensorImpl* shape_of = a.t ? a.t : b.t;
    if (a.t && b.t) {
        check_same_shape(op, a.t, b.t, "other");
        check_same_dtype(op, a.t, b.t);
    }
    if (out) {
        if (!out->defined()) gpsimd_fault(GPSIMD_FAULT_UNDEFINED_TENSOR, "%s_out: undefined result tensor", op);
        check_same_shape(op, shape_of, out->unsafeGetTensorImpl(), "result");
        return out->unsafeGetTensorImpl();
    }
    holder = make_scratch_tensor(op, at::IntArrayRef(shape_of->sizes, size_t(shape_of->ndim)), alloc_dtype);
    return holder.unsafeGetTensorImpl();
}

template <typename FD, typename FI>
void run(TensorImpl* r, const Operand& a, const Operand& b, bool int_math, FD fd, FI fi) {
    for (int64_t i = 0; i < r->numel; ++i) {
        if (int_math) store_int(r->dtype, r->data, i, fi(a.n(i), b.n(i)));
        else store_double(r->dtype, r->data, i, fd(a.d(i), b.d(i)));
    }
}

/* Result dtype of an allocating arithmetic op (add/sub/mul/clamp): the
 * tensor operand's dtype. */
ScalarType tensor_dtype(const Operand& a, const Operand& b) { return a.t ? a.t->dtype : b.t->dtype; }
ScalarType float_if_integral(ScalarType t) { return c10::isIntegralType(t) ? ScalarType::Float : t; }

int64_t wrap_add(int64_t x, int64_t y) { return int64_t(uint64_t(x) + uint64_t(y)); }
int64_t wrap_mul(int64_t x, int64_t y) { return int64_t(uint64_t(x) * uint64_t(y)); }

int64_t int_pow(const char* op, int64_t base, int64_t e) {
    if (e < 0) gpsimd_fault(GPSIMD_FAULT_BAD_ARGUMENT, "%s: integers to negative integer powers are not allowed", op);
    int64_t r = 1;
    while (e) {
        if (e & 1) r = wrap_mul(r, base);
        base = wrap_mul(base, base);
        e >>= 1;
    }
    return r;
}

Tensor& unary_into(const char* op, Tensor* out, const Tensor& self, double (*fd)(double),
                   int64_t (*fi)(int64_t), Tensor& holder) {
    Operand a = of(self, op);
    const bool integral_ok = fi != nullptr;
    if (!fd) check_integral(op, a);
    const ScalarType alloc = (a.integral() && integral_ok) ? a.t->dtype : float_if_integral(a.t->dtype);
    TensorImpl* r = prepare(op, out, holder, a, a, alloc);
    const bool int_math = integral_ok && a.integral() && c10::isIntegralType(r->dtype);
    for (int64_t i = 0; i < r->numel; ++i) {
        if (int_math) store_int(r->dtype, r->data, i, fi(a.n(i)));
        else store_double(r->dtype, r->data, i, fd(a.d(i)));
    }
    return out ? *out : holder;
}

double d_abs(double v) { return fabs(v); }
double d_ceil(double v) { return ceil(v); }
double d_floor(double v) { return floor(v); }
double d_sin(double v) { return double(sinf(float(v))); }
double d_cos(double v) { return double(cosf(float(v))); }
double d_tan(double v) { return double(tanf(float(v))); }
double d_log(double v) { return double(logf(float(v))); }
double d_log2(double v) { return double(log2f(float(v))); }
double d_log10(double v) { return double(log10f(float(v))); }
double d_exp(double v) { return double(expf(float(v))); }
int64_t i_abs(int64_t v) { return v < 0 ? int64_t(0 - uint64_t(v)) : v; }
int64_t i_same(int64_t v) { return v; }
int64_t i_not(int64_t v) { return ~v; }

}  // namespace
}  // namespace gpsimd_rt

using namespace gpsimd_rt;

namespace at {

/* docs/kernel-api.md "Element-wise operations": unary forms. */
#define GPSIMD_UNARY_DEF_(name, fd, fi)                                                     \
    Tensor name(const Tensor& self) {                                                       \
        Tensor holder;                                                                      \
        return unary_into(#name, nullptr, self, fd, fi, holder);                            \
    }                                                                                       \
    Tensor& name##_out(Tensor& result, const Tensor& self) {                                \
        Tensor holder;                                                                      \
        return unary_into(#name, &result, self, fd, fi, holder);                            \
    }
GPSIMD_UNARY_DEF_(abs, d_abs, i_abs)
GPSIMD_UNARY_DEF_(ceil, d_ceil, i_same)
GPSIMD_UNARY_DEF_(floor, d_floor, i_same)
GPSIMD_UNARY_DEF_(sin, d_sin, nullptr)
GPSIMD_UNARY_DEF_(cos, d_cos, nullptr)
GPSIMD_UNARY_DEF_(tan, d_tan, nullptr)
GPSIMD_UNARY_DEF_(log, d_log, nullptr)
GPSIMD_UNARY_DEF_(log2, d_log2, nullptr)
GPSIMD_UNARY_DEF_(log10, d_log10, nullptr)
GPSIMD_UNARY_DEF_(exp, d_exp, nullptr)
GPSIMD_UNARY_DEF_(bitwise_not, nullptr, i_not)
#undef GPSIMD_UNARY_DEF_

/* add/sub: self + sign * alpha * other. */
static Tensor& add_impl(const char* op, Tensor* out, const Operand& a, const Operand& b, const Scalar& alpha,
                        int sign, Tensor& holder) {
    TensorImpl* r = prepare(op, out, holder, a, b, tensor_dtype(a, b));
    const bool int_math = a.integral() && b.integral() && alpha.isIntegral(false) && c10::isIntegralType(r->dtype);
    const double ad = alpha.toDouble() * sign;
    const int64_t ai = wrap_mul(alpha.toLong(), sign);
    run(r, a, b, int_math, [ad](double x, double y) { return double(float(x) + float(ad) * float(y)); },
        [ai](int64_t x, int64_t y) { return wrap_add(x, wrap_mul(ai, y)); });
    return out ? *out : holder;
}

#define GPSIMD_ADD_DEF_(name, sign)                                                                   \
    Tensor name(const Tensor& self, const Tensor& other, const Scalar& alpha) {                       \
        Tensor h;                                                                                     \
        return add_impl(#name, nullptr, of(self, #name), of(other, #name), alpha, sign, h);           \
    }                                                                                                 \
    Tensor name(const Tensor& self, const Scalar& other, const Scalar& alpha) {                       \
        Tensor h;                                                                                     \
        return add_impl(#name, nullptr, of(self, #name), of(other), alpha, sign, h);                  \
    }                                                                                                 \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Tensor& other, const Scalar& alpha) { \
        Tensor h;                                                                                     \
        return add_impl(#name, &result, of(self, #name), of(other, #name), alpha, sign, h);           \
    }                                                                                                 \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Scalar& other, const Scalar& alpha) { \
        Tensor h;                                                                                     \
        return add_impl(#name, &result, of(self, #name), of(other), alpha, sign, h);                  \
    }
GPSIMD_ADD_DEF_(add, 1)
GPSIMD_ADD_DEF_(sub, -1)
#undef GPSIMD_ADD_DEF_

static Tensor& mul_impl(Tensor* out, const Operand& a, const Operand& b, Tensor& holder) {
    TensorImpl* r = prepare("mul", out, holder, a, b, tensor_dtype(a, b));
    const bool int_math = a.integral() && b.integral() && c10::isIntegralType(r->dtype);
    run(r, a, b, int_math, [](double x, double y) { return double(float(x) * float(y)); },
        [](int64_t x, int64_t y) { return wrap_mul(x, y); });
    return out ? *out : holder;
}

/* div: true division; an integral self gives float32 (allocating form). */
static Tensor& div_impl(Tensor* out, const Operand& a, const Operand& b, Tensor& holder) {
    TensorImpl* r = prepare("div", out, holder, a, b, float_if_integral(tensor_dtype(a, b)));
    run(r, a, b, false, [](double x, double y) { return double(float(x) / float(y)); },
        [](int64_t x, int64_t) { return x; });
    return out ? *out : holder;
}

static Tensor& bitwise_impl(const char* op, bool is_and, Tensor* out, const Operand& a, const Operand& b,
                            Tensor& holder) {
    check_integral(op, a);
    check_integral(op, b);
    TensorImpl* r = prepare(op, out, holder, a, b, tensor_dtype(a, b));
    /* the scalar is cast to the tensor dtype first (docs/kernel-api.md) */
    const ScalarType td = tensor_dtype(a, b);
    Operand bb = b;
    if (!b.t) {
        int64_t tmp[1] = {0};
        store_int(td, tmp, 0, b.s.toLong());
        bb.s = Scalar(load_int(td, tmp, 0));
    }
    run(r, a, bb, true, [](double x, double) { return x; },
        [is_and](int64_t x, int64_t y) { return is_and ? (x & y) : (x | y); });
    return out ? *out : holder;
}

#define GPSIMD_BINARY_DEF_(name, call)                                                        \
    Tensor name(const Tensor& self, const Tensor& other) {                                    \
        Tensor h;                                                                             \
        Operand a = of(self, #name), b = of(other, #name);                                    \
        return call(nullptr, a, b, h);                                                        \
    }                                                                                         \
    Tensor name(const Tensor& self, const Scalar& other) {                                    \
        Tensor h;                                                                             \
        Operand a = of(self, #name), b = of(other);                                           \
        return call(nullptr, a, b, h);                                                        \
    }                                                                                         \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Tensor& other) {             \
        Tensor h;                                                                             \
        Operand a = of(self, #name), b = of(other, #name);                                    \
        return call(&result, a, b, h);                                                        \
    }                                                                                         \
    Tensor& name##_out(Tensor& result, const Tensor& self, const Scalar& other) {             \
        Tensor h;                                                                             \
        Operand a = of(self, #name), b = of(other);                                           \
        return call(&result, a, b, h);                                                        \
    }
static Tensor& and_impl(Tensor* out, const Operand& a, const Operand& b, Tensor& h) {
    return bitwise_impl("bitwise_and", true, out, a, b, h);
}
static Tensor& or_impl(Tensor* out, const Operand& a, const Operand& b, Tensor& h) {
    return bitwise_impl("bitwise_or", false, out, a, b, h);
}
GPSIMD_BINARY_DEF_(mul, mul_impl)
GPSIMD_BINARY_DEF_(div, div_impl)
GPSIMD_BINARY_DEF_(bitwise_and, and_impl)
GPSIMD_BINARY_DEF_(bitwise_or, or_impl)
#undef GPSIMD_BINARY_DEF_

/* pow: integral ** integral stays integral (negative exponent faults, as in
 * PyTorch); anything with a floating side is computed in float. */
static Tensor& pow_impl(Tensor* out, const Operand& a, const Operand& b, Tensor& holder) {
    const ScalarType td = tensor_dtype(a, b);
    const bool all_int = a.integral() && b.integral();
    TensorImpl* r = prepare("pow", out, holder, a, b, all_int ? td : float_if_integral(td));
    const bool int_math = all_int && c10::isIntegralType(r->dtype);
    run(r, a, b, int_math, [](double x, double y) { return double(powf(float(x), float(y))); },
        [](int64_t x, int64_t y) { return int_pow("pow", x, y); });
    return out ? *out : holder;
}

Tensor pow(const Tensor& self, const Scalar& exponent) {
    Tensor h;
    return pow_impl(nullptr, of(self, "pow"), of(exponent), h);
}
Tensor pow(const Scalar& self, const Tensor& exponent) {
    Tensor h;
    return pow_impl(nullptr, of(self), of(exponent, "pow"), h);
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
    Tensor h;
    return pow_impl(nullptr, of(self, "pow"), of(exponent, "pow"), h);
}
Tensor& pow_out(Tensor& result, const Tensor& self, const Scalar& exponent) {
    Tensor h;
    return pow_impl(&result, of(self, "pow"), of(exponent), h);
}
Tensor& pow_out(Tensor& result, const Scalar& self, const Tensor& exponent) {
    Tensor h;
    return pow_impl(&result, of(self), of(exponent, "pow"), h);
}
Tensor& pow_out(Tensor& result, const Tensor& self, const Tensor& exponent) {
    Tensor h;
    return pow_impl(&result, of(self, "pow"), of(exponent, "pow"), h);
}

/* clamp(self, min, max) = min(max(self, min), max); NaN where self or a bound is
 * NaN (torch.clamp's rule since PyTorch 1.12, and numpy.clip's). */
static Tensor& clamp_impl(Tensor* out, const Tensor& self, const Scalar& lo, const Scalar& hi, Tensor& holder) {
    Operand a = of(self, "clamp");
    TensorImpl* r = prepare("clamp", out, holder, a, a, a.t->dtype);
    const bool int_math = a.integral() && lo.isIntegral(false) && hi.isIntegral(false) &&
                          c10::isIntegralType(r->dtype);
    const double dl = lo.toDouble(), dh = hi.toDouble();
    const int64_t il = lo.toLong(), ih = hi.toLong();
    /* uint64 elements (read as int64 bit patterns) compare unsigned; a
     * negative bound is below all of them */
    const bool u64 = a.t->dtype == ScalarType::UInt64;
    run(r, a, a, int_math,
        [dl, dh](double x, double) {
            if (x != x) return x;
            if (dl != dl || dh != dh) return dl + dh;   /* a NaN bound: NaN, as torch.clamp */
            const double y = x < dl ? dl : x;
            return y > dh ? dh : y;
        },
        [il, ih, u64](int64_t x, int64_t) {
            const bool below = u64 ? il > 0 && uint64_t(x) < uint64_t(il) : x < il;
            const int64_t y = below ? il : x;
            const bool above = u64 ? ih < 0 || uint64_t(y) > uint64_t(ih) : y > ih;
            return above ? ih : y;
        });
    return out ? *out : holder;
}

Tensor clamp(const Tensor& self, const Scalar& min, const Scalar& max) {
    Tensor h;
    return clamp_impl(nullptr, self, min, max, h);
}
Tensor& clamp_out(Tensor& result, const Tensor& self, const Scalar& min, const Scalar& max) {
    Tensor h;
    return clamp_impl(&result, self, min, max, h);
}

}  // namespace at
