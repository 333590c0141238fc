// A stand-in core object for the device model's tests: implements the
// abi.h contract (gpsimd_bind_core, gpsimd_linker_spec_info, the
// registration trio) without the real runtime, with ops that behave well
// and ops that misbehave in the ways the model must report.
// Compiled by tests/fake_core.py with -DCORE_ID=.. -DORIGIN=.. -DSIZE=.. -DNAME=..
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpsimd_host/abi.h"

extern "C" const gpsimd_lsp_info gpsimd_linker_spec = {CORE_ID, 0u, ORIGIN, SIZE, NAME};
#ifdef CRASH_AT_LOAD
// A static initialiser that crashes: dlopen runs it in the emulator's zygote.
__attribute__((constructor)) static void crash_at_load() { *(volatile int*)16 = 1; }
#endif
#ifdef CRASH_AT_SECOND_LOAD
// Only a second copy's static initialiser crashes (the first marks the
// zygote's environment, which the copies share).
__attribute__((constructor)) static void crash_at_second_load() {
    if (getenv("FAKE_CORE_LOADED")) *(volatile int*)16 = 1;
    setenv("FAKE_CORE_LOADED", "1", 1);
}
#endif
#if defined(THREAD_AT_LOAD) || defined(THREAD_AT_SECOND_LOAD)
#include <pthread.h>
// A static initialiser that starts a thread, which waits for ever
// (THREAD_AT_SECOND_LOAD: only a second copy's, as above).
static void* wait_for_ever(void*) { for (;;) pause(); return nullptr; }
__attribute__((constructor)) static void thread_at_load() {
#ifdef THREAD_AT_SECOND_LOAD
    if (!getenv("FAKE_CORE_THREAD")) { setenv("FAKE_CORE_THREAD", "1", 1); return; }
#endif
    pthread_t t;
    pthread_create(&t, nullptr, wait_for_ever, nullptr);
}
#endif
#ifdef FORK_AT_LOAD
// A static initialiser that forks a process, which waits for ever.
__attribute__((constructor)) static void fork_at_load() { if (fork() == 0) for (;;) pause(); }
#endif
#ifdef TIMER_AT_LOAD
#include <time.h>
// A static initialiser that starts no thread and no process: a timer whose
// signal's handler, in the zygote, forks a process that waits for ever.
static void fork_on_tick(int) { if (fork() == 0) for (;;) pause(); }
__attribute__((constructor)) static void timer_at_load() {
    signal(SIGUSR2, fork_on_tick);
    struct sigevent ev = {};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR2;
    timer_t t;
    struct itimerspec every = {{0, 20000000}, {0, 20000000}};
    if (timer_create(CLOCK_MONOTONIC, &ev, &t) == 0) timer_settime(t, 0, &every, nullptr);
}
#endif
#ifdef SWAP_AT_LOAD
// A static initialiser that forks: the loading process waits for ever, its
// child goes on as if it were it.
__attribute__((constructor)) static void swap_at_load() { if (fork() > 0) for (;;) pause(); }
#endif
#ifdef PRINT_AT_LOAD
// A static initialiser that writes a line (each copy of the object runs it).
__attribute__((constructor)) static void print_at_load() { printf("fake core loaded\n"); fflush(stdout); }
#endif
#ifdef ESCAPES_AT_LOAD
// A static initialiser that writes what a terminal obeys: clear the screen,
// back to the start of the line, then black on black.
__attribute__((constructor)) static void escapes_at_load() {
    printf("\x1b[2J\rloaded\n\x1b[8m\x1b[30;40m\n");
    fflush(stdout);
}
#endif
static gpsimd_core_binding B;

static gpsimd_core_report* report() { return (gpsimd_core_report*)(uintptr_t)B.report_host; }

static int fault(uint32_t kind, const char* msg) {
    report()->status = GPSIMD_STATUS_FAULT;
    report()->fault_kind = kind;
    snprintf(report()->message, GPSIMD_MESSAGE_CAPACITY, "%s", msg);
    return GPSIMD_STATUS_FAULT;
}

extern "C" int gpsimd_bind_core(const gpsimd_core_binding* b) {
    B = *b;
    if (b->abi_version != GPSIMD_HOST_ABI_VERSION) return fault(1, "abi version"), 1;
    if (gpsimd_linker_spec.core_id != GPSIMD_LSP_SINGLE && gpsimd_linker_spec.core_id != b->core_id)
        return fault(2, "linker spec of another core"), 1;
    return 0;
}
extern "C" const gpsimd_lsp_info* gpsimd_linker_spec_info(void) { return &gpsimd_linker_spec; }

