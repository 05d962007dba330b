/*
 * cc.c - compiler subprocesses: fork/exec with the source in a temporary file and the output
 * captured in another, up to N at once.
 */
#define _GNU_SOURCE
#include "cc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (buf) {
        size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
        buf[got] = '\0';
    }
    fclose(f);
    return buf;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Starts argv with stdout and stderr going to log_path; returns the pid or -1. */
static pid_t spawn(char *const argv[], const char *log_path) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int devnull = open("/dev/null", O_RDONLY);
    if (fd < 0 || devnull < 0) _exit(126);
    dup2(devnull, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(argv[0], argv);
    dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

typedef struct {
    pid_t pid;
    size_t job;
    char src[4096], log[4096];
} running;

static void finish(lntune_cc_job *job, running *r, int wstatus) {
    job->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    job->diag = read_file(r->log);
    unlink(r->src);
    unlink(r->log);
}

size_t lntune_cc_compile(const char *compiler, const char *const *flags, lntune_cc_job *jobs,
                         size_t n, int parallel) {
    size_t failed = 0, next = 0, active = 0;
    char *dir = lntune_cc_tempdir();
    if (parallel < 1) parallel = 1;
    running *slots = calloc((size_t)parallel, sizeof *slots);
    if (!dir || !slots) {
        for (size_t i = 0; i < n; ++i) {
            jobs[i].status = -1;
            jobs[i].diag = strdup("cannot create a temporary directory");
        }
        free(dir);
        free(slots);
        return n;
    }
    while (next < n || active > 0) {
        for (int s = 0; s < parallel && next < n; ++s) {
            if (slots[s].pid > 0) continue;
            lntune_cc_job *job = &jobs[next];
            running *r = &slots[s];
            snprintf(r->src, sizeof r->src, "%s/job%zu.c", dir, next);
            snprintf(r->log, sizeof r->log, "%s/job%zu.log", dir, next);
            job->diag = NULL;
            const char *argv[256];
            int argc = 0;
            argv[argc++] = compiler;
            for (const char *const *f = flags; f && *f && argc < 240; ++f) argv[argc++] = *f;
            for (const char *const *f = job->extra_flags; f && *f && argc < 248; ++f)
                argv[argc++] = *f;
            argv[argc++] = r->src;
            argv[argc++] = "-o";
            argv[argc++] = job->out_path;
            argv[argc] = NULL;
            pid_t pid =
                write_file(r->src, job->source) == 0 ? spawn((char *const *)argv, r->log) : -1;
            if (pid < 0) {
                job->status = -1;
                job->diag = strdup("cannot start the compiler");
                unlink(r->src);
                ++failed;
            } else {
                r->pid = pid;
                r->job = next;
                ++active;
            }
            ++next;
        }
        if (active == 0) continue;
        int wstatus;
        pid_t done = wait(&wstatus);
        if (done < 0) break;
        for (int s = 0; s < parallel; ++s) {
            if (slots[s].pid != done) continue;
            finish(&jobs[slots[s].job], &slots[s], wstatus);
            if (jobs[slots[s].job].status != 0) ++failed;
            slots[s].pid = 0;
            --active;
        }
    }
    free(slots);
    lntune_cc_remove_dir(dir);
    free(dir);
    return failed;
}

int lntune_cc_link_shared(const char *compiler, const char *const *objs, size_t n,
                          const char *out_path, char **diag) {
    char *dir = lntune_cc_tempdir();
    if (!dir) return -1;
    char log[4096];
    snprintf(log, sizeof log, "%s/link.log", dir);
    const char **argv = calloc(n + 8, sizeof *argv);
    int status = -1;
    if (argv) {
        size_t argc = 0;
        argv[argc++] = compiler;
        argv[argc++] = "-shared";
        for (size_t i = 0; i < n; ++i) argv[argc++] = objs[i];
        argv[argc++] = "-o";
        argv[argc++] = out_path;
        argv[argc] = NULL;
        pid_t pid = spawn((char *const *)argv, log);
        int wstatus;
        if (pid > 0 && waitpid(pid, &wstatus, 0) == pid)
            status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
        free(argv);
    }
    if (diag) *diag = read_file(log);
    unlink(log);
    rmdir(dir);
    free(dir);
    return status;
}
