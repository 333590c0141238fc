// driver.cpp -- a stand-in for the Python device model, for the native
// runtime tests: it loads core objects with dlopen(RTLD_LOCAL), builds HBM
// regions, argument streams and the output descriptor byte by byte at the
// abi.h offsets, binds a core, launches get_func_ptr(i)(), and prints one
// JSON object per scenario (status, fault kind, message, report counters,
// printf text).  Inputs and outputs are written as raw little-endian files
// into OUTDIR for numpy to check.
//
// usage: driver OUTDIR LIBDIR SCENARIO
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include "gpsimd_host/abi.h"
#include "gpsimd_host/faults.h"
#include "torch/detail/scalar_type.h"

typedef int (*wrapper_fn)();

static std::string g_outdir, g_libdir;

// ---- HBM -------------------------------------------------------------------

struct Region {
    uint64_t addr;
    std::vector<uint8_t> bytes;
};

struct Hbm {
    std::vector<Region*> regions;
    uint64_t next = 0x100000000ull;
    Region* alloc(size_t n) {
        Region* r = new Region;
        r->addr = next;
        r->bytes.assign(n ? n : 1, 0);
        next += (n + 0xffff) & ~uint64_t(0xffff);
        next += 0x10000;  // unmapped gap between regions
        regions.push_back(r);
        return r;
    }
    template <typename T>
    Region* put(const std::vector<T>& v) {
        Region* r = alloc(v.size() * sizeof(T));
        memcpy(r->bytes.data(), v.data(), v.size() * sizeof(T));
        return r;
    }
};

// ---- descriptors and the argument stream ------------------------------------

static arg_tensor_t hbm_desc(uint8_t dtype, uint64_t addr, uint32_t num_elem, std::vector<uint32_t> shape) {
    arg_tensor_t d;
    memset(&d, 0, sizeof d);
    d.location = NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM;
    d.framework_shape_type = NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE8D;
    d.dtype = dtype;
    bool fits8 = shape.size() <= 8;
    for (uint32_t s : shape) fits8 = fits8 && s <= 65535;
    if (fits8) {
        for (size_t i = 0; i < shape.size(); ++i) d.framework_shape.dims8[i] = uint16_t(shape[i]);
    } else {
        d.framework_shape_type = NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE4D;
        for (size_t i = 0; i < shape.size(); ++i) d.framework_shape.dims4[i] = shape[i];
    }
    d.storage.hbm.addr = addr;
    d.storage.hbm.num_elem = num_elem;
    return d;
}

static std::vector<uint8_t> stream_of(const std::vector<arg_tensor_t>& args, uint32_t declared = ~0u) {
    std::vector<uint8_t> s(GPSIMD_ARG_STREAM_ARGS_OFFSET + args.size() * sizeof(arg_tensor_t), 0);
    uint32_t n = declared == ~0u ? uint32_t(args.size()) : declared;
    memcpy(&s[0], &n, 4);
    for (size_t i = 0; i < args.size() && i < GPSIMD_MAX_ARGS; ++i) s[8 + i] = NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_TENSOR;
    for (size_t i = 0; i < args.size(); ++i)
        memcpy(&s[GPSIMD_ARG_STREAM_ARGS_OFFSET + i * sizeof(arg_tensor_t)], &args[i], sizeof(arg_tensor_t));
    return s;
}

// ---- core objects ----------------------------------------------------------

struct CoreObject {
    void* h = nullptr;
    int (*bind)(const gpsimd_core_binding*) = nullptr;
    int (*cnt)() = nullptr;
    const char* (*name)(int) = nullptr;
    wrapper_fn (*ptr)(int) = nullptr;
    const gpsimd_lsp_info* (*lsp)() = nullptr;
    wrapper_fn op(const char* op_name) {
        for (int i = 0; i < cnt(); ++i)
            if (!strcmp(name(i), op_name)) return ptr(i);
        fprintf(stderr, "no op %s\n", op_name);
        exit(2);
    }
};

