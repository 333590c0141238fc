// WARNING: AUTO GENERATED DO NOT EDIT
#include "neuron/wrapper_api.h"

at::Tensor relu(const at::Tensor&);
void relu_wrapper() {
    customop_setup(true);
    at::Tensor output = relu( customop_next_tensor() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        switchBack();
}

int relu_stack_switch() {
    return switch_stack_or_call_wrapper((uintptr_t)relu_wrapper);
}

at::Tensor scale(const at::Tensor&, float);
void scale_wrapper() {
    customop_setup(true);
    at::Tensor output = scale( customop_next_tensor(), customop_next_float() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        switchBack();
}

int scale_stack_switch() {
    return switch_stack_or_call_wrapper((uintptr_t)scale_wrapper);
}

at::Tensor axpy(const at::Tensor&, const at::Tensor&, const at::Scalar&);
void axpy_wrapper() {
    customop_setup(true);
    at::Tensor output = axpy( customop_next_tensor(), customop_next_tensor(), customop_next_scalar() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        switchBack();
}

int axpy_stack_switch() {
    return switch_stack_or_call_wrapper((uintptr_t)axpy_wrapper);
}

at::Tensor affine(const at::Tensor&, int, long long);
void affine_wrapper() {
    customop_setup(true);
    at::Tensor output = affine( customop_next_tensor(), customop_next_int(), customop_next_longlong() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        switchBack();
}

int affine_stack_switch() {
    return switch_stack_or_call_wrapper((uintptr_t)affine_wrapper);
}

at::Tensor probe(const at::Tensor&, int);
void probe_wrapper() {
    customop_setup(true);
    at::Tensor output = probe( customop_next_tensor(), customop_next_int() );
    customop_return_tensor(output);
    customop_cleanup();
    if (switched_stack)
        switchBack();
}

int probe_stack_switch() {
    return switch_stack_or_call_wrapper((uintptr_t)probe_wrapper);
}

int get_func_cnt() { return 5; }

char const* get_func_name(int idx) {
    switch (idx) {
        case 0: return "relu";
        case 1: return "scale";
        case 2: return "axpy";
        case 3: return "affine";
        case 4: return "probe";
        default: return "error";
    }
}

wrapper_fn get_func_ptr(int idx) {
    switch (idx) {
        case 0: return relu_stack_switch;
        case 1: return scale_stack_switch;
        case 2: return axpy_stack_switch;
        case 3: return affine_stack_switch;
        case 4: return probe_stack_switch;
        default: return 0;
    }
}
