/*
 * sandbox.c - verification and timing in a forked worker (see sandbox.h).
 *
 * Parent and worker share one anonymous MAP_SHARED mapping: a header (the item running, a
 * heartbeat), a state byte per item, and the items' results. The worker holds the write end of a
 * pipe it never writes to, so the parent learns of its end by EOF, whichever way it died, and
 * poll() gives the time limit. After a crash the item the header names is the culprit; the items
 * still pending go to a new worker, so each round settles at least one item.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include "heartbeat.h"
#include "lntune.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { PENDING = 0, DONE = 1, CRASHED = 2, LOST = 3 };

typedef lntune_heartbeat_shared header;

typedef struct batch batch;
struct batch {
    size_t n, result_size;
    header *hdr;
    volatile unsigned char *state;
    int64_t *map; /* time_body: candidate of the timed subset -> item */
    unsigned char *results;
    void *map_base;
    size_t map_len;
    void (*body)(batch *b, lntune_pool *pool);
    void *ud;
    const char *what; /* "verified", "timed" */
    double limit_s;
};

int lntune_sandbox_enabled(void) {
    const char *e = getenv("LNTUNE_SANDBOX");
    return !(e && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0));
}

static double base_limit_s(void) {
    const char *e = getenv("LNTUNE_SANDBOX_TIMEOUT");
    double s = e ? strtod(e, NULL) : 0.0;
    return s > 0.0 ? s : 10.0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *signal_name(int sig) {
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},
                 {SIGBUS, "SIGBUS"},   {SIGABRT, "SIGABRT"}, {SIGTRAP, "SIGTRAP"},
                 {SIGSYS, "SIGSYS"},   {SIGKILL, "SIGKILL"}, {SIGXFSZ, "SIGXFSZ"},
                 {SIGXCPU, "SIGXCPU"}, {SIGPIPE, "SIGPIPE"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if (names[i].sig == sig) return names[i].name;
    return "a signal";
}

static int batch_init(batch *b, size_t n, size_t result_size) {
    size_t off_state = sizeof(header), off_map = (off_state + n + 7) / 8 * 8;
    size_t off_res = (off_map + n * sizeof(int64_t) + 63) / 64 * 64;
    b->map_len = off_res + n * result_size;
    b->map_base = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b->map_base == MAP_FAILED) return -1;
    unsigned char *base = b->map_base;
    b->n = n;
    b->result_size = result_size;
    b->hdr = (header *)base;
    b->state = base + off_state;
    b->map = (int64_t *)(base + off_map);
    b->results = base + off_res;
    b->hdr->current = -1;
    return 0;
}

static void settle(batch *b, int from, int to, lntune_sandbox_outcome *out, const char *msg) {
    for (size_t k = 0; k < b->n; ++k) {
        if (b->state[k] != from) continue;
        b->state[k] = (unsigned char)to;
        snprintf(out[k].message, sizeof out[k].message, "%s", msg);
    }
}

/* The worker: never returns. */
static void worker(batch *b, pid_t parent, lntune_pool *parent_pool) {
    /* Die with the tuner, even by kill -9; leave no core file for a kernel's crash. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    /* A kernel's fault must end the worker by its signal, which names it, even where the
     * program (or a sanitizer) installed handlers that would report and exit instead. */
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; ++i) signal(faults[i], SIG_DFL);
    lntune_pool *pool = NULL;
    int threads = lntune_pool_threads(parent_pool);
    if (threads > 1 && lntune_pool_create(threads, &pool) != LNTUNE_OK) _exit(126);
    lntune_heartbeat_attach(b->hdr);
    b->body(b, pool);
    _exit(0); /* no atexit handlers, no stdio flush of the parent's buffers */
}

/* Waits for the worker's end; kills it when its heartbeat stands still past the limit. */
static int wait_worker(batch *b, int fd, pid_t pid, int *status) {
    uint64_t last_beat = b->hdr->beat;
    int64_t last_cur = b->hdr->current;
    double last = now_s();
    int timed_out = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 50);
        if (r > 0) {
            char c;
            ssize_t got = read(fd, &c, 1);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) break;
        } else if (r < 0 && errno != EINTR) {
            break;
        }
        uint64_t beat = b->hdr->beat;
        int64_t cur = b->hdr->current;
        if (beat != last_beat || cur != last_cur) {
            last_beat = beat, last_cur = cur, last = now_s();
        } else if (now_s() - last > b->limit_s) {
            kill(pid, SIGKILL);
            timed_out = 1;
            break;
        }
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return timed_out;
}