static CoreObject load(const std::string& file) {
    CoreObject c;
    std::string path = g_libdir + "/" + file;
    c.h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!c.h) { fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror()); exit(2); }
    c.bind = (int (*)(const gpsimd_core_binding*))dlsym(c.h, "gpsimd_bind_core");
    c.cnt = (int (*)())dlsym(c.h, "_Z12get_func_cntv");
    c.name = (const char* (*)(int))dlsym(c.h, "_Z13get_func_namei");
    c.ptr = (wrapper_fn (*)(int))dlsym(c.h, "_Z12get_func_ptri");
    c.lsp = (const gpsimd_lsp_info* (*)())dlsym(c.h, "gpsimd_linker_spec_info");
    if (!c.bind || !c.cnt || !c.name || !c.ptr || !c.lsp) { fprintf(stderr, "missing symbols in %s\n", path.c_str()); exit(2); }
    return c;
}

// One core's private memories.
struct CoreMem {
    std::vector<uint8_t> scratch, dataram, printf_buf;
    gpsimd_core_report report;
    CoreMem(size_t scratch_bytes) : scratch(scratch_bytes), dataram(GPSIMD_DATARAM_SIZE), printf_buf(GPSIMD_PRINTF_CAPACITY) {
        memset(&report, 0, sizeof report);
    }
};

struct Launch {
    int bind_rc = 0;
    int status = -1;
    gpsimd_core_report report;
    std::string printf_text;
};

static gpsimd_core_binding make_binding(Hbm& hbm, CoreMem& m, uint32_t core_id, uint32_t core_count,
                                        const std::vector<uint8_t>& stream, const arg_tensor_t* out,
                                        uint64_t sbuf_base = 0) {
    gpsimd_core_binding b;
    memset(&b, 0, sizeof b);
    b.abi_version = GPSIMD_HOST_ABI_VERSION;
    b.core_id = core_id;
    b.core_count = core_count;
    b.num_regions = uint32_t(hbm.regions.size());
    for (size_t i = 0; i < hbm.regions.size(); ++i) {
        b.regions[i].device_addr = hbm.regions[i]->addr;
        b.regions[i].size = hbm.regions[i]->bytes.size();
        b.regions[i].host = (uint64_t)(uintptr_t)hbm.regions[i]->bytes.data();
    }
    b.scratch_host = (uint64_t)(uintptr_t)m.scratch.data();
    b.dataram_host = (uint64_t)(uintptr_t)m.dataram.data();
    b.sbuf_window_base = sbuf_base;
    b.arg_stream_host = (uint64_t)(uintptr_t)stream.data();
    b.retval_host = (uint64_t)(uintptr_t)out;
    b.printf_host = (uint64_t)(uintptr_t)m.printf_buf.data();
    b.report_host = (uint64_t)(uintptr_t)&m.report;
    b.stack_scale = 0;
    return b;
}

static Launch launch(CoreObject& obj, const char* op, Hbm& hbm, const std::vector<uint8_t>& stream,
                     const arg_tensor_t* out, uint32_t core_id = 0, uint32_t core_count = 1,
                     uint64_t sbuf_base = 0) {
    size_t scratch_bytes = obj.lsp()->scratch_size;
    CoreMem* m = new CoreMem(scratch_bytes);  // leaked on purpose: tiny test program
    gpsimd_core_binding b = make_binding(hbm, *m, core_id, core_count, stream, out, sbuf_base);
    Launch L;
    L.bind_rc = obj.bind(&b);
    L.status = obj.op(op)();
    L.report = m->report;
    const gpsimd_core_report& r = m->report;
    for (uint64_t i = 0; i < r.printf_len; ++i)
        L.printf_text.push_back(char(m->printf_buf[(r.printf_head + i) % GPSIMD_PRINTF_CAPACITY]));
    return L;
}

// ---- output -----------------------------------------------------------------

static const char* gpsimd_fault_name_local(uint32_t kind) {
    switch (kind) {
#define NAME_(name, value) case value: return #name;
        GPSIMD_FAULT_KINDS(NAME_)
#undef NAME_
    default: return "UNKNOWN";
    }
}

static std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += char(c); }
        else if (c == '\n') o += "\\n";
        else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += char(c);
    }
    return o + "\"";
}

