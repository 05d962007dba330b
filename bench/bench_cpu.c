/*
 * bench_cpu.c - the benchmark program: option parsing and orchestration only (bench.c measures,
 * report.c and chart.c write). With --threads it measures at that thread count and prints JSON
 * records; without, it runs itself once per thread count (1 and every core: one process each,
 * so thread pools and OpenMP start fresh) and writes the markdown report and the SVG chart.
 *
 *   bench_cpu [--db PATH] [--db1 PATH] [--export SO] [--export1 SO] [--out PREFIX]
 *             [--shapes RxH,...] [--dtype T] [--no-torch] [--python PATH]
 *   bench_cpu --threads N [...] > records.jsonl
 *   bench_cpu --threads N --markdown [...]   (the table of that thread count to stdout)
 *   bench_cpu --tuned --db PATH [...]   (the shapes tuned in PATH instead of --shapes)
 *   bench_cpu --report PREFIX records.jsonl...
 *   bench_cpu --has-runtime   (exit 0 if lntune itself is measured in this build)
 */
#define _GNU_SOURCE
#include "bench.h"

#include "dtypes.h"
#include "lntune.h"
#include "make_dirs.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct {
    const char *db, *db1, *export_lib, *export_lib1, *out, *shapes_text, *torch_script, *title,
        *python;
    int threads, no_torch, reps, report, type, markdown, tuned;
    double rep_ms;
    lntune_bench_shape *shapes;
    size_t nshapes;
    char **files;
    int nfiles;
} options;

static int usage(const char *why) {
    fprintf(stderr,
            "bench_cpu: %s\n"
            "usage: bench_cpu [--db PATH] [--db1 PATH] [--export SO] [--export1 SO]\n"
            "                 [--out PREFIX] [--shapes RxH,...]\n"
            "                 [--reps N] [--rep-ms MS] [--torch SCRIPT | --no-torch]\n"
            "                 [--python PATH] [--dtype f32|f16|bf16]\n"
            "       bench_cpu --threads N [same options]   (JSON records to stdout)\n"
            "       bench_cpu --threads N --markdown [...]  (a markdown table instead)\n"
            "       bench_cpu --report PREFIX FILE.jsonl...\n"
            "  --db: the tuned database for the all-cores run; --db1: for the 1-thread run\n"
            "  (default: --db). --export, --export1: lntune export's lntune_kernels.c of those\n"
            "  databases built as shared objects (bench/run.sh builds them; default: n/a;\n"
            "  --export1's default: --export).\n"
            "  PREFIX gets .md and .svg (default build/bench-results/cpu-DATE, or\n"
            "  cpu-TYPE-DATE). --dtype: of x, y, gamma and beta, as tuned by lntune --dtype T.\n"
            "  --tuned: the shapes tuned in --db (else --shapes, else the anchor shapes).\n"
            "  --python: the Python that runs bench_torch.py (default: bin/python3 of the folder\n"
            "  bench/install-deps fills, where there is one: %s ($LNTUNE_BENCH_PEERS);\n"
            "  else /usr/bin/python3). oneDNN 3.x: $LNTUNE_BENCH_ONEDNN3, else that folder's\n"
            "  lib/libdnnl.so.3; ONNX Runtime: $LNTUNE_BENCH_ORT, else its onnxruntime wheel's\n"
            "  libonnxruntime.so; ggml: $LNTUNE_BENCH_GGML, else its ggml/lib/libggml-cpu.so.\n",
            why, lntune_bench_peers_dir());
    return 2;
}

static int parse_shapes(const char *text, options *o) {
    for (const char *p = text; *p;) {
        long long rows, H;
        int used = 0;
        if (sscanf(p, "%lldx%lld%n", &rows, &H, &used) != 2 || rows < 1 || H < 1) return -1;
        lntune_bench_shape *s = realloc(o->shapes, (o->nshapes + 1) * sizeof *s);
        if (!s) return -1;
        o->shapes = s;
        o->shapes[o->nshapes++] = (lntune_bench_shape){rows, H};
        p += used;
        if (*p == ',')
            ++p;
        else if (*p)
            return -1;
    }
    return 0;
}

static void show_progress(void *ud, const lntune_bench_progress *p) {
    (void)ud;
    fprintf(stderr, "bench_cpu: [%zu/%zu] %s %lldx%lld (%.0f s)\n", p->shape + 1, p->nshapes,
            p->what, (long long)p->rows, (long long)p->H, p->elapsed_s);
}

