/*
 * torchneuron/register.h -- the registration macro of a shape source
 * (docs/shape-functions.md), so that a shape source written for
 * torch-neuronx's custom_op.load(..., shape_srcs=[...]) compiles unmodified
 * for this project's host shape library:
 *
 *     #include <torch/torch.h>
 *     #include "torchneuron/register.h"
 *
 *     torch::Tensor relu_fwd_shape(torch::Tensor t_in) {
 *         return torch::zeros(t_in.sizes(), torch::kFloat);
 *     }
 *
 *     NEURON_LIBRARY(my_ops, m) {
 *         m.def("relu_forward", &relu_fwd_shape, "relu_forward");
 *     }
 *
 * NEURON_LIBRARY(<lib_name>, m) opens the library torch calls as
 * torch.ops.<lib_name>; each m.def("<op_name>", &<shape_fn>, "<kernel_fn>")
 * registers one op: the name torch calls it by, its shape function (run on
 * the host, with tensors that have sizes and a dtype but no data), and the
 * name of the kernel function that runs on the device (older samples give
 * the op name twice).  The block runs when the shape library is loaded; it
 * records, for each op, the source line of its m.def and the C++ type of
 * each shape-function parameter (gpsimd_host/shape_abi.h), so that the
 * build can check them against the manifest and call the shape function
 * for every test vector.
 *
 * Parameter types a call can make (GPSIMD_SHAPE_PARAM_*): torch::Tensor
 * (by value, const&, &, &&), torch::Scalar (likewise), double, float, int,
 * int64_t, long long; the return type is torch::Tensor.  Anything else is
 * recorded with its spelling and reported by the build's registration check.
 */
#ifndef TORCHNEURON_REGISTER_H
#define TORCHNEURON_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include <torch/torch.h>

#include "gpsimd_host/shape_abi.h"

/* A shape function is compiled against the host's full PyTorch by
 * torch-neuronx, where a factory's options default to float32; a kernel
 * must give the dtype (the device requires one, torch/detail/ops.h).  The
 * defaults below are added (a later declaration may add default arguments)
 * only where this header is included: in shape sources. */
namespace at {
Tensor empty(IntArrayRef sizes, const TensorOptions& options = TensorOptions());
Tensor zeros(IntArrayRef sizes, const TensorOptions& options = TensorOptions());
Tensor ones(IntArrayRef sizes, const TensorOptions& options = TensorOptions());
Tensor full(IntArrayRef sizes, const Scalar& fill_value, const TensorOptions& options = TensorOptions());
Tensor eye(int64_t n, const TensorOptions& options = TensorOptions());
}  // namespace at

