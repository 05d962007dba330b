/*
 * bench.h - lntune against its peers: times LayerNorm and RMSNorm forward for lntune (tuned and
 * built-in, through the public runtime API), oneDNN 2.x and 3.x, PyTorch CPU, a naive two-pass C
 * kernel, and two memory copies of the same bytes, in one process at one thread count. A run has
 * one element type (fp32, fp16 or bf16) for x, y, gamma and beta alike, as `lntune --dtype T`
 * tunes. Every implementation is checked against the float64 reference before it is timed, and
 * every measurement says how much CPU other processes took while it ran.
 *
 * Results are records (one per implementation x shape x thread count) that travel as JSON lines,
 * so that runs at several thread counts (one process each) and PyTorch (a Python process) merge
 * into one report.
 */
#ifndef LNTUNE_BENCH_H
#define LNTUNE_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Other processes' CPU use above this (in cores, averaged over a measurement) marks it busy. */
#define LNTUNE_BENCH_BUSY_CORES 0.10

/*
 * An implementation whose output differs from the float64 reference by more than this, in the
 * verifier's error unit (gen/verify/verify.h), is flagged as disagreeing. Looser than the tuner's
 * tolerance: the bench reports peers as they are, and flags wrong results, not rounding.
 */
#define LNTUNE_BENCH_TOLERANCE (1.0 / (1 << 16))
/* For a 16-bit y the verifier reports |y - ref| over its bound (half an ulp of y's type plus the
 * fp32 bound) times 2^-20, so this same figure flags an output 16 bounds off. */

typedef struct lntune_bench_shape {
    int64_t rows, H;
} lntune_bench_shape;

typedef struct lntune_bench_progress {
    const char *what; /* "torch", "verify", "time" */
    int64_t rows, H;
    size_t shape, nshapes;
    double elapsed_s;
} lntune_bench_progress;

typedef struct lntune_bench_config {
    const lntune_bench_shape *shapes;
    size_t nshapes;
    int threads;              /* 0: every core */
    const char *tuned_db;     /* the database lntune tuned reads; NULL: $LNTUNE_DB or the default */
    const char *torch_script; /* bench_torch.py; NULL: the source tree's; "" skips PyTorch */
    const char *python;       /* NULL: the peers folder's bin/python3, else /usr/bin/python3 */
    int reps;                 /* repetitions per implementation; below 7 is raised to 7 */
    double rep_ms;            /* minimum length of one repetition; below 50 is raised to 50 */
    void (*progress)(void *ud, const lntune_bench_progress *p);
    void *progress_ud;
    int type;               /* LNTUNE_TYPE_* (core/dtypes.h) of x, y, gamma and beta; 0: fp32 */
    const char *export_lib; /* lntune export's kernels built as a shared object; NULL: n/a */
} lntune_bench_config;

/* One implementation at one shape and thread count. */
typedef struct lntune_bench_record {
    char impl[40]; /* key, e.g. "onednn"; see lntune_bench_impl_label */
    char op[16];   /* "layernorm", "rmsnorm", "copy" */
    char dtype[8]; /* "f32", "f16", "bf16": of x, y, gamma and beta; "f32" where a line has none */
    int64_t rows, H;
    int threads;
    double us;        /* median per call in microseconds; < 0: not available (see note) */
    double gbps;      /* x read + y written (in their type), per second */
    double max_error; /* verifier unit; < 0: not checked */
    double busy;      /* other processes' CPU in cores during the repetitions */
    int reps;
    int flagged; /* 1: max_error above LNTUNE_BENCH_TOLERANCE */
    char note[120];
} lntune_bench_record;

typedef struct lntune_bench_records {
    lntune_bench_record *r;
    size_t n, cap;
} lntune_bench_records;

/* The bench shapes of the issue: bandwidth shapes, one out of cache, two latency shapes. */
extern const lntune_bench_shape lntune_bench_default_shapes[];
extern const size_t lntune_bench_default_shape_count;

/* Latency shapes are reported in microseconds per call, the others in GB/s. */
int lntune_bench_is_latency(int64_t rows, int64_t H);

/*
 * Runs the comparison at cfg->threads and appends a record per implementation x shape to out
 * (including "n/a" records for what a peer cannot do). Returns LNTUNE_OK, or a code with a
 * message in err when the bench could not run at all.
 */
int lntune_bench_run(const lntune_bench_config *cfg, lntune_bench_records *out, char *err,
                     size_t errlen);

/* 1 when this build calls lntune through the runtime library; 0 when lntune is reported n/a. */
int lntune_bench_has_runtime(void);

/*
 * The folder bench/install-deps puts the peers it installs in (a Python virtual environment with
 * PyTorch; oneDNN 3.x's lib/libdnnl.so.3): $LNTUNE_BENCH_PEERS, else the build's
 * LNTUNE_BENCH_PEERS_DIR (CMake; /opt/lntune-bench by default).
 */
const char *lntune_bench_peers_dir(void);

/* The distinct (tuned rows, H) of this machine's best kernels in db (NULL: default path). */
int lntune_bench_db_shapes(const char *db, lntune_bench_shape **shapes, size_t *n, char *err,
                           size_t errlen);

/* records.c: appending, JSON lines out and in. */
int lntune_bench_records_add(lntune_bench_records *rs, const lntune_bench_record *r);
void lntune_bench_records_free(lntune_bench_records *rs);
/* The record of impl for op (or the copies, whose op is "copy") at threads, rows x H; or NULL. */
const lntune_bench_record *lntune_bench_find(const lntune_bench_records *rs, const char *impl,
                                             const char *op, int threads, int64_t rows, int64_t H);
void lntune_bench_record_write(FILE *f, const lntune_bench_record *r);
/* The element type of rs's records ("f32", "f16", "bf16"; a report holds one), "f32" if none. */
const char *lntune_bench_records_dtype(const lntune_bench_records *rs);
/* Parses one JSON line; LNTUNE_EINVAL if it is not a record. */
int lntune_bench_record_parse(const char *line, lntune_bench_record *r);
/* Appends every record line of f; other lines are ignored. */
int lntune_bench_records_read(FILE *f, lntune_bench_records *rs);

/* report.c: the markdown tables; chart.c: the SVG bar chart. title may be NULL. */
const char *lntune_bench_impl_label(const char *impl);
void lntune_bench_write_markdown(FILE *f, const lntune_bench_records *rs, const char *title);
void lntune_bench_write_svg(FILE *f, const lntune_bench_records *rs, const char *title);
/* targets.c: the verdict on issue #7's targets (copy ratio, oneDNN, latency) from rs alone. */
void lntune_bench_write_targets(FILE *f, const lntune_bench_records *rs);

#endif /* LNTUNE_BENCH_H */
