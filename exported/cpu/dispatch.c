/*
 * exported/cpu/dispatch.c - the forward dispatch of lntune_kernels.c, the rule of
 * runtime/dispatch.c: the winner of the call's rows bucket, else the nearest tuned bucket of the
 * same op, fusion, types, H and affine, else the nearest H's kernel that reads H at run time
 * (a winner's own or its twin), else the generic kernel; a winner of another bucket or H serves
 * only a call on its side of the streaming crossover, and another H's only rows aligned as its
 * own unless its stores are plain (serves). A quantized y's generic path is quant_fallback.c's.
 * No tuned kernel serves where tuned_usable() says the CPU lacks their ISA (or the file is
 * compiled for another architecture). Copied after pool.c and quant_fallback.c; it reads the
 * tables the export writes (tuned, op_takes_beta, residual_generic), tuned_usable and the generic
 * kernels' unfused_generic, streaming_call and typed_size.
 */

/* -DLNTUNE_KERNELS_TRACE=f: the app's void f(int entry, int other_h) is told which tuned kernel
 * each forward call takes (its row of tuned[], and 1 where that winner's run-time-H kernel
 * serves an H it was not tuned for), before it runs: one that declines its arguments hands the
 * call on to the generic kernel. Calls no tuned kernel serves are not reported. */
#ifdef LNTUNE_KERNELS_TRACE
void LNTUNE_KERNELS_TRACE(int entry, int other_h);
#define trace_tuned(entry, other_h) LNTUNE_KERNELS_TRACE(entry, other_h)
#else
#define trace_tuned(entry, other_h) ((void)0)
#endif
typedef struct {
    lntune_kernel_fn fn;
    const lntune_kernel_args *a;
} forward_job;

static int forward_part(const void *job, int i, int n) {
    const forward_job *j = job;
    int64_t begin = j->a->rows * i / n, end = j->a->rows * (i + 1) / n;
    return begin < end ? j->fn(j->a, begin, end) : LNTUNE_KERNEL_OK;
}

static int run_threads(lntune_kernel_fn fn, const lntune_kernel_args *a, int threads) {
    const forward_job job = {fn, a};
    int used;
    return run_parts(forward_part, &job, threads, a->rows, &used);
}

/* How far rows lies from e's rows bucket, as a ratio (1 inside it). */
static double rows_distance(const tuned_entry *e, int64_t rows) {
    return rows < e->rows_lo   ? (double)e->rows_lo / (double)rows
           : rows > e->rows_hi ? (double)rows / (double)e->rows_hi
                               : 1.0;
}

/* The largest power of two (up to 64) dividing a row of H elements of element bytes. */
static int64_t row_alignment(int64_t H, int64_t element) {
    int64_t a = 1;
    while (a < 64 && (H * element) % (2 * a) == 0) a *= 2;
    return a;
}

/* Whether e, tuned for another bucket or H, may serve a call of rows x H moving bytes per
 * element in all its tensors, element the smaller of x's and y's sizes: e's tuned data on the
 * call's side of the streaming crossover, and another H's kernel only on rows aligned as its
 * tuned ones unless it stores plainly (runtime/dispatch.c's serves(), with its figures). */
static int serves(const tuned_entry *e, int64_t rows, int64_t H, int64_t bytes, int64_t element) {
    const int64_t limit = (int64_t)(LNTUNE_KERNELS_STREAMING_BYTES) / bytes;
    if ((rows * H >= limit) != (e->tuned_rows * e->H >= limit)) return 0;
    return e->H == H || e->any_alignment ||
           row_alignment(H, element) >= row_alignment(e->H, element);
}

/* The winner of (op, fusion, types, H, affine), forward or backward, for rows: its bucket,
 * else the nearest tuned one (forward: that serves the call, bytes and element as serves takes
 * them). Batch-invariant, a forward call's winner is the one tuned at the most rows, whatever
 * rows the call has. */
static const tuned_entry *find_tuned(int backward, int op, int fusion, int types, int64_t H,
                                     int affine, int64_t rows, int64_t bytes, int64_t element) {
    const tuned_entry *best = NULL;
    double best_distance = 0.0;
    if (!tuned_usable()) return NULL;
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; ++i) {
        const tuned_entry *e = &tuned[i];
        if (!(backward ? e->backward != NULL : e->fn != NULL) || e->op != op ||
            e->fusion != fusion || e->types != types || e->H != H || e->affine != affine)
            continue;
        if (LNTUNE_KERNELS_BATCH_INVARIANT && !backward) {
            if (!best || e->rows_lo > best->rows_lo) best = e;
            continue;
        }
        if (rows >= e->rows_lo && rows <= e->rows_hi) return e;
        if (!backward && !serves(e, rows, H, bytes, element)) continue;
        const double d = rows_distance(e, rows);
        if (!best || d < best_distance) best = e, best_distance = d;
    }
    return best;
}

/* Whether a orders before b among the run-time-H kernels for a call of rows x H: by H ratio,
 * then rows, then the smaller H. */
static int nearer(const tuned_entry *a, const tuned_entry *b, int64_t H, int64_t rows) {
    const double ra = a->H > H ? (double)a->H / (double)H : (double)H / (double)a->H;
    const double rb = b->H > H ? (double)b->H / (double)H : (double)H / (double)b->H;
    if (ra != rb) return ra < rb;
    const double da = rows_distance(a, rows), db = rows_distance(b, rows);
    return da != db ? da < db : a->H < b->H;
}