namespace torchneuron {
namespace detail {

/* The compiler's spelling of T, inside "... [with T = <spelling>]". */
template <typename T>
const char* type_spelling() { return __PRETTY_FUNCTION__; }

/* The kind and spelling of one parameter type. */
template <typename T>
struct Param {
    static constexpr uint32_t kind = GPSIMD_SHAPE_PARAM_OTHER;
    static const char* spelling() { return type_spelling<T>(); }
};
#define TORCHNEURON_PARAM_(T, K, S)                                   \
    template <>                                                       \
    struct Param<T> {                                                 \
        static constexpr uint32_t kind = GPSIMD_SHAPE_PARAM_##K;      \
        static const char* spelling() { return S; }                   \
    };
TORCHNEURON_PARAM_(at::Tensor, TENSOR, "torch::Tensor")
TORCHNEURON_PARAM_(const at::Tensor&, TENSOR, "const torch::Tensor&")
TORCHNEURON_PARAM_(at::Tensor&, TENSOR, "torch::Tensor&")
TORCHNEURON_PARAM_(at::Tensor&&, TENSOR, "torch::Tensor&&")
TORCHNEURON_PARAM_(c10::Scalar, SCALAR, "torch::Scalar")
TORCHNEURON_PARAM_(const c10::Scalar&, SCALAR, "const torch::Scalar&")
TORCHNEURON_PARAM_(c10::Scalar&, SCALAR, "torch::Scalar&")
TORCHNEURON_PARAM_(c10::Scalar&&, SCALAR, "torch::Scalar&&")
TORCHNEURON_PARAM_(double, DOUBLE, "double")
TORCHNEURON_PARAM_(float, FLOAT, "float")
TORCHNEURON_PARAM_(int, INT, "int")
TORCHNEURON_PARAM_(int64_t, INT64, "int64_t")
TORCHNEURON_PARAM_(long long, LONG_LONG, "long long")
#undef TORCHNEURON_PARAM_
static_assert(!std::is_same<int64_t, long long>::value,
              "this header expects an LP64 host, where int64_t and long long differ");

/* A registration's entry point: make the arguments, call, keep the result. */
typedef void (*Invoker)(void (*fn)(), const gpsimd_shape_arg* args, at::Tensor* result);

/* The runtime's registry (src/shape.cpp). */
void register_def(const char* op, void (*fn)(), const char* kernel, const char* file, unsigned line,
                  unsigned nparams, const uint32_t* kinds, const char* const* spellings,
                  uint32_t return_kind, const char* return_spelling, Invoker invoker);
/* An argument of the wrong kind for its parameter: a fault naming both. */
[[noreturn]] void bad_argument(unsigned index, const char* parameter);

/* One argument, made from its gpsimd_shape_arg (T is the decayed type). */
template <typename T>
struct Make;
template <>
struct Make<at::Tensor> {
    static at::Tensor make(const gpsimd_shape_arg& a, unsigned i) {
        if (a.kind != GPSIMD_SHAPE_ARG_TENSOR) bad_argument(i, "torch::Tensor");
        return at::Tensor(static_cast<c10::TensorImpl*>(gpsimd_shape_meta_tensor(a.dtype, a.sizes, a.ndim)));
    }
};
template <>
struct Make<c10::Scalar> {
    static c10::Scalar make(const gpsimd_shape_arg& a, unsigned i) {
        if (a.kind == GPSIMD_SHAPE_ARG_FLOAT) return c10::Scalar(a.f);
        if (a.kind != GPSIMD_SHAPE_ARG_INT) bad_argument(i, "torch::Scalar");
        return c10::Scalar(int64_t(a.i));
    }
};
template <typename N>
struct MakeNumber {
    static N make(const gpsimd_shape_arg& a, unsigned i) {
        if (a.kind == GPSIMD_SHAPE_ARG_FLOAT) return N(a.f);
        if (a.kind != GPSIMD_SHAPE_ARG_INT) bad_argument(i, Param<N>::spelling());
        return N(a.i);
    }
};
template <> struct Make<double> : MakeNumber<double> {};
template <> struct Make<float> : MakeNumber<float> {};
template <> struct Make<int> : MakeNumber<int> {};
template <> struct Make<int64_t> : MakeNumber<int64_t> {};
template <> struct Make<long long> : MakeNumber<long long> {};

template <typename R, typename... A, size_t... I>
void invoke_with(void (*erased)(), const gpsimd_shape_arg* args, at::Tensor* result, std::index_sequence<I...>) {
    R (*fn)(A...) = reinterpret_cast<R (*)(A...)>(erased);
    std::tuple<typename std::decay<A>::type...> values{Make<typename std::decay<A>::type>::make(args[I], I)...};
    (void)values;
    (void)args;
    *result = fn(static_cast<A>(std::get<I>(values))...);
}

template <typename R, typename... A>
void invoke(void (*erased)(), const gpsimd_shape_arg* args, at::Tensor* result) {
    invoke_with<R, A...>(erased, args, result, std::index_sequence_for<A...>());
}

constexpr bool all_of() { return true; }
template <typename... B>
constexpr bool all_of(bool first, B... rest) { return first && all_of(rest...); }

template <typename R, typename... A>
Invoker invoker_for(std::true_type) { return &invoke<R, A...>; }
template <typename R, typename... A>
Invoker invoker_for(std::false_type) { return nullptr; }

class LibraryInit;
}  // namespace detail

/* The `m` of NEURON_LIBRARY(<lib_name>, m). */
class Library {
 public:
    /* Register op `op` with its shape function `fn` and the name of its
     * kernel function `kernel`.  (The line and file default to the call's.) */
    template <typename R, typename... A>
    Library& def(const char* op, R (*fn)(A...), const char* kernel, unsigned line = __builtin_LINE(),
                 const char* file = __builtin_FILE()) {
        static const uint32_t kinds[sizeof...(A) + 1] = {detail::Param<A>::kind..., 0u};
        static const char* const spellings[sizeof...(A) + 1] = {detail::Param<A>::spelling()..., nullptr};
        constexpr bool tensor_return = std::is_same<R, at::Tensor>::value;
        constexpr bool callable =
            tensor_return && detail::all_of((detail::Param<A>::kind != GPSIMD_SHAPE_PARAM_OTHER)...);
        detail::register_def(op, reinterpret_cast<void (*)()>(fn), kernel, file, line, unsigned(sizeof...(A)),
                             kinds, spellings,
                             tensor_return ? uint32_t(GPSIMD_SHAPE_PARAM_TENSOR) : uint32_t(GPSIMD_SHAPE_PARAM_OTHER),
                             tensor_return ? "torch::Tensor" : detail::type_spelling<R>(),
                             detail::invoker_for<R, A...>(std::integral_constant<bool, callable>()));
        return *this;
    }

 private:
    Library() {}
    friend class detail::LibraryInit;
};

namespace detail {
/* Runs one NEURON_LIBRARY block at load time. */
class LibraryInit {
 public:
    LibraryInit(const char* name, void (*init)(Library&), const char* file, unsigned line) {
        gpsimd_shape_begin_library(name, file, line);
        Library m;
        init(m);
        gpsimd_shape_end_library();
    }
};
}  // namespace detail
}  // namespace torchneuron

#define NEURON_LIBRARY(name, m)                                                                    \
    static void TORCHNEURON_LIBRARY_init_##name(::torchneuron::Library& m);                        \
    static const ::torchneuron::detail::LibraryInit TORCHNEURON_LIBRARY_static_init_##name(        \
        #name, &TORCHNEURON_LIBRARY_init_##name, __FILE__, __LINE__);                              \
    void TORCHNEURON_LIBRARY_init_##name(::torchneuron::Library& m)

#endif  // TORCHNEURON_REGISTER_H