static void run_batch(batch *b, lntune_pool *pool, lntune_sandbox_outcome *out) {
    for (size_t k = 0; k < b->n; ++k) out[k].state = LNTUNE_SANDBOX_DONE, out[k].message[0] = 0;
    if (!lntune_sandbox_enabled()) {
        b->body(b, pool);
        return;
    }
    char msg[sizeof out[0].message];
    for (;;) {
        size_t pending = 0;
        for (size_t k = 0; k < b->n; ++k) pending += b->state[k] == PENDING;
        if (!pending) break;
        b->hdr->current = -1;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            snprintf(msg, sizeof msg, "cannot start a worker: %s", strerror(errno));
            settle(b, PENDING, LOST, out, msg);
            break;
        }
        pid_t parent = getpid(), pid = fork();
        if (pid == 0) {
            close(fds[0]);
            worker(b, parent, pool);
        }
        close(fds[1]);
        if (pid < 0) {
            snprintf(msg, sizeof msg, "cannot start a worker: %s", strerror(errno));
            close(fds[0]);
            settle(b, PENDING, LOST, out, msg);
            break;
        }
        int status = 0, timed_out = wait_worker(b, fds[0], pid, &status);
        close(fds[0]);
        int64_t cur = b->hdr->current;
        if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            settle(b, PENDING, LOST, out, "the worker ended without running it");
            break;
        }
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        if (!timed_out && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)) {
            settle(b, PENDING, LOST, out, "interrupted");
            break;
        }
        if (timed_out)
            snprintf(msg, sizeof msg, "timed out: no progress for %.0f s while %s (killed)",
                     b->limit_s, b->what);
        else if (sig)
            snprintf(msg, sizeof msg, "crashed with %s (%s) while %s", signal_name(sig),
                     strsignal(sig), b->what);
        else
            snprintf(msg, sizeof msg, "the worker exited with status %d while %s",
                     WEXITSTATUS(status), b->what);
        if (cur >= 0 && (size_t)cur < b->n && b->state[cur] == PENDING) {
            b->state[cur] = CRASHED;
            snprintf(out[cur].message, sizeof out[cur].message, "%s", msg);
        } else {
            /* Not a kernel's fault: leave the items unrecorded for a later run. */
            settle(b, PENDING, LOST, out, msg);
            break;
        }
    }
    for (size_t k = 0; k < b->n; ++k)
        out[k].state = b->state[k] == CRASHED ? LNTUNE_SANDBOX_CRASHED
                       : b->state[k] == DONE  ? LNTUNE_SANDBOX_DONE
                                              : LNTUNE_SANDBOX_LOST;
}

/* ---- verification ---- */

typedef struct {
    lntune_verifier *forward;
    lntune_backward_verifier *backward;
} verifiers;

static void verify_body(batch *b, lntune_pool *pool) {
    const verifiers *v = b->ud;
    lntune_sandbox_check *c = (lntune_sandbox_check *)b->results;
    for (size_t k = 0; k < b->n; ++k) {
        if (b->state[k] != PENDING) continue;
        b->hdr->current = (int64_t)k;
        b->hdr->beat++;
        if (v->backward)
            c[k].rc = lntune_backward_verifier_check(v->backward, c[k].backward, c[k].fixed_h,
                                                     c[k].threads, pool, &c[k].result);
        else
            c[k].rc = lntune_verifier_check(v->forward, c[k].fn, c[k].affine, c[k].fixed_h,
                                            c[k].threads, pool, &c[k].result);
        b->state[k] = DONE;
    }
    b->hdr->current = -1;
}

static void verify_batch(verifiers *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                         lntune_sandbox_outcome *out) {
    batch b = {0};
    if (n == 0) return;
    if (batch_init(&b, n, sizeof *c) != 0) {
        for (size_t k = 0; k < n; ++k) {
            out[k].state = LNTUNE_SANDBOX_LOST;
            snprintf(out[k].message, sizeof out[k].message, "out of memory");
        }
        return;
    }
    memcpy(b.results, c, n * sizeof *c);
    b.body = verify_body;
    b.ud = v;
    b.what = "verified";
    b.limit_s = base_limit_s();
    run_batch(&b, pool, out);
    memcpy(c, b.results, n * sizeof *c);
    munmap(b.map_base, b.map_len);
}

void lntune_sandbox_verify(lntune_verifier *v, lntune_sandbox_check *c, size_t n, lntune_pool *pool,
                           lntune_sandbox_outcome *out) {
    verifiers vs = {v, NULL};
    verify_batch(&vs, c, n, pool, out);
}

void lntune_sandbox_verify_backward(lntune_backward_verifier *v, lntune_sandbox_check *c, size_t n,
                                    lntune_pool *pool, lntune_sandbox_outcome *out) {
    verifiers vs = {NULL, v};
    verify_batch(&vs, c, n, pool, out);
}

/* ---- timing ---- */

typedef struct {
    const lntune_kernel_args *args;
    int min_rounds;
    double budget_ns;
} time_job;

/* The worker's copies of the parent's x and y buffers: where a pointer into them moves. */
typedef struct {
    const char *from[2];
    char *to[2];
    size_t bytes[2];
} moves;

static const void *moved(const moves *mv, const void *p) {
    for (int k = 0; k < 2; ++k)
        if (p && (const char *)p >= mv->from[k] && (const char *)p < mv->from[k] + mv->bytes[k])
            return mv->to[k] + ((const char *)p - mv->from[k]);
    return p;
}

