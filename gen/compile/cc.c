/*
 * cc.c - the compiler of every step (see cc.h): chosen by one rule, started with posix_spawnp
 * and fed and drained through one poll loop, many at once on threads.
 */
#define _GNU_SOURCE
#include "cc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *const lntune_kernel_cflags[] = {"-std=c11", "-O3", "-march=native", "-fPIC", NULL};

/* True if name is an executable file in a $PATH directory (an empty entry is "."). */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char full[4096];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? p : ".", name);
        if (access(full, X_OK) == 0) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

const char *lntune_default_compiler(void) {
    const char *cc = getenv("LNTUNE_CC");
    if (cc && *cc) return cc;
    /* The tuner measures what clang makes of the templates; `verify` and `time` compile alike. */
    static const char *const preferred[] = {"clang-14", "clang"};
    for (size_t i = 0; i < sizeof preferred / sizeof preferred[0]; ++i)
        if (on_path(preferred[i])) return preferred[i];
    return "cc";
}

char *lntune_cc_tempdir(void) {
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/lntune-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpl)) return NULL;
    return strdup(tmpl);
}

void lntune_cc_remove_dir(const char *dir) {
    if (!dir) return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4352];
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* ------------------------------------------------------------------------------------------ */
/* Running a process                                                                          */

static int output_reserve(lntune_cc_output *b, size_t extra) {
    if (b->cap - b->len > extra) return 0;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap - b->len <= extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Reads what is available on fd into b; returns 1 at EOF, 0 for more later, -1 on error. */
static int drain(int fd, lntune_cc_output *b) {
    for (;;) {
        if (output_reserve(b, 65536) != 0) return -1;
        ssize_t n = read(fd, b->data + b->len, b->cap - b->len - 1);
        if (n > 0) {
            b->len += (size_t)n;
            b->data[b->len] = '\0'; /* keeps stderr text printable */
            continue;
        }
        if (n == 0) return 1;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

/*
 * stdin is a socket so that a compiler exiting early gives us EPIPE from send(MSG_NOSIGNAL)
 * rather than a SIGPIPE that would kill the whole process; all three streams are serviced by
 * one poll loop, so a compiler blocked writing a large object can never deadlock with us.
 * Every descriptor is close-on-exec, so compilers started by other threads inherit none of ours
 * (an inherited stdin writer would keep our compiler waiting for EOF forever). posix_spawn, not
 * fork: the callers run thread pools, and the child execs at once.
 */
int lntune_cc_run(const char *const *argv, const char *input, size_t input_len,
                  lntune_cc_output *out, lntune_cc_output *err, int *status) {
    lntune_cc_output discard_out = {0}, discard_err = {0};
    if (!out) out = &discard_out;
    if (!err) err = &discard_err;
    int in_sv[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
    int rc = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sv) != 0 ||
        pipe2(out_p, O_CLOEXEC) != 0 || pipe2(err_p, O_CLOEXEC) != 0) {
        rc = errno;
        goto close_all;
    }
    posix_spawn_file_actions_t fa;
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0) goto close_all;
    posix_spawn_file_actions_adddup2(&fa, in_sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_p[1], 2);
    pid_t pid;
    rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) goto close_all;
    close(in_sv[1]);
    close(out_p[1]);
    close(err_p[1]);
    in_sv[1] = out_p[1] = err_p[1] = -1;

    int in_fd = in_sv[0], out_fd = out_p[0], err_fd = err_p[0];
    fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
    fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
    fcntl(err_fd, F_SETFL, fcntl(err_fd, F_GETFL) | O_NONBLOCK);
    size_t sent = 0;
    if (input_len == 0) {
        close(in_fd);
        in_fd = in_sv[0] = -1;
    }
    while (out_fd >= 0 || err_fd >= 0) {
        struct pollfd fds[3];
        int nfds = 0, i_in = -1, i_out = -1, i_err = -1;
        if (in_fd >= 0) fds[i_in = nfds++] = (struct pollfd){in_fd, POLLOUT, 0};
        if (out_fd >= 0) fds[i_out = nfds++] = (struct pollfd){out_fd, POLLIN, 0};
        if (err_fd >= 0) fds[i_err = nfds++] = (struct pollfd){err_fd, POLLIN, 0};
        if (poll(fds, (nfds_t)nfds, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (i_in >= 0 && fds[i_in].revents) {
            ssize_t n = send(in_fd, input + sent, input_len - sent, MSG_NOSIGNAL);
            if (n > 0) sent += (size_t)n;
            /* EPIPE: the compiler stopped reading (it failed); its stderr says why. */
            if ((n < 0 && errno != EINTR && errno != EAGAIN) || sent == input_len) {
                close(in_fd);
                in_fd = in_sv[0] = -1;
            }
        }
        if (i_out >= 0 && fds[i_out].revents && drain(out_fd, out) != 0) {
            close(out_fd);
            out_fd = out_p[0] = -1;
        }
        if (i_err >= 0 && fds[i_err].revents && drain(err_fd, err) != 0) {
            close(err_fd);
            err_fd = err_p[0] = -1;
        }
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) continue;
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
close_all:
    for (int i = 0; i < 2; ++i) {
        if (in_sv[i] >= 0) close(in_sv[i]);
        if (out_p[i] >= 0) close(out_p[i]);
        if (err_p[i] >= 0) close(err_p[i]);
    }
    free(discard_out.data);
    free(discard_err.data);
    return rc;
}

/* The compiler's messages of a finished run, or why it did not run (malloc'd). */
static char *messages(const char *compiler, int rc, lntune_cc_output *err) {
    if (rc != 0) {
        char text[4352];
        snprintf(text, sizeof text, "cannot run the C compiler '%s': %s", compiler, strerror(rc));
        return strdup(text);
    }
    char *text = err->data;
    err->data = NULL;
    return text;
}

/* ------------------------------------------------------------------------------------------ */
/* Objects and shared objects                                                                 */

typedef struct {
    const char *compiler;
    const char *const *flags;
    lntune_cc_job *jobs;
    size_t n;
    atomic_size_t next, failed;
} compile_batch;

static void compile_one(const compile_batch *b, lntune_cc_job *job) {
    size_t nflags = 0, nextra = 0;
    while (b->flags && b->flags[nflags]) ++nflags;
    while (job->extra_flags && job->extra_flags[nextra]) ++nextra;
    const char **argv = malloc((nflags + nextra + 8) * sizeof *argv);
    job->diag = NULL;
    job->status = -1;
    if (!argv) {
        job->diag = strdup("out of memory");
        return;
    }
    size_t argc = 0;
    argv[argc++] = b->compiler;
    for (size_t i = 0; i < nflags; ++i) argv[argc++] = b->flags[i];
    for (size_t i = 0; i < nextra; ++i) argv[argc++] = job->extra_flags[i];
    const char *const io[] = {"-x", "c", "-", "-o", job->out_path, NULL};
    for (const char *const *f = io; *f; ++f) argv[argc++] = *f;
    argv[argc] = NULL;
    lntune_cc_output err = {0};
    int status = -1;
    int rc = lntune_cc_run(argv, job->source, strlen(job->source), NULL, &err, &status);
    free(argv);
    job->status = rc ? -1 : status;
    job->diag = messages(b->compiler, rc, &err);
    free(err.data);
}

static void *compile_worker(void *arg) {
    compile_batch *b = arg;
    for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;) {
        compile_one(b, &b->jobs[i]);
        if (b->jobs[i].status != 0) atomic_fetch_add(&b->failed, 1);
    }
    return NULL;
}

void lntune_cc_run_workers(void *(*worker)(void *), void *arg, size_t n, int parallel) {
    size_t threads = parallel < 1 ? 1 : (size_t)parallel;
    if (threads > n) threads = n;
    pthread_t *tids = calloc(threads, sizeof *tids);
    size_t started = 0;
    /* The calling thread is a worker too, so a failed pthread_create only costs parallelism. */
    while (tids && started + 1 < threads && pthread_create(&tids[started], NULL, worker, arg) == 0)
        ++started;
    worker(arg);
    for (size_t i = 0; i < started; ++i) pthread_join(tids[i], NULL);
    free(tids);
}

size_t lntune_cc_compile(const char *compiler, const char *const *flags, lntune_cc_job *jobs,
                         size_t n, int parallel) {
    if (n == 0) return 0;
    compile_batch b = {compiler, flags, jobs, n, 0, 0};
    lntune_cc_run_workers(compile_worker, &b, n, parallel);
    return atomic_load(&b.failed);
}

int lntune_cc_link_shared(const char *compiler, const char *const *objs, size_t n,
                          const char *out_path, char **diag) {
    if (diag) *diag = NULL;
    const char **argv = calloc(n + 8, sizeof *argv);
    if (!argv) return -1;
    size_t argc = 0;
    argv[argc++] = compiler;
    argv[argc++] = "-shared";
    for (size_t i = 0; i < n; ++i) argv[argc++] = objs[i];
    argv[argc++] = "-o";
    argv[argc++] = out_path;
    argv[argc] = NULL;
    lntune_cc_output err = {0};
    int status = -1, rc = lntune_cc_run(argv, NULL, 0, NULL, &err, &status);
    free(argv);
    char *text = messages(compiler, rc, &err);
    free(err.data);
    if (diag)
        *diag = text;
    else
        free(text);
    return rc ? -1 : status;
}