static void save(const std::string& name, const void* data, size_t n) {
    std::string path = g_outdir + "/" + name + ".bin";
    FILE* f = fopen(path.c_str(), "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}
static void save(const std::string& name, const Region* r) { save(name, r->bytes.data(), r->bytes.size()); }

static void emit(const Launch& L, const std::string& extra = "") {
    const gpsimd_core_report& r = L.report;
    std::string text = L.printf_text.size() > 200 ? L.printf_text.substr(0, 200) : L.printf_text;
    printf("{\"bind_rc\": %d, \"status\": %d, \"report_status\": %u, \"kind\": %u, \"kind_name\": %s, "
           "\"message\": %s, \"printf_total\": %llu, \"printf_len\": %llu, \"printf_head\": %llu, "
           "\"tcm_peak\": %llu, \"scratch_peak\": %llu, \"dataram_peak\": %llu, \"printf_start\": %s%s}\n",
           L.bind_rc, L.status, r.status, r.fault_kind, json_str(gpsimd_fault_name_local(r.fault_kind)).c_str(),
           json_str(r.message).c_str(), (unsigned long long)r.printf_total, (unsigned long long)r.printf_len,
           (unsigned long long)r.printf_head, (unsigned long long)r.tcm_peak, (unsigned long long)r.scratch_peak,
           (unsigned long long)r.dataram_peak, json_str(text).c_str(), extra.c_str());
    if (!L.printf_text.empty()) save("printf", L.printf_text.data(), L.printf_text.size());
}

// ---- data -------------------------------------------------------------------

static uint32_t g_seed = 12345;
static float frand() {
    g_seed = g_seed * 1664525u + 1013904223u;
    return float(int32_t(g_seed >> 8) % 2000001 - 1000000) / 250000.0f;  // [-4, 4]
}
static std::vector<float> randv(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = frand();
    return v;
}

// ---- scenarios ------------------------------------------------------------

static const char* SINGLE = "lib_single.so";

// Run a unary float32 op on x (n elements) with a float32 output of n elements.
// With scale_by != 0 a float argument follows (the scale op).
static void unary(const char* op, size_t n, float scale_by = 0.0f) {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    Region* x = hbm.put(randv(n));
    Region* y = hbm.alloc(n * 4);
    Region* f = hbm.put(std::vector<float>{scale_by});
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, y->addr, uint32_t(n), {uint32_t(n)});
    std::vector<arg_tensor_t> args = {hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, uint32_t(n), {uint32_t(n)})};
    if (scale_by != 0.0f) args.push_back(hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, f->addr, 1, {1}));
    auto s = stream_of(args);
    Launch L = launch(obj, op, hbm, s, &out);
    save("x", x);
    save("out", y);
    emit(L);
}

static void probe(int mode, std::vector<uint32_t> shape = {10}, uint8_t out_dtype = NEURON_ISA_TPB_DTYPE_FP32,
                  uint32_t out_n = 1) {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    uint32_t n = 1;
    for (uint32_t d : shape) n *= d;
    Region* x = hbm.put(randv(n));
    Region* k = hbm.put(std::vector<int32_t>{mode});
    Region* y = hbm.alloc(out_n * 4);
    arg_tensor_t out = hbm_desc(out_dtype, y->addr, out_n, {out_n});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, n, shape),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_INT32, k->addr, 1, {1})});
    Launch L = launch(obj, "probe", hbm, s, &out);
    save("x", x);
    save("out", y);
    emit(L);
}

/* probe 23 / 24: clamp of uint64 elements.  A kernel cannot create a
 * uint64 tensor (docs/kernel-api.md "Limits"): the uint64 tensors are the
 * input (23: four elements past and below 2^63) and the output (24). */
static void probe_u64(int mode) {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    Region* x = hbm.put(std::vector<uint64_t>{5, 2000, (uint64_t(1) << 63) + 5, ~uint64_t(0)});
    Region* k = hbm.put(std::vector<int32_t>{mode});
    const uint32_t out_n = mode == 23 ? 4 : 2;
    Region* y = hbm.alloc(out_n * 8);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_UINT64, y->addr, out_n, {out_n});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_UINT64, x->addr, 4, {4}),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_INT32, k->addr, 1, {1})});
    Launch L = launch(obj, "probe", hbm, s, &out);
    save("out", y);
    emit(L);
}

