/* A vector's processes: the zygote fills one struct gl_request and calls
 * gl_fork_leader(); the child never returns (it makes every run of the
 * vector's cores and _exit()s: 0 after recording its end,
 * GPSIMD_ZY_EXIT_MODEL_ERROR after recording a model error); the parent
 * gets the child's pid, or -errno when fork failed.
 *
 * Each run claims its cores from the control block (gpsimd_host/zygote.h)
 * and launches them, with SIGALRM at the run's time limit; a run that
 * faulted, crashed or left a launch stops the vector after it (the runs
 * after it recorded as skipped); runs that take long get helper processes
 * (up to parallel - 1). Each core writes to pipes of its own, which the
 * zygote drains and bounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpsimd_host/abi.h"
#include "leader_parts.h"

/* a helper process: its record's index, its run; a whole run's helper
   reaped while the leader ran (done) leaves its wait status here */
struct job { int index, run, pid, done, status; };

/* The state of this process (a fork of the zygote: one vector's leader,
 * or a helper forked from it). */
static const struct gz_vector *V;        /* the request's */
static int jobs_n;                       /* process records used */
static struct job helping[GPSIMD_ZY_MAX_JOBS];
static int nhelping;
static struct job whole[GPSIMD_ZY_MAX_RUNS];  /* the helper making run p whole (pid 0: none) */
static int is_helper;
static int stop_after = -1;
static int follower[GPSIMD_ZY_MAX_RUNS];  /* the run that follows run p's launches, or -1 */
static int is_follower[GPSIMD_ZY_MAX_RUNS];

/* ---- small helpers ------------------------------------------------------- */

void gl_set_name(const char *name) { prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

/* SIGALRM in ns (0: none; else at least 1 ms) */
static void set_alarm(int64_t ns)
{
    struct itimerval t = {{0, 0}, {(time_t)(ns / 1000000000),
                                   (suseconds_t)(ns % 1000000000 / 1000)}};
    setitimer(ITIMER_REAL, &t, NULL);
}

/* A helper's wait status; GPSIMD_ZY_LOST, never a normal end, when the
 * wait fails (a kernel waited for it, or had it reaped: SIGCHLD ignored) */
static int wait_pid(int pid)
{
    int st;
    while (waitpid(pid, &st, 0) != pid)
        if (errno != EINTR)
            return GPSIMD_ZY_LOST;
    return st;
}

/* Reap what else ended (what a kernel forked); a whole run's helper among
 * it keeps its status for wait_whole (read as lost, it failed the vector) */
static void reap_orphans(void)
{
    int st;
    for (pid_t pid; (pid = waitpid(-1, &st, WNOHANG)) > 0;)
        for (int p = 0; p < GPSIMD_ZY_MAX_RUNS; p++)
            if (whole[p].pid == pid && !whole[p].done)
                whole[p] = (struct job){whole[p].index, p, pid, 1, st};
}

/* ---- helpers ---------------------------------------------------------------- */

static int make_run(const struct gz_run *r, int index);
static void run_cores(const struct gz_run *r, int index, int64_t deadline);

static void fork_helper(const struct gz_run *r, int is_whole, int64_t deadline)
{
    int index = jobs_n;
    if (index >= GPSIMD_ZY_MAX_JOBS)
        return;
    int p = (int)r->index;
    if (is_whole)                          /* claimed before the fork */
        cb_set_pass(p, GPSIMD_ZY_PASS_RUNNING);
    int leader = getpid();
    pid_t pid = fork();
    if (pid < 0)
        cb_model_error("fork", errno);
    if (pid == 0) {                        /* the helper */
        sb_die_with_parent(leader);
        gl_set_name("gpsimd-core");
        is_helper = 1;
        nhelping = 0;
        memset(whole, 0, sizeof whole);
        if (is_whole)
            make_run(r, index);
        else
            run_cores(r, index, deadline);
        _exit(0);
    }
    cb_set_job(index, pid, p, 0, GPSIMD_ZY_JOB_RUNNING);
    jobs_n++;
    struct job j = {index, p, pid, 0, 0};
    if (is_whole)
        whole[p] = j;
    else
        helping[nhelping++] = j;
}

static int whole_running(void)
{
    int n = 0;
    for (int p = 0; p < GPSIMD_ZY_MAX_RUNS; p++) {
        struct job *j = &whole[p];
        if (!j->pid || j->done)
            continue;
        pid_t got = waitpid(j->pid, &j->status, WNOHANG);   /* (0: status left as it was) */
        if (got == 0 || (got < 0 && errno != ECHILD))
            n++;
        else if ((j->done = 1) && got < 0)
            j->status = GPSIMD_ZY_LOST;       /* (ended, how not known: see wait_pid) */
    }
    return n;
}

static void maybe_help(const struct gz_run *r, int64_t started, int64_t deadline)
{
    if (V->parallel < 2 || nhelping || is_helper)
        return;
    if (!(V->spread_now || gl_now_ns() - started >= V->spread_after_ns))
        return;
    int free_ = (int)V->parallel - 1 - whole_running();
    for (int i = 0; i < V->nruns && free_ > 0; i++) {   /* whole runs that need not wait */
        const struct gz_run *later = &V->runs[i];
        int q = (int)later->index;
        if (q > r->index && V->ncores > 1 && !whole[q].pid && !is_follower[q]
                && later->base < 0 && cb->passes[q].state == 0) {
            fork_helper(later, 1, 0);
            free_--;
        }
    }
    for (int n = cb_unclaimed((int)r->index); !r->ordered && n > 0 && free_ > 0; n--, free_--)
        fork_helper(r, 0, deadline);          /* the rest of this run's cores */
    cb_protect(0);
}

/* Record job j's end (wait status st): 1 when it ended badly (not with
 * exit 0, or one of its launches left running). */
static int job_ended(struct job j, int st)
{
    cb_set_job(j.index, j.pid, j.run, st, GPSIMD_ZY_JOB_EXITED);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0) || cb_left_running(j.index, j.run);
}