/* One thread count, in this process: records to stdout. */
static int measure(const options *o) {
    lntune_bench_config cfg = {
        .shapes = o->nshapes ? o->shapes : lntune_bench_default_shapes,
        .nshapes = o->nshapes ? o->nshapes : lntune_bench_default_shape_count,
        .threads = o->threads,
        .tuned_db = o->threads == 1 && o->db1 ? o->db1 : o->db,
        .torch_script = o->no_torch ? "" : o->torch_script,
        .python = o->python,
        .reps = o->reps,
        .rep_ms = o->rep_ms,
        .progress = show_progress,
        .type = o->type,
        .export_lib = o->threads == 1 && o->export_lib1 ? o->export_lib1 : o->export_lib,
    };
    lntune_bench_records rs = {0};
    char err[256] = "";
    int rc = lntune_bench_run(&cfg, &rs, err, sizeof err);
    if (err[0]) fprintf(stderr, "bench_cpu: %s\n", err);
    if (o->markdown && rc == LNTUNE_OK)
        lntune_bench_write_markdown(stdout, &rs, "bench_cpu");
    else
        for (size_t i = 0; i < rs.n; ++i) lntune_bench_record_write(stdout, &rs.r[i]);
    lntune_bench_records_free(&rs);
    return rc == LNTUNE_OK ? 0 : 1;
}

static int write_report(const char *prefix, const lntune_bench_records *rs) {
    char path[4096], title[256];
    char cpu[128] = "this machine";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
                snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
                cpu[strcspn(cpu, "\n")] = '\0';
                break;
            }
        fclose(f);
    }
    snprintf(title, sizeof title,
             "lntune vs oneDNN, ONNX Runtime, ggml, PyTorch and memory copy: %s, %ld cores", cpu,
             sysconf(_SC_NPROCESSORS_ONLN));
    const char *ext[] = {".md", ".svg"};
    for (int k = 0; k < 2; ++k) {
        snprintf(path, sizeof path, "%s%s", prefix, ext[k]);
        if (!(f = fopen(path, "w"))) {
            fprintf(stderr, "bench_cpu: cannot write %s\n", path);
            return 1;
        }
        if (k == 0)
            lntune_bench_write_markdown(f, rs, title);
        else
            lntune_bench_write_svg(f, rs, title);
        fclose(f);
        fprintf(stderr, "bench_cpu: wrote %s\n", path);
    }
    return 0;
}