static void axpy_scenario(const std::string& which) {
    const bool multi = which == "axpy_multicore";
    const size_t n = multi ? 1003 : 1000;
    Hbm hbm;
    Region* x = hbm.put(randv(n));
    Region* y = hbm.put(randv(n));
    const uint32_t a_n = which == "scalar_two_elements" ? 2 : 1;
    Region* a = hbm.put(std::vector<float>{2.5f, 7.0f});
    Region* o = hbm.alloc(n * 4);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, o->addr, uint32_t(n), {uint32_t(n)});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, uint32_t(n), {uint32_t(n)}),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, y->addr, uint32_t(n), {uint32_t(n)}),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, a->addr, a_n, {a_n})});
    save("x", x);
    save("y", y);
    if (!multi) {
        CoreObject obj = load(SINGLE);
        Launch L = launch(obj, "axpy", hbm, s, &out);
        save("out", o);
        emit(L);
        return;
    }
    // eight objects, one per core, in one process; each has its own runtime state
    std::vector<CoreObject> cores;
    for (int i = 0; i < 8; ++i) cores.push_back(load("lib_cpu" + std::to_string(i) + ".so"));
    std::string statuses;
    Launch last;
    for (uint32_t i = 0; i < 8; ++i) {
        last = launch(cores[i], "axpy", hbm, s, &out, i, 8);
        statuses += (i ? "," : "") + std::to_string(last.status) + ":" + std::to_string(last.bind_rc);
    }
    save("out", o);
    emit(last, ", \"statuses\": \"" + statuses + "\"");
}

static void affine_scenario() {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    std::vector<int64_t> xv;
    for (int i = 0; i < 100; ++i) xv.push_back(int64_t(i) * 1000003 - 50000000);
    Region* x = hbm.put(xv);
    Region* k = hbm.put(std::vector<int32_t>{-7});
    Region* m = hbm.put(std::vector<int64_t>{30000000000ll});
    Region* y = hbm.alloc(100 * 8);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_INT64, y->addr, 100, {100});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_INT64, x->addr, 100, {100}),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_INT32, k->addr, 1, {1}),
                        hbm_desc(NEURON_ISA_TPB_DTYPE_INT64, m->addr, 1, {1})});
    Launch L = launch(obj, "affine", hbm, s, &out);
    save("x", x);
    save("out", y);
    emit(L);
}

// relu with an SBUF input (4D inline shape) and an out-of-line output shape
static void shape_forms() {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    const uint32_t n = 2 * 3 * 4 * 5;
    Region* sbuf = hbm.alloc(0x1000 + n * 4);
    std::vector<float> xv = randv(n);
    memcpy(sbuf->bytes.data() + 0x1000, xv.data(), n * 4);
    Region* dims = hbm.put(std::vector<int64_t>{n});
    Region* y = hbm.alloc(n * 4);
    arg_tensor_t in;
    memset(&in, 0, sizeof in);
    in.location = NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_SBUF;
    in.framework_shape_type = NEURON_ISA_TPB_CUSTOM_OP_INLINE_SHAPE4D;
    in.dtype = NEURON_ISA_TPB_DTYPE_FP32;
    in.framework_shape.dims4[0] = 2; in.framework_shape.dims4[1] = 3;
    in.framework_shape.dims4[2] = 4; in.framework_shape.dims4[3] = 5;
    in.storage.tpb.addr = 0x1000;
    in.storage.tpb.num_elem = n;
    arg_tensor_t out;
    memset(&out, 0, sizeof out);
    out.location = NEURON_ISA_TPB_CUSTOM_OP_ARG_LOCATION_HBM;
    out.framework_shape_type = NEURON_ISA_TPB_CUSTOM_OP_OUT_OF_LINE_SHAPE;
    out.dtype = NEURON_ISA_TPB_DTYPE_FP32;
    out.framework_shape.out_of_line.addr = dims->addr;
    out.framework_shape.out_of_line.ndim = 1;
    out.storage.hbm.addr = y->addr;
    out.storage.hbm.num_elem = n;
    // the scale kernel reads any shape (flattened) and returns x.sizes()
    Region* f = hbm.put(std::vector<float>{-2.0f});
    auto s = stream_of({in, hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, f->addr, 1, {1})});
    Launch L = launch(obj, "scale", hbm, s, &out, 0, 1, sbuf->addr);
    save("x", xv.data(), n * 4);
    save("out", y);
    emit(L);
}