/* Wait for the whole runs' helpers (those after the run the vector stops
 * after killed, their end recorded as cancelled). */
static void wait_whole(void)
{
    for (int p = 0; p < GPSIMD_ZY_MAX_RUNS; p++) {
        struct job j = whole[p];
        if (!j.pid)
            continue;
        int cancel = stop_after >= 0 && p > stop_after;
        if (cancel)
            kill(j.pid, SIGKILL);
        int st = j.done ? j.status : wait_pid(j.pid);
        if (st == 0 && !cancel && cb->passes[p].state != GPSIMD_ZY_PASS_DONE
                && !cb_left_running(j.index, p))
            st = GPSIMD_ZY_UNFINISHED;         /* (ended between launches: a kernel's thread) */
        int bad = job_ended(j, cancel ? GPSIMD_ZY_CANCELLED : st);
        if (!cancel && (bad || cb->passes[p].faulted))
            stop_after = p;
    }
    memset(whole, 0, sizeof whole);
    reap_orphans();
}

static int wait_helpers(void)
{
    int bad = 0;
    for (int i = 0; i < nhelping; i++)
        bad |= job_ended(helping[i], wait_pid(helping[i].pid));
    nhelping = 0;
    reap_orphans();
    return bad;
}

/* ---- runs -------------------------------------------------------------------- */

/* The output region of core k in run p (its host address, *size its bytes;
 * NULL: none). */
static unsigned char *output_of(int p, int k, uint64_t *size)
{
    const gpsimd_core_binding *b = gl_binding(p, k);
    for (uint32_t i = 0; i < b->num_regions && i < GPSIMD_MAX_REGIONS; i++)
        if (b->regions[i].flags & GPSIMD_REGION_OUTPUT) {
            *size = b->regions[i].size;
            return (unsigned char *)(uintptr_t)b->regions[i].host;
        }
    *size = 0;
    return NULL;
}

/* A run with a base (gz_run): core k is launched only when a run before it
 * found it reading the output through a pointer; before the first such
 * launch the run's shared output gets the base run's final one. 1: launch it. */
