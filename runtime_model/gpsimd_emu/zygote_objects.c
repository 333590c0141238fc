/* The core objects of a library run (zygote_parts.h): each copy loaded
 * (dlopen) from the descriptor the worker sent, copy 0 checked as the
 * device loader checks it, and an op's launcher looked up in a copy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "sandbox.h"
#include "zygote_parts.h"

struct object gz_objects[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];

/* Load copy c of object k: copy 0 from its payload's fd (or its path),
 * the others from a memfd of their own (another file: another copy of the
 * runtime's state). For copy 0, what the device loader checks goes into
 * entry (the ready message's core k); a later copy that does not load has
 * no ops (a vector that needs it fails, saying so). */
void gz_load(int c, int k, int fd, const char *name, struct gz_core *entry)
{
#define FAIL(...) do { snprintf(why, sizeof why, __VA_ARGS__); goto done; } while (0)
    char where[64], why[1024] = "";
    pid_t self = getpid();
    struct object *o = &gz_objects[c][k];      /* (no ops unless every check passed) */
    const gpsimd_lsp_info *info = NULL;
    void *h = NULL;
    if (c != 0) {
        const char *base = strrchr(name, '/');
        off_t at = 0;
        ssize_t n = 0;
        int from = fd;
        if ((fd = memfd_create(base ? base + 1 : name, MFD_CLOEXEC)) >= 0)
            while ((n = sendfile(fd, from, &at, 1 << 30)) > 0)
                ;
        if (fd < 0 || n < 0)
            FAIL("%s: %s", fd < 0 ? "memfd_create" : "its copy", strerror(errno));
        /* (fd stays open: dlopen takes a name it has loaded already for
           that object, and a closed fd's number, hence its name, comes back) */
    }
    snprintf(where, sizeof where, "/proc/self/fd/%d", fd);
    /* (what the static initialisers write goes to the load output's
       memfd, at most GPSIMD_ZY_OUTPUT_KEEP bytes of it) */
    struct rlimit fsize;
    getrlimit(RLIMIT_FSIZE, &fsize);
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &(struct rlimit){GPSIMD_ZY_OUTPUT_KEEP, fsize.rlim_max});
    h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &fsize);
    /* (the device loader's checks: the entry points, copy 0's LSP first) */
    static const char *const syms[] = {"gpsimd_linker_spec_info", "_Z12get_func_cntv",
                                       "_Z13get_func_namei", "_Z12get_func_ptri",
                                       "gpsimd_bind_core"};
    void *got[5] = {NULL};
    if (h == NULL)
        FAIL("%s: cannot load: %s", name, dlerror());
    for (int i = c == 0 ? 0 : 1; i < 5; i++) {
        if ((got[i] = dlsym(h, syms[i])) == NULL)
            FAIL("%s: symbol %s not found", name, syms[i]);
        if (i == 0 && (info = ((const gpsimd_lsp_info *(*)(void))got[0])()) == NULL)
            FAIL("%s: gpsimd_linker_spec_info() returned null", name);
    }
    const char *(*name_of)(int) = (const char *(*)(int))got[2];
    void *(*ptr_of)(int) = (void *(*)(int))got[3];
    o->binder = got[4];
    int n = ((int (*)(void))got[1])();
    if (n < 0)
        FAIL("%s: get_func_cnt() returned %d", name, n);
    if (n > 0 && (o->ops = calloc((size_t)n, sizeof *o->ops)) == NULL)
        FAIL("%s: no memory for %d ops", name, n);
    for (int i = 0; i < n; i++) {
        const char *s = name_of(i);
        void *p = s ? ptr_of(i) : NULL;
        if (s == NULL)
            FAIL("%s: get_func_name(%d) returned null", name, i);
        if (p == NULL)
            FAIL("%s: get_func_ptr(%d) (%s) returned null", name, i, s);
        for (int j = 0; j < i; j++)
            if (strcmp(o->ops[j].name, s) == 0)
                FAIL("%s: op '%s' registered twice", name, s);
        o->ops[i] = (struct op){strdup(s), p};
    }
    o->nops = n;
done:
    if (getpid() != self)                /* (a child the object forked, going on as the */
        _exit(127);                      /* zygote: the zygote is stopped in its load) */
    /* (a thread it started would run beside every vector, in the zygote,
       outside every launch's limits and checks; the zygote's own: one) */
    static int64_t threads = 1;
    int64_t now = sb_read_number(AT_FDCWD, "/proc/self/status", "Threads:");   /* (0: unread) */
    if (now > threads && !why[0]) {
        snprintf(why, sizeof why, "%s: it started a thread as it loaded (a static "
                 "initialiser?); a core object may run code only when a core is launched", name);
        o->nops = 0;
    }
    threads = now > 0 ? now : threads;
    if (c != 0) {                        /* (its memfd open while it is loaded) */
        snprintf(o->error, sizeof o->error, "%s", why);
        if (h == NULL && fd >= 0)
            close(fd);
        return;
    }
    if (info != NULL) {
        entry->has_lsp = 1;
        entry->lsp = *info;
    }
    snprintf(entry->error, sizeof entry->error, "%s", why);
    entry->loaded = !why[0];
    entry->nops = o->nops;
#undef FAIL
}

void *gz_launcher_of(const struct object *o, const char *op)
{
    for (int i = 0; i < o->nops; i++)
        if (strcmp(o->ops[i].name, op) == 0)
            return o->ops[i].launcher;
    return NULL;
}
