/*
 * printf.cpp -- printf capture (docs/kernel-api.md "Limits": "printf works ...
 * the output buffer holds at most 128 KB and drops the oldest data when
 * full").
 *
 * The runtime defines printf, vprintf, puts, putchar and the fortified
 * __printf_chk / __vprintf_chk.  A core object is linked with -Bsymbolic,
 * so every call from kernel code inside the same object binds to these
 * definitions (and the process's own printf is untouched, the object being
 * loaded RTLD_LOCAL).  While the core is bound, output goes to the ring
 * buffer binding.printf_host (GPSIMD_PRINTF_CAPACITY bytes); the report
 * carries printf_total (bytes printed), printf_len (bytes kept) and
 * printf_head (offset of the oldest kept byte).  Unbound, output goes to
 * file descriptor 1.  (std::cout and fprintf(stdout, ...) are not
 * captured.)
 */
#define GPSIMD_RUNTIME_INTERNAL 1   /* the runtime's own Tensor members (torch/detail/tensor.h) */
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

namespace gpsimd_rt {

static uint64_t g_total = 0;  /* bytes printed since reset */
static uint64_t g_len = 0;    /* bytes kept */
static uint64_t g_head = 0;   /* offset of the oldest kept byte */

void printf_reset() {
    g_total = g_len = g_head = 0;
}

/* Append to the ring, dropping the oldest bytes when full. */
void printf_append(const char* data, size_t n) {
    CoreState& c = core();
    if (!c.bound) {
        while (n) {
            ssize_t w = write(1, data, n);
            if (w <= 0) return;
            data += w;
            n -= size_t(w);
        }
        return;
    }
    const uint64_t cap = GPSIMD_PRINTF_CAPACITY;
    char* ring = reinterpret_cast<char*>(static_cast<uintptr_t>(c.binding.printf_host));
    g_total += n;
    if (ring) {
        if (n >= cap) {  /* only the last cap bytes survive */
            memcpy(ring, data + (n - cap), cap);
            g_head = 0;
            g_len = cap;
        } else {
            uint64_t tail = (g_head + g_len) % cap;  /* where the next byte goes */
            size_t left = n;
            const char* p = data;
            while (left) {
                size_t chunk = size_t(cap - tail);
                if (chunk > left) chunk = left;
                memcpy(ring + tail, p, chunk);
                p += chunk;
                left -= chunk;
                tail = (tail + chunk) % cap;
            }
            g_len += n;
            if (g_len > cap) {
                g_head = (g_head + (g_len - cap)) % cap;
                g_len = cap;
            }
        }
    }
    if (c.report) {
        c.report->printf_total = g_total;
        c.report->printf_len = g_len;
        c.report->printf_head = g_head;
    }
}

static int format_and_append(const char* fmt, va_list ap) {
    static char small[1024];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return n;
    }
    if (size_t(n) < sizeof small) {
        printf_append(small, size_t(n));
    } else {
        char* big = static_cast<char*>(malloc(size_t(n) + 1));
        if (big) {
            vsnprintf(big, size_t(n) + 1, fmt, ap2);
            printf_append(big, size_t(n));
            free(big);
        }
    }
    va_end(ap2);
    return n;
}

}  // namespace gpsimd_rt

using namespace gpsimd_rt;

extern "C" {

/* docs/kernel-api.md "printf". */
int vprintf(const char* __restrict fmt, va_list ap) { return format_and_append(fmt, ap); }

int printf(const char* __restrict fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = format_and_append(fmt, ap);
    va_end(ap);
    return n;
}

/* The compiler turns printf("text\n") into puts("text"). */
int puts(const char* s) {
    size_t n = strlen(s);
    printf_append(s, n);
    printf_append("\n", 1);
    return int(n + 1);
}

/* The compiler turns printf("c") into putchar('c'). */
int putchar(int ch) {
    char c = char(ch);
    printf_append(&c, 1);
    return static_cast<unsigned char>(c);
}

/* _FORTIFY_SOURCE forms (glibc). */
int __printf_chk(int flag, const char* __restrict fmt, ...) {
    (void)flag;
    va_list ap;
    va_start(ap, fmt);
    int n = format_and_append(fmt, ap);
    va_end(ap);
    return n;
}

int __vprintf_chk(int flag, const char* __restrict fmt, va_list ap) {
    (void)flag;
    return format_and_append(fmt, ap);
}

}  // extern "C"