static int based_launch(const struct gz_run *r, int k, int index)
{
    static int filled[GPSIMD_ZY_MAX_RUNS];
    int p = (int)r->index;
    uint32_t flags = 0;
    for (int i = 0; i < V->nruns && V->runs[i].index != p; i++)
        flags |= ((const gpsimd_core_report *)(uintptr_t)gl_binding(
                  (int)V->runs[i].index, k)->report_host)->flags;
    if (!(flags & GPSIMD_REPORT_OUTPUT_UNTRACKED)) {
        int64_t t = gl_now_ns();
        cb_set_slot(p, k, GPSIMD_ZY_SLOT_DONE, 0, 0, (uint32_t)index, t, t);
        return 0;
    }
    uint64_t n, m;
    unsigned char *to = output_of(p, 0, &n), *from = output_of((int)r->base, 0, &m);
    if (to == NULL || from == NULL || n != m)
        cb_model_error("a based run's output differs from its base's", 0);
    if (!filled[p]) {
        memcpy(to, from, (size_t)n);
        filled[p] = 1;
    }
    /* its own part not written yet, as on the device when it runs last:
     * the elements it wrote in run 0 or 1 (bytes of its copy other than
     * that run's poison: a value can hold one poison, never both) back to
     * the zeros of the shared output */
    for (int q = 0; q < 2; q++) {
        const gpsimd_core_binding *b = gl_binding((int)V->runs[q].index, k);
        unsigned char *mine = output_of((int)V->runs[q].index, k, &m);
        uint64_t es = b->out_itemsize ? b->out_itemsize : 1;
        for (uint64_t e = 0; mine != NULL && m == n && e + es <= n; e += es)
            for (uint64_t j = 0; j < es; j++)
                if (mine[e + j] != b->poison) {
                    memset(to + e, 0, (size_t)es);
                    break;
                }
    }
    return 1;
}

/* SIGALRM at deadline (ns, gl_now_ns's clock); at once when it has passed */
static void arm(int64_t deadline)
{
    int64_t remaining = deadline - gl_now_ns();
    if (remaining <= 0)
        kill(getpid(), SIGALRM);
    set_alarm(remaining > 1000000 ? remaining : 1000000);
}

/* The run's launches in this process by deadline; those of its follower
 * (the second call) have a limit of their own, the vector's timeout, so
 * that a hang in either call ends after the limit, not twice it. */
static void run_cores(const struct gz_run *r, int index, int64_t deadline)
{
    int p = (int)r->index;
    cb_run = p;
    cb_core = -1;
    arm(deadline);
    int shared = V->parallel > 1 && !r->ordered;
    int64_t started = gl_now_ns();
    if (V->spread_now)
        maybe_help(r, started, deadline);  /* cores known to take long */
    int q = follower[p];
    int64_t followed = 0;                  /* ns the second calls took */
    for (int k; (k = cb_claim(p, shared)) >= 0;) {
        if (r->base >= 0 && !based_launch(r, k, index))
            continue;
        if (q >= 0)                        /* (else the one alarm set above holds) */
            arm(deadline + followed);
        gl_launch(p, k, index);
        /* the second call: the same loaded object again, in this process,
           from the state the first call left (unless that call faulted) */
        if (q >= 0 && !cb->passes[p].faulted) {
            int64_t t = gl_now_ns();
            arm(t + V->timeout_ns - followed);
            gl_launch(q, k, index);
            followed += gl_now_ns() - t;
        }
        cb_run = p;
        maybe_help(r, started, deadline + followed);  /* (it tells whether this process may) */
    }                                      /* (cb_core -1 again: cb_claim) */
}

/* 1 when the vector must stop after run r (a fault, a helper's bad end, a
 * launch that ended the process). */
static int make_run(const struct gz_run *r, int index)
{
    int p = (int)r->index, q = follower[p];
    int64_t start = gl_now_ns();
    cb_set_pass(p, GPSIMD_ZY_PASS_RUNNING);
    if (q >= 0)
        cb_set_pass(q, GPSIMD_ZY_PASS_RUNNING);
    cb_set_job(index, getpid(), p, 0, GPSIMD_ZY_JOB_RUNNING);
    run_cores(r, index, start + V->timeout_ns);
    int bad = wait_helpers();
    set_alarm(0);
    cb_set_job(index, getpid(), p, 0, GPSIMD_ZY_JOB_EXITED);
    if (bad || cb_left_running(index, p) || (q >= 0 && cb_left_running(index, q)))
        return 1;
    cb_set_pass(p, GPSIMD_ZY_PASS_DONE);
    if (q >= 0)
        cb_set_pass(q, cb->passes[p].faulted ? GPSIMD_ZY_PASS_SKIPPED : GPSIMD_ZY_PASS_DONE);
    return cb->passes[p].faulted || (q >= 0 && cb->passes[q].faulted);
}