/* Runs this program with --threads t, its records going to file. */
static int run_child(char **argv, int argc, int t, const char *file) {
    char tbuf[16];
    snprintf(tbuf, sizeof tbuf, "%d", t);
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) return -1;
    int n = 0;
    args[n++] = argv[0];
    args[n++] = "--threads";
    args[n++] = tbuf;
    for (int i = 1; i < argc; ++i) {
        /* --out names the report, which only this process writes. */
        if (strcmp(argv[i], "--out") == 0) {
            ++i;
            continue;
        }
        args[n++] = argv[i];
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(args);
    int status = 0;
    if (rc != 0 || waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * libgomp's idle workers (oneDNN's, the copies' and naive C's parallel regions) spin for
 * GOMP_SPINCOUNT pauses after a region before they sleep: 300000 by default, some 15 ms on the
 * 2-core Xeon, far past the 2 ms pause between repetitions (bench.c). The next candidate shared
 * a core with a spinning worker for a third of its repetition: lntune's LayerNorm 2048x4096
 * winner read 43.9 GB/s after them, 51.4 with the workers asleep (OMP_WAIT_POLICY=passive).
 * 10000 pauses keep the workers awake between back-to-back calls (microseconds apart) and asleep
 * by the next candidate. libgomp reads the variable when it loads, so the program runs itself
 * again with it set; a value the user set stays.
 */
static void gomp_spin_briefly(char **argv) {
    if (getenv("GOMP_SPINCOUNT")) return;
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: the run goes on as it is */
}

int main(int argc, char **argv) {
    gomp_spin_briefly(argv);
    options o = {0};
    o.reps = 7, o.rep_ms = 50;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--has-runtime") == 0) return lntune_bench_has_runtime() ? 0 : 1;
        if (strcmp(a, "--markdown") == 0) {
            o.markdown = 1;
            continue;
        }
        if (strcmp(a, "--tuned") == 0) {
            o.tuned = 1;
            continue;
        }
        if (strcmp(a, "--no-torch") == 0) {
            o.no_torch = 1;
            continue;
        }
        if (strcmp(a, "--report") == 0) {
            if (!v) return usage("--report needs a prefix");
            o.report = 1, o.out = v, ++i;
            o.files = argv + i + 1, o.nfiles = argc - i - 1;
            break;
        }
        if (!v) return usage("an option needs a value");
        ++i;
        if (strcmp(a, "--db") == 0)
            o.db = v;
        else if (strcmp(a, "--db1") == 0)
            o.db1 = v;
        else if (strcmp(a, "--export") == 0)
            o.export_lib = v;
        else if (strcmp(a, "--export1") == 0)
            o.export_lib1 = v;
        else if (strcmp(a, "--out") == 0)
            o.out = v;
        else if (strcmp(a, "--torch") == 0)
            o.torch_script = v;
        else if (strcmp(a, "--python") == 0)
            o.python = v;
        else if (strcmp(a, "--threads") == 0)
            o.threads = atoi(v);
        else if (strcmp(a, "--reps") == 0)
            o.reps = atoi(v);
        else if (strcmp(a, "--rep-ms") == 0)
            o.rep_ms = atof(v);
        else if (strcmp(a, "--dtype") == 0) {
            if ((o.type = lntune_type_parse(v, strlen(v))) < 0 || o.type >= LNTUNE_TYPE_COUNT)
                return usage("unknown --dtype (expected f32, f16 or bf16)");
        } else if (strcmp(a, "--shapes") == 0) {
            if (parse_shapes(v, &o) != 0) return usage("bad --shapes (expected ROWSxH,...)");
        } else
            return usage("unknown option");
    }
    if (o.tuned) { /* the shapes of every winner in --db, as lntune show lists them */
        char err[512] = "";
        free(o.shapes);
        o.shapes = NULL;
        o.nshapes = 0;
        if (!o.db) return usage("--tuned needs --db");
        if (lntune_bench_db_shapes(o.db, &o.shapes, &o.nshapes, err, sizeof err) != LNTUNE_OK) {
            fprintf(stderr, "bench_cpu: %s\n", err);
            return 1;
        }
    }
    if (o.markdown && o.threads <= 0) return usage("--markdown goes with --threads");
    int rc;
    if (o.threads > 0) {
        rc = measure(&o);
    } else {
        char prefix[256];
        if (!o.out) {
            char day[32];
            time_t now = time(NULL);
            strftime(day, sizeof day, "%Y-%m-%d", localtime(&now));
            /* Raw output goes to the build folder, never into the source tree (bench/results
             * holds curated summaries only). */
            static const char dir[] = "build/bench-results";
            if (lntune_make_dirs(dir, 0777, NULL, 0) != 0) {
                fprintf(stderr, "bench_cpu: cannot make %s (or give --out PREFIX)\n", dir);
                return 1;
            }
            snprintf(prefix, sizeof prefix, "%s/cpu-%s%s%s", dir,
                     o.type ? lntune_type_name(o.type) : "", o.type ? "-" : "", day);
            o.out = prefix;
        }
        lntune_bench_records rs = {0};
        rc = 0;
        if (o.report) {
            for (int i = 0; i < o.nfiles && rc == 0; ++i) {
                FILE *f = fopen(o.files[i], "r");
                if (!f)
                    rc = 1, fprintf(stderr, "bench_cpu: cannot read %s\n", o.files[i]);
                else
                    rc = lntune_bench_records_read(f, &rs) != LNTUNE_OK, fclose(f);
            }
            /* One report is of one type: its tables and targets have no column for it. */
            for (size_t i = 1; i < rs.n && rc == 0; ++i)
                if (strcmp(rs.r[i].dtype, rs.r[0].dtype) != 0)
                    rc = 1, fprintf(stderr,
                                    "bench_cpu: the records mix %s and %s; report each "
                                    "type on its own\n",
                                    rs.r[0].dtype, rs.r[i].dtype);
        } else {
            /* Raw records stay beside the report: the report can be rewritten from them. */
            const long cores = sysconf(_SC_NPROCESSORS_ONLN);
            const int counts[2] = {1, cores > 1 ? (int)cores : 0};
            for (int k = 0; k < 2 && rc == 0; ++k) {
                if (!counts[k]) continue;
                char file[300];
                snprintf(file, sizeof file, "%s-t%d.jsonl", o.out, counts[k]);
                fprintf(stderr, "bench_cpu: %d thread(s) -> %s\n", counts[k], file);
                rc = run_child(argv, argc, counts[k], file);
                FILE *f = fopen(file, "r");
                if (f) lntune_bench_records_read(f, &rs), fclose(f);
            }
        }
        if (rc == 0 && rs.n)
            rc = write_report(o.out, &rs);
        else if (rc == 0)
            rc = 1, fprintf(stderr, "bench_cpu: no records\n");
        lntune_bench_records_free(&rs);
    }
    free(o.shapes);
    return rc;
}
