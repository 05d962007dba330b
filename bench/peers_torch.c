/*
 * peers_torch.c - PyTorch CPU, run as bench_torch.py in a Python process of its own at the same
 * thread count (before the in-process implementations, so the two never compete). The script
 * prints records as JSON lines; a missing Python or torch becomes n/a records, not an error.
 * Its Python: --python, else the peers folder's (bench/install-deps: PyTorch 2.x in a virtual
 * environment of the bench's own), else the system's.
 */
#define _POSIX_C_SOURCE 200809L
#include "peers.h"

#include "dtypes.h"
#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LNTUNE_BENCH_TORCH_SCRIPT
#define LNTUNE_BENCH_TORCH_SCRIPT ""
#endif

/* What the script reports: each op allocating its output per call, and into a preallocated one. */
static const char *const torch_impls[][2] = {{"torch", "layernorm"},
                                             {"torch_out", "layernorm"},
                                             {"torch", "rmsnorm"},
                                             {"torch_out", "rmsnorm"}};

static int add_absent(lntune_bench_records *out, const lntune_bench_shape *shapes, size_t nshapes,
                      int threads, int type, const char *why) {
    for (size_t s = 0; s < nshapes; ++s)
        for (size_t i = 0; i < 4; ++i) {
            lntune_bench_record r = {0};
            snprintf(r.impl, sizeof r.impl, "%s", torch_impls[i][0]);
            snprintf(r.op, sizeof r.op, "%s", torch_impls[i][1]);
            snprintf(r.dtype, sizeof r.dtype, "%s", lntune_type_name(type));
            r.rows = shapes[s].rows, r.H = shapes[s].H, r.threads = threads;
            r.us = r.gbps = r.max_error = -1.0;
            snprintf(r.note, sizeof r.note, "%s", why);
            if (lntune_bench_records_add(out, &r) != LNTUNE_OK) return LNTUNE_ENOMEM;
        }
    return LNTUNE_OK;
}

int lntune_bench_torch(const lntune_bench_config *cfg, const lntune_bench_shape *shapes,
                       size_t nshapes, int threads, lntune_bench_records *out) {
    const char *script = cfg->torch_script ? cfg->torch_script : LNTUNE_BENCH_TORCH_SCRIPT;
    char peers_python[4096];
    snprintf(peers_python, sizeof peers_python, "%s/bin/python3", lntune_bench_peers_dir());
    const char *python = cfg->python                       ? cfg->python
                         : access(peers_python, X_OK) == 0 ? peers_python
                                                           : "/usr/bin/python3";
    if (!script[0]) return add_absent(out, shapes, nshapes, threads, cfg->type, "PyTorch not run");
    if (strchr(script, '\'') || strchr(python, '\''))
        return add_absent(out, shapes, nshapes, threads, cfg->type,
                          "script path has a quote; not run");
    size_t cap = 256 + strlen(script) + strlen(python) + 24 * nshapes, len;
    char *cmd = malloc(cap);
    if (!cmd) return LNTUNE_ENOMEM;
    len = (size_t)snprintf(
        cmd, cap, "'%s' -u '%s' --threads %d --reps %d --rep-ms %g --dtype %s --shapes ", python,
        script, threads, cfg->reps, cfg->rep_ms, lntune_type_name(cfg->type));
    for (size_t s = 0; s < nshapes; ++s)
        len += (size_t)snprintf(cmd + len, cap - len, "%s%lldx%lld", s ? "," : "",
                                (long long)shapes[s].rows, (long long)shapes[s].H);
    fflush(NULL);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return add_absent(out, shapes, nshapes, threads, cfg->type, "could not start Python");
    size_t before = out->n;
    int rc = lntune_bench_records_read(p, out);
    int status = pclose(p);
    if (rc != LNTUNE_OK) return rc;
    if (out->n == before) {
        char why[96];
        snprintf(why, sizeof why, "%s %s gave no result (exit %d)", python, "bench_torch.py",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return add_absent(out, shapes, nshapes, threads, cfg->type, why);
    }
    return LNTUNE_OK;
}
