// Test kernels for tests/test_runtime_native.py, written against the
// device API only (<torch/torch.h>, <neuron/neuron-utils.hpp>).
#include <stdio.h>

#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

// relu(Tensor) -> Tensor: a fresh result through the standard accessor;
// written back by customop_return_tensor (staged, chunked when large).
torch::Tensor relu(const torch::Tensor& x) {
    size_t num_elem = x.numel();
    torch::Tensor out = torch::empty({num_elem}, torch::TensorOptions().dtype(torch::kFloat));
    auto in_acc = x.accessor<float, 1>();
    auto out_acc = out.accessor<float, 1>();
    for (int64_t i = 0; i < x.numel(); ++i) out_acc[i] = in_acc[i] > 0.0f ? in_acc[i] : 0.0f;
    return out;
}

// scale(Tensor, float) -> Tensor: TCM staging with tcm_malloc and the TCM
// accessor, any shape (flattened).
torch::Tensor scale(const torch::Tensor& x, float s) {
    torch::Tensor out = torch::zeros(x.sizes(), torch::kFloat);
    const size_t chunk = 1024;
    float* buf = static_cast<float*>(torch::neuron::tcm_malloc(chunk * sizeof(float)));
    auto in = x.tcm_accessor();
    auto o = out.tcm_accessor();
    const size_t n = x.numel();
    for (size_t off = 0; off < n; off += chunk) {
        size_t len = n - off < chunk ? n - off : chunk;
        in.tensor_to_tcm<float>(buf, off, len);
        for (size_t i = 0; i < len; ++i) buf[i] *= s;
        o.tcm_to_tensor<float>(buf, off, len);
    }
    torch::neuron::tcm_free(buf);
    return out;
}

// axpy(Tensor x, Tensor y, Scalar a) -> Tensor: in place into
// get_dst_tensor(), partitioned over the cores (remainder to the last core,
// with a correct start offset).  Returns a wrong-dtype tensor on purpose:
// after get_dst_tensor() the return value must be ignored.
torch::Tensor axpy(const torch::Tensor& x, const torch::Tensor& y, const torch::Scalar& a) {
    torch::Tensor dst = get_dst_tensor();
    const float af = a.toFloat();
    const int64_t n = x.numel();
    const int64_t count = get_cpu_count(), id = get_cpu_id();
    const int64_t part = n / count;
    const int64_t start = part * id;
    const int64_t len = id == count - 1 ? n - start : part;
    float xb[256], yb[256];
    auto xa = x.tcm_accessor();
    auto ya = y.tcm_accessor();
    auto da = dst.tcm_accessor();
    for (int64_t off = start; off < start + len; off += 256) {
        const int64_t m = start + len - off < 256 ? start + len - off : 256;
        xa.tensor_to_tcm<float>(xb, off, m);
        ya.tensor_to_tcm<float>(yb, off, m);
        for (int64_t i = 0; i < m; ++i) xb[i] = af * xb[i] + yb[i];
        da.tcm_to_tensor<float>(xb, off, m);
    }
    return torch::ones({1}, torch::kInt);
}