static void leader_run(void)
{
    for (int i = 0; i < V->nruns; i++) {
        const struct gz_run *r = &V->runs[i];
        int p = (int)r->index;
        if (whole[p].pid)
            continue;                      /* a helper makes it */
        if (is_follower[p] || stop_after >= 0) {   /* (a follower: made with the run it
                                                      follows, unless that run was not) */
            if (!is_follower[p] || cb->passes[p].state == 0)
                cb_set_pass(p, GPSIMD_ZY_PASS_SKIPPED);
            continue;
        }
        if (r->base >= 0) {                /* (after every run before it: wait_whole) */
            wait_whole();
            if (stop_after >= 0) {
                cb_set_pass(p, GPSIMD_ZY_PASS_SKIPPED);
                continue;
            }
        }
        int index = jobs_n++;
        if (make_run(r, index))
            stop_after = p;
    }
    wait_whole();
}

/* ---- the entry points -------------------------------------------------------- */

/* Fork the vector's leader (in its own process group). Returns its pid, or
 * -errno. The request must stay valid until the call returns; its runs and
 * cores are within GPSIMD_ZY_MAX_RUNS and GPSIMD_ZY_MAX_CORES (the zygote checked them). */
long gl_fork_leader(struct gl_request *req)
{
    pid_t zygote = getpid(), pid = fork();        /* (the leader dies with the zygote) */
    if (pid != 0)
        return pid < 0 ? -errno : pid;
    V = &req->v;
    setpgid(0, 0);
    if (req->oom_first)
        sb_write_text(AT_FDCWD, "/proc/self/oom_score_adj", "1000");
    sb_die_with_parent(zygote);
    gl_set_name("gpsimd-vector");
    static const int reset[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof reset / sizeof *reset; i++)
        signal(reset[i], SIG_DFL);         /* (whatever a static initialiser set) */
    gl_own_signals();
    close(req->image_fd);                  /* no descriptor leads back into the image */
    cb = req->image;
    cb_ncores = (int)V->ncores;
    /* the cores' output pipes to fds 3.. (/dev/null for one that could not
       be made), /dev/null after them, then nothing of the model's is
       reachable through an fd (the zygote chose fds above 3 + 2 * ncores) */
    int nfds = 2 * (int)V->ncores;
    for (int i = 0; i < nfds; i++)
        if (dup2(req->out[i] >= 0 ? req->out[i] : req->devnull, 3 + i) < 0)
            cb_model_error("dup2 of an output pipe", errno);
    if (dup2(req->devnull, 3 + nfds++) < 0)
        cb_model_error("dup2 of /dev/null", errno);
    if (syscall(SYS_close_range, 3 + nfds, ~0U, 0) != 0)
        for (int fd = 3 + nfds; fd < (1 << 16); fd++)
            close(fd);

    if (req->data_limit > 0)
        setrlimit(RLIMIT_DATA, &(struct rlimit){(rlim_t)req->data_limit, (rlim_t)req->data_limit});
    if (V->binding_size != (int64_t)sizeof(gpsimd_core_binding))
        cb_model_error("the binding size differs from abi.h's", 0);
    gl_launches_begin(req);
    memset(follower, -1, sizeof follower);   /* (every int -1) */
    for (int i = 0; i < V->nruns; i++) {
        int p = (int)V->runs[i].index;
        int64_t a = V->runs[i].after;
        if (a < 0)
            continue;
        if (a >= GPSIMD_ZY_MAX_RUNS || a == p || follower[a] >= 0)
            cb_model_error("a run that follows no run, or a second follower", 0);
        follower[a] = p;
        is_follower[p] = 1;
    }
    leader_run();
    cb_protect(1)->leader_done = 1;        /* the last record: its runs all recorded */
    _exit(0);
}
