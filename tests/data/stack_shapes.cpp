// Functions of every stack shape the object reader follows: GCC's own
// -fstack-usage figures are the reference (tests/unit/test_objgraph.py).
#include <alloca.h>
#include <cstring>
#include <stdexcept>

extern void use(char*, int);
extern void many(int, int, int, int, int, int, int, int);
extern "C" [[noreturn]] void die(const char*, ...);

static int __attribute__((noinline)) leaf(int* a, int n) {
    int b[64];
    memcpy(b, a, n * 4);
    int s = 0;
    for (int i = 0; i < n; i++) s += b[i];
    return s;
}
int big_frame(int n) { char x[100000]; memset(x, n, sizeof x); use(x, n); return x[n] + leaf((int*)x, n); }
int page_frame(int n) { char x[9000]; memset(x, n, sizeof x); use(x, n); return x[n]; }
int with_alloca(int n) { int* p = (int*)alloca(n * 4); for (int i = 0; i < n; i++) p[i] = i; return leaf(p, n); }
int with_vla(int n) { int p[n]; for (int i = 0; i < n; i++) p[i] = i; return leaf(p, n); }
void big_and_alloca(int n) { char x[100000]; char* p = (char*)alloca(n); use(x, n); use(p, n); }
void stack_args(int n) { char x[64]; use(x, n); many(1, 2, 3, 4, 5, 6, 7, n); many(1, 2, 3, 4, 5, 6, n, 8); }
int recursive(int n) { return n <= 0 ? 0 : recursive(n - 1) + recursive(n - 2); }
static int __attribute__((noinline)) ping(int n);
static int __attribute__((noinline)) pong(int n) { return n <= 0 ? 0 : ping(n - 1) + 1; }
static int __attribute__((noinline)) ping(int n) { return n <= 0 ? 1 : pong(n - 2) * 2; }
int mutual(int n) { return ping(n); }
int tail(int n) { use(nullptr, n); return 0; }
void sibling(int n) { use(nullptr, n + 1); }
int indirect(int (*f)(int), int n) { return f(n) + 1; }
int indirect_tail(int (*f)(int), int n) { return f(n + 1); }
int throws(int n) {
    if (__builtin_expect(n < 0, 0)) throw std::runtime_error("negative");
    char x[32];
    use(x, n);
    return x[0];
}
int noreturn_then_more(int a, int b, int c, int d, int e, int f, int n) {
    if (n > 100) die("%d %d %d %d %d %d %d", a, b, c, d, e, f, n);
    if (n > 10) die("%d", n);
    return n;
}
// the runtime's GPSIMD_HOST_ONLY: the model's own diagnostics
__attribute__((noinline, section(".text.gpsimd_host_only"))) void diagnose(int n) {
    char x[512];
    use(x, n);
}
void checked(int n) { if (n < 0) diagnose(n); use(nullptr, n); }