static void time_body(batch *b, lntune_pool *pool) {
    time_job *t = b->ud;
    lntune_timed *all = (lntune_timed *)b->results;
    lntune_timed *sub = malloc(b->n * sizeof *sub);
    size_t m = 0;
    if (!sub) _exit(125);
    for (size_t k = 0; k < b->n; ++k)
        if (b->state[k] == PENDING) b->map[m] = (int64_t)k, sub[m++] = all[k];
    /* The worker's own copies of x and y: after fork the parent's pages are copy-on-write, and
     * writing y would fault page by page (and split huge pages) through every timed call. */
    lntune_kernel_args a = *t->args;
    size_t xn = (size_t)((a.rows - 1) * a.x_stride + a.H),
           yn = (size_t)((a.rows - 1) * a.y_stride + a.H);
    /* Candidates on the same buffers may reach further (a copy of a fused call's bytes). */
    for (size_t i = 0; i < m; ++i)
        if (sub[i].args && sub[i].args->x == a.x && sub[i].args->y == a.y) {
            const lntune_kernel_args *c = sub[i].args;
            const size_t cx = (size_t)((c->rows - 1) * c->x_stride + c->H),
                         cy = (size_t)((c->rows - 1) * c->y_stride + c->H);
            xn = cx > xn ? cx : xn;
            yn = cy > yn ? cy : yn;
        }
    float *x = aligned_alloc(64, (xn * sizeof(float) + 63) / 64 * 64);
    float *y = aligned_alloc(64, (yn * sizeof(float) + 63) / 64 * 64);
    if (!x || !y) _exit(125);
    memcpy(x, a.x, xn * sizeof(float));
    memcpy(y, a.y, yn * sizeof(float));
    const moves mv = {{a.x, a.y}, {(char *)x, (char *)y}, {xn * sizeof(float), yn * sizeof(float)}};
    /* Candidates' own args and backward calls on those buffers move to the worker's copies. */
    lntune_kernel_args *own = malloc((m ? m : 1) * sizeof *own);
    lntune_backward_call *calls = malloc((m ? m : 1) * sizeof *calls);
    if (!own || !calls) _exit(125);
    for (size_t i = 0; i < m; ++i) {
        if (sub[i].args) {
            own[i] = *sub[i].args;
            own[i].x = moved(&mv, own[i].x);
            own[i].y = (void *)moved(&mv, own[i].y);
            sub[i].args = &own[i];
        }
        if (sub[i].call) {
            calls[i] = *sub[i].call;
            calls[i].args.x = moved(&mv, calls[i].args.x);
            calls[i].args.dy = moved(&mv, calls[i].args.dy);
            calls[i].args.dx = (void *)moved(&mv, calls[i].args.dx);
            /* the fused backward's dresidual_out lies in x's region, after dy (problem.c) */
            calls[i].args.dresidual_out = moved(&mv, calls[i].args.dresidual_out);
            sub[i].call = &calls[i];
        }
    }
    a.x = x;
    a.y = y;
    lntune_heartbeat_map(b->map);
    lntune_time_interleaved(sub, m, &a, pool, t->min_rounds, t->budget_ns);
    lntune_heartbeat_map(NULL);
    for (size_t i = 0; i < m; ++i) { /* the parent's pointers again */
        sub[i].args = all[b->map[i]].args;
        sub[i].call = all[b->map[i]].call;
    }
    free(own);
    free(calls);
    free(x);
    free(y);
    for (size_t i = 0; i < m; ++i) {
        all[b->map[i]] = sub[i];
        b->state[b->map[i]] = DONE;
    }
    lntune_heartbeat_idle();
    free(sub);
}

void lntune_sandbox_time(lntune_timed *c, size_t n, const lntune_kernel_args *args,
                         lntune_pool *pool, int min_rounds, double budget_ns,
                         lntune_sandbox_outcome *out) {
    batch b = {0};
    if (n == 0) return;
    if (batch_init(&b, n, sizeof *c) != 0) {
        for (size_t k = 0; k < n; ++k) {
            c[k].failed = 1;
            out[k].state = LNTUNE_SANDBOX_LOST;
            snprintf(out[k].message, sizeof out[k].message, "out of memory");
        }
        return;
    }
    memcpy(b.results, c, n * sizeof *c);
    time_job t = {args, min_rounds, budget_ns};
    b.body = time_body;
    b.ud = &t;
    b.what = "timed";
    /* A call moves rows x H x 8 bytes; allow 100 MB/s on top of the base. */
    b.limit_s = base_limit_s() + (double)args->rows * (double)args->H * 8.0 / 100e6;
    run_batch(&b, pool, out);
    memcpy(c, b.results, n * sizeof *c);
    for (size_t k = 0; k < n; ++k)
        if (out[k].state != LNTUNE_SANDBOX_DONE) c[k].failed = 1;
    munmap(b.map_base, b.map_len);
}
