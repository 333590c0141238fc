// WARNING: AUTO GENERATED DO NOT EDIT
#include "neuron/wrapper_api.h"

at::Tensor relu(const at::Tensor&);
void relu_wrapper() {
    customop_setup(true);
    at::Tensor output = relu( customop_next_tensor() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        asm("j switchBack");
}

int relu_stack_switch() {
    return switch_stack_or_call_wrapper((uint32_t)relu_wrapper);
}

at::Tensor axpy(const at::Tensor&, const at::Tensor&, const at::Scalar&);
void axpy_wrapper() {
    customop_setup(true);
    at::Tensor output = axpy( customop_next_tensor(), customop_next_tensor(), customop_next_scalar() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        asm("j switchBack");
}

int axpy_stack_switch() {
    return switch_stack_or_call_wrapper((uint32_t)axpy_wrapper);
}

at::Tensor mix(const at::Tensor&, int, float, long long);
void mix_wrapper() {
    customop_setup(true);
    at::Tensor output = mix( customop_next_tensor(), customop_next_int(), customop_next_float(), customop_next_longlong() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        asm("j switchBack");
}

int mix_stack_switch() {
    return switch_stack_or_call_wrapper((uint32_t)mix_wrapper);
}

int get_func_cnt() { return 3; }

char const* get_func_name(int idx) {
    switch (idx) {
        case 0: return "relu";
        case 1: return "axpy";
        case 2: return "mix";
        default: return "error";
    }
}

wrapper_fn get_func_ptr(int idx) {
    switch (idx) {
        case 0: return relu_stack_switch;
        case 1: return axpy_stack_switch;
        case 2: return mix_stack_switch;
        default: return 0;
    }
}
