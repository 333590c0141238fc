// A multicore kernel laid out like AWS's public multicore sample, with its
// remainder bug: the last core takes the remainder of numel / cores but
// starts at partition * id with its enlarged partition, so it reads and
// writes past the end and leaves the elements before it unwritten. Eight
// elements over eight cores hide it.
#include <stdint.h>
#include <stdlib.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

torch::Tensor relu_forward(const torch::Tensor& t_in) {
    torch::Tensor t_out = get_dst_tensor();
    const size_t numel = t_in.numel(), id = get_cpu_id(), cores = get_cpu_count();
    size_t partition = numel / cores;
    if (id == cores - 1) partition += numel % cores;
    const size_t chunk = 256;
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof(float) * chunk);
    if (buf == nullptr) return t_out;
    auto in_acc = t_in.tcm_accessor();
    auto out_acc = t_out.tcm_accessor();
    for (size_t i = 0; i < partition; i += chunk) {
        const size_t n = partition - i < chunk ? partition - i : chunk;
        in_acc.tensor_to_tcm<float>(buf, partition * id + i, n);
        for (size_t j = 0; j < n; j++) buf[j] = buf[j] > 0.0f ? buf[j] : 0.0f;
        out_acc.tcm_to_tensor<float>(buf, partition * id + i, n);
    }
    torch::neuron::tcm_free(buf);
    return t_out;
}
