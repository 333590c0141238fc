/* The core objects of a library run (zygote_parts.h): each copy loaded
 * (dlopen) from the descriptor the worker sent, copy 0 checked as the
 * device loader checks it, and an op's launcher looked up in a copy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "sandbox.h"
#include "zygote_parts.h"

struct object gz_objects[GPSIMD_ZY_MAX_RUNS][GPSIMD_ZY_MAX_CORES];

static int copy_into(int to, int from)
{
    char buf[1 << 16];
    off_t at = 0;
    ssize_t n;
    while ((n = pread(from, buf, sizeof buf, at)) > 0 && sb_write_all(to, buf, (size_t)n) == 0)
        at += n;
    return n == 0 ? 0 : -1;
}

/* Load copy c of object k: copy 0 from its payload's fd (or its path),
 * the others from a memfd of their own (another file: another copy of the
 * runtime's state). For copy 0, what the device loader checks goes into
 * entry (the ready message's core k); a later copy that does not load has
 * no ops (a vector that needs it fails, saying so). */
void gz_load(int c, int k, int fd, const char *name, struct gz_core *entry)
{
    char where[64], why[1024];
    struct object *o = &gz_objects[c][k];      /* (no ops unless every check passed) */
    if (c != 0) {
        const char *base = strrchr(name, '/');
        int own = memfd_create(base ? base + 1 : name, MFD_CLOEXEC);
        if (own < 0 || copy_into(own, fd) != 0) {
            snprintf(o->error, sizeof o->error, "%s: %s", own < 0 ? "memfd_create" : "its copy",
                     strerror(errno));
            if (own >= 0)
                close(own);
            return;
        }
        /* (own stays open: dlopen takes a name it has loaded already for
           that object, and a closed fd's number, hence its name, comes back) */
        fd = own;
    }
    snprintf(where, sizeof where, "/proc/self/fd/%d", fd);
    /* (what the static initialisers write goes to the load output's
       memfd, at most GPSIMD_ZY_OUTPUT_KEEP bytes of it) */
    struct rlimit fsize;
    getrlimit(RLIMIT_FSIZE, &fsize);
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &(struct rlimit){GPSIMD_ZY_OUTPUT_KEEP, fsize.rlim_max});
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL);
    fflush(NULL);
    setrlimit(RLIMIT_FSIZE, &fsize);
    /* (the device loader's checks: the entry points, copy 0's LSP first) */
    static const char *const syms[] = {"gpsimd_linker_spec_info", "_Z12get_func_cntv",
                                       "_Z13get_func_namei", "_Z12get_func_ptri",
                                       "gpsimd_bind_core"};
    void *got[5] = {NULL};
    const gpsimd_lsp_info *info = NULL;
    why[0] = 0;
    if (h == NULL)
        snprintf(why, sizeof why, "%s: cannot load: %s", name, dlerror());
    for (int i = c == 0 ? 0 : 1; h != NULL && i < 5 && !why[0]; i++) {
        if ((got[i] = dlsym(h, syms[i])) == NULL)
            snprintf(why, sizeof why, "%s: symbol %s not found", name, syms[i]);
        else if (i == 0 && (info = ((const gpsimd_lsp_info *(*)(void))got[0])()) == NULL)
            snprintf(why, sizeof why, "%s: gpsimd_linker_spec_info() returned null", name);
    }
    if (info != NULL) {
        entry->has_lsp = 1;
        entry->lsp = *info;
    }
    const char *(*name_of)(int) = (const char *(*)(int))got[2];
    void *(*ptr_of)(int) = (void *(*)(int))got[3];
    o->binder = got[4];
    int n = why[0] ? 0 : ((int (*)(void))got[1])();
    if (n < 0)
        snprintf(why, sizeof why, "%s: get_func_cnt() returned %d", name, n);
    if (!why[0] && n > 0) {
        if ((o->ops = calloc((size_t)n, sizeof *o->ops)) == NULL)
            snprintf(why, sizeof why, "%s: no memory for %d ops", name, n);
    }
    for (int i = 0; i < n && !why[0]; i++) {
        const char *s = name_of(i);
        void *p = s ? ptr_of(i) : NULL;
        if (s == NULL)
            snprintf(why, sizeof why, "%s: get_func_name(%d) returned null", name, i);
        else if (p == NULL)
            snprintf(why, sizeof why, "%s: get_func_ptr(%d) (%s) returned null", name, i, s);
        for (int j = 0; j < i && !why[0]; j++)
            if (strcmp(o->ops[j].name, s) == 0)
                snprintf(why, sizeof why, "%s: op '%s' registered twice", name, s);
        if (!why[0])
            o->ops[i] = (struct op){strdup(s), p};
    }
    o->nops = why[0] ? 0 : n;
    if (c != 0) {                        /* (its memfd open while it is loaded) */
        snprintf(o->error, sizeof o->error, "%s", why);
        if (h == NULL)
            close(fd);
        return;
    }
    snprintf(entry->error, sizeof entry->error, "%s", why);
    entry->loaded = !why[0];
    entry->nops = o->nops;
}

void *gz_launcher_of(const struct object *o, const char *op)
{
    for (int i = 0; i < o->nops; i++)
        if (strcmp(o->ops[i].name, op) == 0)
            return o->ops[i].launcher;
    return NULL;
}
