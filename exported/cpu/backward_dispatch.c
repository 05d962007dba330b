/*
 * exported/cpu/backward_dispatch.c - the backward dispatch of lntune_kernels.c: per-part fp32
 * partials of dgamma/dbeta, then a second pass in part order (runtime/api_backward.c's
 * scheme). Copied after dispatch.c, whose run_parts and find_tuned it uses.
 */
typedef struct {
    lntune_backward_kernel_fn fn;
    const lntune_backward_kernel_args *a;
    float *dgamma, *dbeta; /* parts x H each, or NULL */
} backward_job;

static int backward_part(const void *job, int i, int n) {
    const backward_job *j = job;
    const int64_t H = j->a->H, begin = j->a->rows * i / n, end = j->a->rows * (i + 1) / n;
    return begin < end ? j->fn(j->a, begin, end, j->dgamma ? j->dgamma + i * H : NULL,
                               j->dbeta ? j->dbeta + i * H : NULL)
                       : LNTUNE_KERNEL_OK;
}

/* Runs fn on threads parts with zeroed partials; *parts: the parts it ran in. */
static int backward_threads(lntune_backward_kernel_fn fn, const lntune_backward_kernel_args *a,
                            int threads, float *dgamma, float *dbeta, int *parts) {
    const size_t n = (size_t)(threads < a->rows ? threads : a->rows) * (size_t)a->H;
    if (dgamma) memset(dgamma, 0, n * sizeof *dgamma);
    if (dbeta) memset(dbeta, 0, n * sizeof *dbeta);
    const backward_job job = {fn, a, dgamma, dbeta};
    return run_parts(backward_part, &job, threads, a->rows, parts);
}

/* out[j] = parts[0][j] + ... + parts[n-1][j] in fp32, stored as type (rounded once). */
static void backward_reduce(const float *parts, int n, int64_t H, void *out, int type) {
    for (int64_t j = 0; j < H; ++j) {
        float s = parts[j];
        for (int t = 1; t < n; ++t) s += parts[(int64_t)t * H + j];
        typed_store(type, out, j, s);
    }
}

static int run_backward(int op, const lntune_backward_kernel_args *args, lntune_kernels_types t,
                        void *dgamma, void *dbeta) {
    const int xt = lntune_internal_type(t.x, 0), pt = lntune_internal_type(t.params, xt);
    if (!args || !args->x || !args->dy || !args->dx || args->H <= 0 || args->rows < 0 ||
        (!op_takes_beta[op] && dbeta) || (op_takes_beta[op] && !args->mean != !args->rstd) ||
        xt < 0 || pt < 0)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    if (args->rows == 0) return LNTUNE_KERNEL_OK;
    lntune_backward_kernel_args a = *args;
    if (!lntune_complete_backward_args(&a)) return LNTUNE_KERNEL_EUNSUPPORTED;
    const int fused = a.dresidual_out != NULL;
    const tuned_entry *e = find_tuned(1, op, fused, xt | xt << 2 | pt << 4, a.H, 1, a.rows, 0, 0);
    const lntune_backward_kernel_fn generic = generic_backward[op][fused][xt][pt];
    const int generic_threads =
        a.rows > 1 && a.rows * a.H >= (INT64_C(1) << 18) ? LNTUNE_KERNELS_MAX_THREADS : 1;
    const int most = e && e->threads > generic_threads ? e->threads : generic_threads;
    const size_t n = (size_t)(most < a.rows ? most : a.rows) * (size_t)a.H;
    float *dg = dgamma ? (float *)malloc(n * sizeof *dg) : NULL;
    float *db = dbeta ? (float *)malloc(n * sizeof *db) : NULL;
    int rc = 2, parts = 1; /* 2: out of memory for the partials */
    if ((!dgamma || dg) && (!dbeta || db)) {
        rc = e ? backward_threads(e->backward, &a, e->threads, dg, db, &parts)
               : LNTUNE_KERNEL_EUNSUPPORTED;
        if (rc == LNTUNE_KERNEL_EUNSUPPORTED)
            rc = backward_threads(generic, &a, generic_threads, dg, db, &parts);
    }
    if (rc == LNTUNE_KERNEL_OK && dgamma) backward_reduce(dg, parts, a.H, dgamma, pt);
    if (rc == LNTUNE_KERNEL_OK && dbeta) backward_reduce(db, parts, a.H, dbeta, pt);
    free(dg);
    free(db);
    return rc;
}