static void* translate(uint64_t addr) {
    for (uint32_t i = 0; i < B.num_regions; ++i) {
        const gpsimd_region& r = B.regions[i];
        if (addr >= r.device_addr && addr < r.device_addr + r.size)
            return (void*)(uintptr_t)(r.host + (addr - r.device_addr));
    }
    return 0;
}
static const arg_tensor_t* arg(int i) {
    return (const arg_tensor_t*)(uintptr_t)(B.arg_stream_host + GPSIMD_ARG_STREAM_ARGS_OFFSET + 48 * i);
}
static const arg_tensor_t* out() { return (const arg_tensor_t*)(uintptr_t)B.retval_host; }

static void print(const char* s) {
    char* ring = (char*)(uintptr_t)B.printf_host;
    size_t n = strlen(s), at = report()->printf_len;
    memcpy(ring + at, s, n);
    report()->printf_len += n;
    report()->printf_total += n;
}

static void slice(uint32_t n, uint32_t* begin, uint32_t* count) {
    uint32_t id = B.core_id, cnt = B.core_count, base = n / cnt, rem = n % cnt;
    *begin = id * base + (id < rem ? id : rem);
    *count = base + (id < rem ? 1 : 0);
}

static int relu() {
    const float* x = (const float*)translate(arg(0)->storage.hbm.addr);
    float* y = (float*)translate(out()->storage.hbm.addr);
    if (!x || !y) return fault(8, "unmapped");
    uint32_t b, c;
    slice(out()->storage.hbm.num_elem, &b, &c);
    for (uint32_t i = b; i < b + c; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
    return 0;
}
static int relu_buggy() {  // docs/kernel-api.md "Multicore (SPMD) libraries"
    const float* x = (const float*)translate(arg(0)->storage.hbm.addr);
    float* y = (float*)translate(out()->storage.hbm.addr);
    uint32_t n = out()->storage.hbm.num_elem, cnt = B.core_count, id = B.core_id;
    uint32_t part = n / cnt + (id == cnt - 1 ? n % cnt : 0);
    for (uint32_t i = part * id; i < part * id + part; ++i) y[i] = i < n ? (x[i] > 0 ? x[i] : 0.0f) : 1.0f;
    return 0;
}
static int scale() {  // y = x * alpha; alpha a 0-D float32 tensor
    const arg_tensor_t* a = arg(1);
    if (a->dtype != 10 || a->framework_shape_type != 2 || a->storage.hbm.num_elem != 1 ||
        a->framework_shape.dims4[0] != 0)
        return fault(6, "alpha is not a 0-D float32 tensor");
    float alpha = *(const float*)translate(a->storage.hbm.addr);
    const float* x = (const float*)translate(arg(0)->storage.hbm.addr);
    float* y = (float*)translate(out()->storage.hbm.addr);
    for (uint32_t i = 0; i < out()->storage.hbm.num_elem; ++i) y[i] = x[i] * alpha;
    return 0;
}
static int crash() {
    if (B.core_id == B.core_count - 1) raise(SIGSEGV);
    return relu();
}
#ifdef HOSTILE_OPS
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "control_block_finder.h"
// The emulator's processes (ARCHITECTURE.md "Processes and containment"):
// 1 in the vector's leader, 0 in a helper it forked
static int in_leader() {
    char name[16] = "";
    prctl(PR_GET_NAME, name, 0, 0, 0);
    return strcmp(name, "gpsimd-vector") == 0;
}
// the leader ignores SIGCHLD at its first launch (its helpers' ends are
// then reaped by Linux); core 7 crashes in a helper, 50 ms into its launch
static int nochld_crash() {
    static int once;
    if (in_leader() && !once++) signal(SIGCHLD, SIG_IGN);
    else if (!in_leader() && B.core_id == 7) usleep(50000), raise(SIGSEGV);
    return relu();
}
// the leader waits for every child of its own (its helpers, whose ends it
// then cannot learn); a helper's launches take 20 ms
static int reap() {
    if (in_leader()) while (waitpid(-1, 0, 0) > 0) {}
    else usleep(20000);
    return relu();
}
// the control block: the image's first page
static gz_control* control_block() {
    return control_block_at((uintptr_t)translate(out()->storage.hbm.addr));
}
static gz_control* cb;
static gz_slot* launched;
static int holding;
static void* quit_later(void*) {
    sem_wait((sem_t*)cb->passes[1].sem);  // (the run's next claim waits for it)
    __atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&launched->state, __ATOMIC_ACQUIRE) != GPSIMD_ZY_SLOT_DONE) usleep(1000);
    usleep(20000);
    _exit(0);
}
// in the helper that makes the second run (run 1) whole, at its first
// launch: a thread of the kernel ends the process (exit status 0) between
// that launch and the next, which it keeps from claiming a core
static int quit_between() {
    cb = control_block();
    for (int j = 0; j < GPSIMD_ZY_MAX_JOBS && !in_leader() && !launched; j++)
        if (cb->jobs[j].pid == getpid() && cb->jobs[j].pass == 1) {
            launched = &cb->slots[1 * GPSIMD_ZY_MAX_CORES + B.core_id];
            mprotect(cb, 4096, PROT_READ | PROT_WRITE);
            pthread_t t;
            pthread_create(&t, nullptr, quit_later, nullptr);
            while (!__atomic_load_n(&holding, __ATOMIC_ACQUIRE)) usleep(100);
        }
    return relu();
}
// in a helper of run 0 (one that shares the run, not a whole run's), at
// its first launch of a core other than 0: a thread ends the process (exit
// status 0) once that launch is done, before the second call's launch of
// the same core in that process starts (the second call's folder, made a
// chain of symlinks, widens that window to milliseconds). Only core 0
// writes the output, all of it, as a kernel whose work is on one core.
static gz_slot* first_done;
static void* quit_now(void*) {
    while (__atomic_load_n(&first_done->state, __ATOMIC_ACQUIRE) != GPSIMD_ZY_SLOT_DONE) {}
    _exit(0);
}
static void slow_run4() {
    if (rename("/tmp/run4", "/tmp/r4") != 0) return;
    mkdir("/tmp/d", 0700);
    mkdir("/tmp/d/x", 0700);
    static char t[4096];
    for (int i = 38; i >= 0; i--) {
        int n = snprintf(t, sizeof t, "/tmp/d");
        while (n < 4000) n += snprintf(t + n, sizeof t - n, "/x/..");
        snprintf(t + n, sizeof t - n, i == 38 ? "/../r4" : "/../L%d", i + 1);
        char name[32];
        snprintf(name, sizeof name, i == 0 ? "/tmp/run4" : "/tmp/L%d", i);
        symlink(t, name);
    }
}
static int quit_second() {
    static int once;
    cb = control_block();
    if (!in_leader() && !once++ && B.core_id != 0) {
        slow_run4();
        for (int j = 0; j < GPSIMD_ZY_MAX_JOBS; j++)
            if (cb->jobs[j].pid == getpid() && cb->jobs[j].pass == 0) {
                first_done = &cb->slots[0 * GPSIMD_ZY_MAX_CORES + B.core_id];
                pthread_t t;
                pthread_create(&t, nullptr, quit_now, nullptr);
                break;
            }
    }
    if (B.core_id != 0) return 0;
    const float* x = (const float*)translate(arg(0)->storage.hbm.addr);
    float* y = (float*)translate(out()->storage.hbm.addr);
    for (uint32_t i = 0; i < out()->storage.hbm.num_elem; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
    return 0;
}
// stdout made non-blocking and its pipe 4 KiB (the pipe is the zygote's,
// kept for the next vectors), then relu
static int stdout_flags_set() {
    fcntl(1, F_SETFL, O_NONBLOCK);
    fcntl(1, F_SETPIPE_SZ, 4096);
    return relu();
}
// what this core's stdout is (non-blocking or not, its pipe's size), then relu
static int stdout_flags() {
    printf("stdout: non-blocking %d, pipe %d bytes\n", !!(fcntl(1, F_GETFL) & O_NONBLOCK),
           fcntl(1, F_GETPIPE_SZ));
    fflush(stdout);
    return relu();
}
// the kernel keyring (a thread's) and a POSIX message queue: the errno of each
static int keys() {
    long key = syscall(SYS_add_key, "user", "gpsimd-test", "x", 1, -1 /* the thread's */);
    int add = key < 0 ? errno : 0;
    int ctl = syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -1, 0) < 0 ? errno : 0;
    int mq = syscall(SYS_mq_open, "gpsimd-test", O_CREAT | O_RDWR, 0600, NULL) < 0 ? errno : 0;
    printf("add_key: %d, keyctl: %d, mq_open: %d\n", add, ctl, mq);
    fflush(stdout);
    return relu();
}
// a namespace made or joined (unshare, setns, clone with CLONE_NEWUSER), and
// clone3: the errno of each; a thread and a process still start
static void* nothing(void*) { return nullptr; }
static int namespaces() {
    int un = unshare(CLONE_NEWUSER) != 0 ? errno : 0;
    int sn = setns(-1, CLONE_NEWNET) != 0 ? errno : 0;
    long child = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (child == 0) _exit(0);
    int cl = child < 0 ? errno : 0;
    if (child > 0) waitpid(child, nullptr, 0);
    int c3 = syscall(SYS_clone3, nullptr, 0) != 0 ? errno : 0;
    pthread_t t;
    int th = pthread_create(&t, nullptr, nothing, nullptr);
    if (th == 0) pthread_join(t, nullptr);
    pid_t p = fork();
    if (p == 0) _exit(0);
    int st = -1;
    if (p > 0) waitpid(p, &st, 0);
    printf("unshare: %d, setns: %d, clone: %d, clone3: %d, thread: %d, fork: %d\n", un, sn, cl, c3,
           th, p > 0 && st == 0 ? 0 : -1);
    fflush(stdout);
    return relu();
}
// core 0 writes the whole output right, prints the second call's label
// and crashes, at its first call: whatever it prints, the crash is that call's
static int crash_quoting() {
    if (B.core_id != 0) return 0;
    const float* x = (const float*)translate(arg(0)->storage.hbm.addr);
    float* y = (float*)translate(out()->storage.hbm.addr);
    for (uint32_t i = 0; i < out()->storage.hbm.num_elem; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
    print(" (a second call of the op, from the state the first call left)");
    raise(SIGSEGV);
    return 0;
}
#define HOSTILE_NAMES , "nochld_crash", "reap", "quit_between", "quit_second", \
    "stdout_flags_set", "stdout_flags", "keys", "namespaces", "crash_quoting"
#define HOSTILE_FNS , nochld_crash, reap, quit_between, quit_second, stdout_flags_set, \
    stdout_flags, keys, namespaces, crash_quoting
#else
#define HOSTILE_NAMES
#define HOSTILE_FNS
#endif
static int hang() { for (volatile int i = 0;; i = i) {} return 0; }
static int faulty() { return fault(9, "tcm_to_tensor: offset 12 + 4 > numel 13"); }
static int hello() {
    char line[64];
    snprintf(line, sizeof line, "hello from core %u\n", B.core_id);
    print(line);
#ifdef HELLO_ON_STDOUT
    fputs(line, stdout);  // (and on the core's stdout, which the zygote keeps)
#endif
#ifdef LIST_FDS
    struct stat st, null;  // what the kernel can reach above stderr
    stat("/dev/null", &null);
    for (int fd = 3; fd < 64; fd++)
        if (fstat(fd, &st) == 0)
            printf("fd %d: %s\n", fd, S_ISFIFO(st.st_mode) ? "pipe"
                   : st.st_rdev == null.st_rdev && S_ISCHR(st.st_mode) ? "/dev/null"
                   : S_ISSOCK(st.st_mode) ? "socket" : S_ISDIR(st.st_mode) ? "folder" : "other");
#endif
    return relu();
}
static int copy_i8() {
    const int8_t* x = (const int8_t*)translate(arg(0)->storage.hbm.addr);
    int8_t* y = (int8_t*)translate(out()->storage.hbm.addr);
    for (uint32_t i = 0; i < out()->storage.hbm.num_elem; ++i) y[i] = x[i];
    return 0;
}
static int overrun() {
    float* y = (float*)translate(out()->storage.hbm.addr);
    for (uint32_t i = 0; i < out()->storage.hbm.num_elem + 3; ++i) y[i] = 1.0f;
    return 0;
}
static int touch_input() {
    float* x = (float*)translate(arg(0)->storage.hbm.addr);
    x[0] = 42.0f;
    return relu();
}
static int touch_input_after() {    // a right output, then its input changed
    const int rc = relu();
    float* x = (float*)translate(arg(0)->storage.hbm.addr);
    x[0] = 42.0f;
    return rc;
}
static int ool_shape() {  // output [2, 0, 3]: dims out of line, as int64 in HBM
    const arg_tensor_t* o = out();
    if (o->framework_shape_type != 1 || o->framework_shape.out_of_line.ndim != 3)
        return fault(7, "expected an out-of-line shape of 3 dims");
    const int64_t* d = (const int64_t*)translate(o->framework_shape.out_of_line.addr);
    if (!d || d[0] != 2 || d[1] != 0 || d[2] != 3) return fault(7, "wrong out-of-line dims");
    return 0;
}

typedef int (*wrapper_fn)();
static const char* names[] = {"relu", "relu_buggy", "scale", "crash", "hang", "faulty",
                              "hello", "copy_i8", "overrun", "touch_input", "ool_shape",
                              "touch_input_after"
                              HOSTILE_NAMES};
static wrapper_fn fns[] = {relu, relu_buggy, scale, crash, hang, faulty,
                           hello, copy_i8, overrun, touch_input, ool_shape,
                           touch_input_after HOSTILE_FNS};
int get_func_cnt() { return sizeof names / sizeof names[0]; }
char const* get_func_name(int i) { return i >= 0 && i < get_func_cnt() ? names[i] : "error"; }
wrapper_fn get_func_ptr(int i) { return i >= 0 && i < get_func_cnt() ? fns[i] : 0; }