static void bad_stream(const std::string& which) {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    Region* x = hbm.put(randv(10));
    Region* y = hbm.alloc(40);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, y->addr, 10, {10});
    arg_tensor_t xd = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, 10, {10});
    std::vector<uint8_t> s;
    if (which == "past_arg_count") {
        s = stream_of({xd});  // scale reads a second argument
    } else if (which == "bad_arg_type") {
        s = stream_of({xd, xd});
        s[8 + 1] = NEURON_ISA_TPB_CUSTOM_OP_ARG_TYPE_INVALID;
    } else if (which == "too_many_args") {
        s = stream_of(std::vector<arg_tensor_t>(33, xd));
    } else if (which == "unmapped") {
        arg_tensor_t bad = xd;
        bad.storage.hbm.addr = 0xdead0000ull;
        s = stream_of({bad, xd});
    } else if (which == "fp32r") {
        arg_tensor_t bad = xd;
        bad.dtype = NEURON_ISA_TPB_DTYPE_FP32R;
        s = stream_of({bad, xd});
    } else if (which == "shape_mismatch") {
        arg_tensor_t bad = xd;
        bad.storage.hbm.num_elem = 9;
        s = stream_of({bad, xd});
    }
    Launch L = launch(obj, "scale", hbm, s, &out);
    emit(L);
}

static void dtype_gate() {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    Region* x = hbm.put(randv(10));
    Region* y = hbm.alloc(40);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_INT32, y->addr, 10, {10});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, 10, {10})});
    Launch L = launch(obj, "relu", hbm, s, &out);
    emit(L);
}

static void lsp_mismatch(const std::string& which) {
    Hbm hbm;
    Region* x = hbm.put(randv(10));
    Region* y = hbm.alloc(40);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, y->addr, 10, {10});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, 10, {10})});
    Launch L;
    if (which == "lsp_mismatch") {
        CoreObject obj = load("lib_cpu3.so");
        L = launch(obj, "relu", hbm, s, &out, 5, 8);
    } else if (which == "lsp_single_on_multicore") {
        CoreObject obj = load(SINGLE);
        L = launch(obj, "relu", hbm, s, &out, 2, 8);
    } else {  // lsp_core_count
        CoreObject obj = load("lib_cpu3.so");
        L = launch(obj, "relu", hbm, s, &out, 3, 1);
    }
    emit(L);
}

// Two launches on the same object: per-launch state must be fresh.
static void relaunch() {
    CoreObject obj = load(SINGLE);
    Hbm hbm;
    Region* x = hbm.put(randv(1000));
    Region* y = hbm.alloc(4000);
    arg_tensor_t out = hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, y->addr, 1000, {1000});
    auto s = stream_of({hbm_desc(NEURON_ISA_TPB_DTYPE_FP32, x->addr, 1000, {1000})});
    Launch a = launch(obj, "relu", hbm, s, &out);
    Launch b = launch(obj, "relu", hbm, s, &out);
    save("x", x);
    save("out", y);
    emit(b, ", \"first_status\": " + std::to_string(a.status) + ", \"first_scratch_peak\": " +
                std::to_string(a.report.scratch_peak));
}

