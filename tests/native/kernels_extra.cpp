// More test kernels: int / long long arguments, printf, and a probe that
// makes the runtime fault in each documented way.
#include <stdio.h>
#include <string.h>

#include <stdexcept>

#include <custom_op.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

// affine(Tensor x int64, int k, long long m) -> Tensor: x * m + k.
torch::Tensor affine(const torch::Tensor& x, int k, long long m) {
    printf("affine: k=%d m=%lld n=%lld\n", k, m, (long long)x.numel());
    torch::Tensor out = torch::empty(x.sizes(), x.scalar_type());
    auto xa = x.accessor<int64_t, 1>();
    auto oa = out.accessor<int64_t, 1>();
    for (int64_t i = 0; i < x.numel(); ++i) oa[i] = xa[i] * m + k;
    return out;
}

static volatile int g_depth_limit = 1 << 30;

static int recurse(volatile char* p, int depth) {
    if (depth > g_depth_limit) return 0;
    volatile char frame[512];
    frame[0] = p ? p[0] : 0;
    return depth + recurse(frame, depth + 1) + frame[0];
}

// probe(Tensor x float32, int mode) -> Tensor
torch::Tensor probe(const torch::Tensor& x, int mode) {
    switch (mode) {
    case 0: {  // standard accessor one past the end
        auto a = x.accessor<float, 1>();
        float v = a[x.numel()];
        return torch::full({1}, v, torch::kFloat);
    }
    case 1: {  // tcm range past the end
        float buf[8];
        x.tcm_accessor().tensor_to_tcm<float>(buf, 8, 4);
        return torch::zeros({1}, torch::kFloat);
    }
    case 2: {  // tcm pool exhaustion: count 1 KiB blocks until nullptr
        void* blocks[64];
        int n = 0;
        while (n < 64 && (blocks[n] = torch::neuron::tcm_malloc(1024)) != nullptr) ++n;
        void* too_big = torch::neuron::tcm_malloc(16385);
        for (int i = 0; i < n; ++i) torch::neuron::tcm_free(blocks[i]);
        void* again = torch::neuron::tcm_malloc(16384);
        torch::Tensor out = torch::zeros({3}, torch::kFloat);
        auto o = out.accessor<float, 1>();
        o[0] = float(n);
        o[1] = too_big == nullptr ? 1.0f : 0.0f;
        o[2] = again != nullptr ? 1.0f : 0.0f;
        torch::neuron::tcm_free(again);
        return out;
    }
    case 3: {  // double tcm_free
        void* p = torch::neuron::tcm_malloc(64);
        torch::neuron::tcm_free(p);
        torch::neuron::tcm_free(p);
        return torch::zeros({1}, torch::kFloat);
    }
    case 4: {  // tcm_free of a foreign pointer
        static char not_tcm[16];
        torch::neuron::tcm_free(not_tcm);
        return torch::zeros({1}, torch::kFloat);
    }
    case 5: {  // accessor element type does not match the dtype
        auto a = x.accessor<int32_t, 1>();
        return torch::full({1}, a[0], torch::kFloat);
    }
    case 6:
        throw std::runtime_error("boom");
    case 7: {  // 2-D accessor past the end of a [2, 3] tensor
        auto a = x.accessor<float, 2>();
        return torch::full({1}, a[2][1], torch::kFloat);
    }
    case 8:
        return torch::full({1}, float(recurse(nullptr, 0)), torch::kFloat);
    case 9: {
        static volatile uintptr_t bad_addr = 16;
        volatile int* bad = reinterpret_cast<volatile int*>(bad_addr);
        *bad = 1;
        return torch::zeros({1}, torch::kFloat);
    }
    case 10: {  // scratch window exhaustion
        torch::Tensor a = torch::empty({65535, 64}, torch::kFloat);
        torch::Tensor b = torch::empty({65535, 64}, torch::kFloat);
        torch::Tensor c = torch::empty({65535, 64}, torch::kFloat);
        return torch::zeros({1}, torch::kFloat);
    }
    case 11:
        return torch::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}, torch::kFloat);
    case 12:
        return torch::zeros({70000, 1, 1, 1, 1}, torch::kFloat);  // rank 5: dims <= 65535
    case 13: {  // 200000 bytes of printf into the 128 KiB ring
        for (int i = 0; i < 20000; ++i) printf("line %04d\n", i % 10000);
        return torch::zeros({1}, torch::kFloat);
    }
    case 14: {  // factories, sizes(), fill_, eye, full; scratch freed with the last handle
        std::vector<int64_t> shape = {2, 3};
        torch::Tensor t = torch::ones(shape, torch::kFloat);
        torch::Tensor u = torch::full(t.sizes(), 2.5, torch::TensorOptions().dtype(torch::kFloat));
        torch::Tensor e = torch::eye(3, 4, torch::kFloat);
        torch::Tensor h = torch::zeros({4}, torch::kHalf);
        h.fill_(1.5);
        auto ha = h.accessor<c10::Half, 1>();
        float acc = 0;
        auto ta = t.accessor<float, 2>();
        auto ua = u.accessor<float, 2>();
        auto ea = e.accessor<float, 2>();
        for (int64_t i = 0; i < t.sizes()[0]; ++i)
            for (int64_t j = 0; j < t.sizes()[t.dim() - 1]; ++j) acc += ta[i][j] * ua[i][j];
        for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 4; ++j) acc += ea[i][j] * 100.0f;
        for (int64_t i = 0; i < 4; ++i) acc += float(ha[i]);
        int64_t dims = 0;
        for (int64_t s : u.sizes()) dims += s;
        torch::Tensor out = torch::zeros({4}, torch::kFloat);
        auto o = out.accessor<float, 1>();
        o[0] = acc;                       // 6*2.5 + 300 + 6 = 321
        o[1] = float(dims);               // 5
        o[2] = float(u.dim());            // 2
        o[3] = u.dtype() == torch::kFloat && h.scalar_type() == torch::kHalf ? 1.0f : 0.0f;
        return out;
    }
    case 15:  // return an input: written back through the staging copy
        return x;
    case 16: {  // element-wise operations; rows of 10 (x has 10 elements)
        torch::Tensor out = torch::empty({24, 10}, torch::kFloat);
        int row = 0;
        auto put = [&](const torch::Tensor& r) {
            torch::Tensor f = torch::zeros({10}, torch::kFloat);
            torch::add_out(f, r, 0);  // converts into float32
            auto fa = f.accessor<float, 1>();
            auto oa = out.accessor<float, 2>();
            for (int i = 0; i < 10; ++i) oa[row][i] = fa[i];
            ++row;
        };
        torch::Tensor ax1 = torch::add(torch::abs(x), 1.0);
        put(torch::abs(x));                          // 0
        put(torch::ceil(x));                         // 1
        put(torch::floor(x));                        // 2
        put(torch::sin(x));                          // 3
        put(torch::cos(x));                          // 4
        put(torch::exp(x));                          // 5
        put(torch::clamp(x, -1, 1.5));               // 6
        put(torch::add(x, torch::mul(x, 2.0), 0.5)); // 7
        put(torch::sub(x, 1.5));                     // 8
        put(torch::div(x, 4.0));                     // 9
        put(torch::pow(x, 2));                       // 10
        put(torch::pow(2.0, x));                     // 11
        put(torch::log(ax1));                        // 12
        put(torch::log2(ax1));                       // 13
        put(torch::log10(ax1));                      // 14
        torch::Tensor xi = torch::empty({10}, torch::kInt);
        auto xa = x.accessor<float, 1>();
        auto xia = xi.accessor<int32_t, 1>();
        for (int i = 0; i < 10; ++i) xia[i] = int(xa[i] * 10.0f);
        put(torch::bitwise_and(xi, 0xF));            // 15
        put(torch::bitwise_or(xi, torch::full({10}, 0x30, torch::kInt)));  // 16
        put(torch::bitwise_not(xi));                 // 17
        put(torch::mul(xi, xi));                     // 18
        put(torch::pow(xi, 2));                      // 19
        put(torch::div(xi, 4));                      // 20
        torch::Tensor o = torch::zeros({10}, torch::kFloat);
        torch::sub_out(o, x, torch::abs(x), 2);      // 21: x - 2|x|
        put(o);
        put(torch::clamp(x, NAN, 1.5));              // 22: a NaN bound gives NaN
        put(torch::clamp(x, -1, NAN));               // 23
        return out;
    }
    case 18: {  // stream accessors: out = 3 * x
        torch::Tensor out = torch::empty(x.sizes(), torch::kFloat);
        auto in = x.read_stream_accessor<float>();
        auto o = out.write_stream_accessor<float>();
        for (int64_t i = 0; i < x.numel(); ++i) o.write(3.0f * in.read());
        o.close();
        in.close();
        return out;
    }
    case 19: {  // reading a stream past its end
        auto in = x.read_stream_accessor<float>();
        float acc = 0;
        for (int64_t i = 0; i <= x.numel(); ++i) acc += in.read();
        return torch::full({1}, acc, torch::kFloat);
    }
    case 17:  // shapes must match
        return torch::add(x, torch::zeros({3}, torch::kFloat));
    case 20: {  // a transfer of 12 bytes into a TCM block of 10 (16 once rounded)
        float* b = static_cast<float*>(torch::neuron::tcm_malloc(10));
        x.tcm_accessor().tensor_to_tcm<float>(b, 0, 3);
        return torch::zeros({1}, torch::kFloat);
    }
    case 21: {  // a transfer out of a freed TCM block
        float* b = static_cast<float*>(torch::neuron::tcm_malloc(64));
        torch::neuron::tcm_free(b);
        torch::Tensor out = torch::zeros({1}, torch::kFloat);
        out.tcm_accessor().tcm_to_tensor<float>(b, 0, 1);
        return out;
    }
    case 23:  // clamp of the uint64 input's elements past 2^63: compared unsigned
        return torch::clamp(x, 0, 1000);
    case 24: {  // int64 elements into the uint64 output: compared signed, as the input's dtype
        torch::Tensor s = torch::empty({2}, torch::kLong);
        auto sa = s.accessor<int64_t, 1>();
        sa[0] = -5;
        sa[1] = 7;
        torch::Tensor out = get_dst_tensor();
        torch::clamp_out(out, s, 0, 1000);
        return out;
    }
    case 22: {  // 64 bytes of HBM scratch copied into 16 bytes of dataram staging
        void* stage = nullptr;
        neuron_dataram_allocate(16, &stage, 4);
        neuron_memcpy(stage, neuron_hbm_allocate(64), 64);
        return torch::zeros({1}, torch::kFloat);
    }
    default:
        return torch::zeros({1}, torch::kFloat);
    }
}