/* The forward kernel reading H at run time of (op, fusion, types, affine) for another H: the
 * nearest one where it serves the call, else the nearest that serves it among those tuned at
 * the call's rows bucket (runtime/dispatch.c's take_if_serves, with the figures). */
static const tuned_entry *find_nearest_h(int op, int fusion, int types, int64_t H, int affine,
                                         int64_t rows, int64_t bytes, int64_t element) {
    const tuned_entry *nearest = NULL, *best = NULL;
    if (!tuned_usable()) return NULL;
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; ++i) {
        const tuned_entry *e = &tuned[i];
        if (!e->any_h || e->op != op || e->fusion != fusion || e->types != types ||
            e->affine != affine)
            continue;
        if (!nearest || nearer(e, nearest, H, rows)) nearest = e;
        if (rows >= e->rows_lo && rows <= e->rows_hi && serves(e, rows, H, bytes, element) &&
            (!best || nearer(e, best, H, rows)))
            best = e;
    }
    return nearest && serves(nearest, rows, H, bytes, element) ? nearest : best;
}

/* A weight offset's gamma (and beta) for the generic kernels, which do not read the offset: fp32
 * offset + gamma, each one fp32 addition of gamma widened exactly (what a tuned affine=offset
 * kernel computes), and beta widened, into a malloc'd buffer (NULL when out of memory). */
static float *offset_params(const lntune_kernel_args *a, int pt) {
    float *g = malloc((size_t)a->H * (a->beta ? 2 : 1) * sizeof *g);
    for (int64_t i = 0; g && i < a->H; ++i) {
        g[i] = a->weight_offset + typed_load(pt, a->gamma, i);
        if (a->beta) g[a->H + i] = typed_load(pt, a->beta, i);
    }
    return g;
}

static int run(int op, const lntune_kernel_args *args, lntune_kernels_types t) {
    const int xt = lntune_internal_type(t.x, 0), rt = lntune_internal_type(t.residual, xt);
    const int qk = args ? lntune_quant_kind(args, t.y) : -1;
    /* y's type, or with a quantized y that of the fp32 y its codes are taken from */
    const int yt = qk >= 0 ? 0 : lntune_internal_type(t.y, xt);
    int pt = lntune_internal_type(t.params, xt);
    if (!args || !args->x || !args->y || args->H <= 0 || args->rows < 0 ||
        (args->residual_out && !args->residual) || (!op_takes_beta[op] && args->beta) || xt < 0 ||
        yt < 0 || pt < 0 || rt < 0)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    if (!lntune_scale_valid(args, qk) || !lntune_offset_valid(args))
        return LNTUNE_KERNEL_EUNSUPPORTED;
    const int offset = args->weight_offset != 0.0f;
    if (args->rows == 0) return LNTUNE_KERNEL_OK;
    lntune_kernel_args a = *args;
    if (!lntune_complete_args(&a)) return LNTUNE_KERNEL_EUNSUPPORTED;
    const int fusion = !a.residual ? 0 : a.residual_out ? 2 : 1;
    const int types = lntune_pack_types(xt, yt, pt, rt, qk, fusion);
    int affine = offset ? 3 : a.gamma ? 1 : a.beta ? 2 : 0;
    /* as liblntune weighs a call against the crossover and a row's alignment (core/fusion.h) */
    const int64_t ysize = qk >= 0 ? 1 : (int64_t)typed_size(yt), rsize = (int64_t)typed_size(rt);
    const int64_t bytes =
        (int64_t)typed_size(xt) + ysize + (fusion ? rsize : 0) + (fusion == 2 ? rsize : 0);
    const int64_t element = ysize < (int64_t)typed_size(xt) ? ysize : (int64_t)typed_size(xt);
    const tuned_entry *e =
        affine != 2 ? find_tuned(0, op, fusion, types, a.H, affine, a.rows, bytes, element) : NULL;
    const int other_h = !e && affine != 2 && !LNTUNE_KERNELS_BATCH_INVARIANT;
    if (other_h) e = find_nearest_h(op, fusion, types, a.H, affine, a.rows, bytes, element);
    if (e) {
        trace_tuned((int)(e - tuned), other_h);
        int rc = run_threads(other_h ? e->any_h : e->fn, &a, e->threads);
        if (rc != LNTUNE_KERNEL_EUNSUPPORTED) return rc;
    }
    float *summed = NULL;
    if (offset) { /* the generic kernel of fp32 gamma/beta on offset + gamma */
        if (!(summed = offset_params(&a, pt))) return LNTUNE_KERNEL_EUNSUPPORTED;
        a.gamma = summed;
        if (a.beta) a.beta = summed + a.H;
        pt = 0;
        affine = 1;
    }
    /* (the residual fallback decides on streaming itself, since it streams residual_out; a
     * quantized y's fp32 rows go to a buffer that stays in cache) */
    lntune_kernel_fn generic =
        fusion ? residual_generic[op][xt][yt][pt][rt]
               : unfused_generic(
                     op, affine, xt, yt, pt,
                     qk < 0 && streaming_call(&a, (int64_t)(typed_size(xt) + typed_size(yt))));
    int threads = a.rows > 1 && a.rows * a.H >= (INT64_C(1) << 18) ? LNTUNE_KERNELS_MAX_THREADS : 1;
    const int rc =
        qk >= 0 ? run_quantized(generic, &a, threads, typed_size(xt), typed_size(rt), qk >= 2)
                : run_threads(generic, &a, threads);
    free(summed);
    return rc;
}