// float32 -> half / bfloat16 / fp8 bits for the values in OUTDIR/conv_in.bin
static void conversions() {
    std::string path = g_outdir + "/conv_in.bin";
    FILE* f = fopen(path.c_str(), "rb");
    std::vector<float> v;
    float x;
    while (fread(&x, 4, 1, f) == 1) v.push_back(x);
    fclose(f);
    std::vector<uint16_t> h, b;
    std::vector<uint8_t> e3, e4, e5;
    std::vector<float> back_h, back_b, back_e3, back_e4, back_e5;
    for (float fv : v) {
        c10::Half hv(fv);
        c10::BFloat16 bv(fv);
        c10::Float8_e3m4 a3(fv);
        c10::Float8_e4m3 a4(fv);
        c10::Float8_e5m2 a5(fv);
        h.push_back(hv.x); b.push_back(bv.x); e3.push_back(a3.x); e4.push_back(a4.x); e5.push_back(a5.x);
        back_h.push_back(float(hv)); back_b.push_back(float(bv));
        back_e3.push_back(float(a3)); back_e4.push_back(float(a4)); back_e5.push_back(float(a5));
    }
    save("conv_f16", h.data(), h.size() * 2);
    save("conv_bf16", b.data(), b.size() * 2);
    save("conv_e3m4", e3.data(), e3.size());
    save("conv_e4m3", e4.data(), e4.size());
    save("conv_e5m2", e5.data(), e5.size());
    save("back_f16", back_h.data(), back_h.size() * 4);
    save("back_bf16", back_b.data(), back_b.size() * 4);
    save("back_e3m4", back_e3.data(), back_e3.size() * 4);
    save("back_e4m3", back_e4.data(), back_e4.size() * 4);
    save("back_e5m2", back_e5.data(), back_e5.size() * 4);
    printf("{\"n\": %zu}\n", v.size());
}

int main(int argc, char** argv) {
    if (argc != 4) { fprintf(stderr, "usage: driver OUTDIR LIBDIR SCENARIO\n"); return 2; }
    g_outdir = argv[1];
    g_libdir = argv[2];
    std::string sc = argv[3];
    static const std::map<std::string, int> probes = {
        {"accessor_oor", 0}, {"tcm_oor", 1}, {"tcm_exhaust", 2}, {"tcm_double_free", 3}, {"tcm_foreign_free", 4},
        {"accessor_dtype", 5}, {"cxx_exception", 6}, {"stack_overflow", 8}, {"segv", 9}, {"scratch_full", 10},
        {"too_many_dims", 11}, {"dim_too_big", 12}, {"printf_ring", 13}, {"factories", 14},
        {"tcm_past_block", 20}, {"tcm_freed_block", 21}, {"dataram_past_block", 22}};
    if (sc == "relu_small") unary("relu", 1000);
    else if (sc == "relu_chunked") unary("relu", 60000);
    else if (sc == "scale") unary("scale", 5000, 1.75f);
    else if (sc == "axpy" || sc == "axpy_multicore" || sc == "scalar_two_elements") axpy_scenario(sc);
    else if (sc == "affine") affine_scenario();
    else if (sc == "shape_forms") shape_forms();
    else if (sc == "dtype_gate") dtype_gate();
    else if (sc == "relaunch") relaunch();
    else if (sc == "conversions") conversions();
    else if (sc == "accessor_oor_2d") probe(7, {2, 3});
    else if (sc == "tcm_exhaust") probe(2, {10}, NEURON_ISA_TPB_DTYPE_FP32, 3);
    else if (sc == "factories") probe(14, {10}, NEURON_ISA_TPB_DTYPE_FP32, 4);
    else if (sc == "return_input") probe(15, {10}, NEURON_ISA_TPB_DTYPE_FP32, 10);
    else if (sc == "elementwise") probe(16, {10}, NEURON_ISA_TPB_DTYPE_FP32, 240);
    else if (sc == "elementwise_shape") probe(17);
    else if (sc == "streams") probe(18, {10}, NEURON_ISA_TPB_DTYPE_FP32, 10);
    else if (sc == "clamp_u64") probe_u64(23);
    else if (sc == "clamp_into_u64") probe_u64(24);
    else if (sc == "stream_oor") probe(19);
    else if (probes.count(sc)) probe(probes.at(sc));
    else if (sc == "lsp_mismatch" || sc == "lsp_single_on_multicore" || sc == "lsp_core_count") lsp_mismatch(sc);
    else if (sc == "past_arg_count" || sc == "bad_arg_type" || sc == "too_many_args" || sc == "unmapped" ||
             sc == "fp32r" || sc == "shape_mismatch")
        bad_stream(sc);
    else { fprintf(stderr, "unknown scenario %s\n", sc.c_str()); return 2; }
    return 0;
}
