/*
 * nvrtc.c - NVRTC through dlopen: the library search, the include path next to it, and one
 * compile to PTX or cubin with the log returned on failure. No CUDA header is included; the few
 * NVRTC types are declared here as the ABI defines them (an enum result and an opaque program).
 */
#define _GNU_SOURCE /* dladdr */
#include "nvrtc.h"

#include "lntune.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int nvrtcResult; /* NVRTC_SUCCESS is 0 */
typedef struct _nvrtcProgram *nvrtcProgram;

/* The NVRTC entry points lntune uses, resolved by name. */
typedef struct {
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult); /* optional */
} nvrtc_api;

struct lntune_nvrtc {
    void *lib;
    nvrtc_api api;
    int major, minor;
    char path[1024];
    char include_dir[1024];
    char include_opt[1040]; /* "-I" + include_dir */
    char describe[1200];
    char errmsg[2048];
};

static const char *const default_names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                            "libnvrtc.so.11.2"};
static const char *const fallback_dir = "/usr/local/cuda/lib64";

static void set_error(lntune_nvrtc *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->errmsg, sizeof n->errmsg, fmt, ap);
    va_end(ap);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Tries each default name on the loader's path, then in fallback_dir. */
static void *open_default(char *tried, size_t tried_len) {
    for (int pass = 0; pass < 2; ++pass)
        for (size_t i = 0; i < sizeof default_names / sizeof default_names[0]; ++i) {
            char path[1024];
            if (pass == 0)
                snprintf(path, sizeof path, "%s", default_names[i]);
            else
                snprintf(path, sizeof path, "%s/%s", fallback_dir, default_names[i]);
            void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) return lib;
            size_t used = strlen(tried);
            snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", path);
        }
    return NULL;
}

/* Resolves every required symbol; on a missing one names it in the message. */
static int resolve(lntune_nvrtc *n) {
    static const struct {
        const char *name;
        size_t offset;
        int required;
    } table[] = {
#define ENTRY(field, req) {"nvrtc" #field, offsetof(nvrtc_api, field), req}
        ENTRY(Version, 1),        ENTRY(CreateProgram, 1),
        ENTRY(CompileProgram, 1), ENTRY(GetPTXSize, 1),
        ENTRY(GetPTX, 1),         ENTRY(GetCUBINSize, 1),
        ENTRY(GetCUBIN, 1),       ENTRY(GetProgramLogSize, 1),
        ENTRY(GetProgramLog, 1),  ENTRY(DestroyProgram, 1),
        ENTRY(GetErrorString, 0),
#undef ENTRY
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        void *sym = dlsym(n->lib, table[i].name);
        if (!sym && table[i].required) {
            set_error(n, "NVRTC library %s lacks %s (too old?)", n->path, table[i].name);
            return LNTUNE_ENODEVICE;
        }
        /* dlsym returns data pointers; POSIX guarantees they convert to function pointers. */
        memcpy((char *)&n->api + table[i].offset, &sym, sizeof sym);
    }
    return LNTUNE_OK;
}

/* The loaded library's own path (dladdr on one of its symbols), and ../include next to it. */
static void find_paths(lntune_nvrtc *n, const char *requested) {
    Dl_info info;
    void *sym;
    memcpy(&sym, &n->api.Version, sizeof sym);
    if (dladdr(sym, &info) && info.dli_fname)
        snprintf(n->path, sizeof n->path, "%s", info.dli_fname);
    else
        snprintf(n->path, sizeof n->path, "%s", requested);
    const char *env = getenv("LNTUNE_CUDA_INCLUDE");
    if (env && *env) {
        snprintf(n->include_dir, sizeof n->include_dir, "%s", env);
    } else {
        char inc[sizeof n->include_dir];
        const char *slash = strrchr(n->path, '/');
        int dirlen = slash ? (int)(slash - n->path) : 0;
        if (slash && (size_t)dirlen + sizeof "/../include" <= sizeof inc) {
            snprintf(inc, sizeof inc, "%.*s/../include", dirlen, n->path);
            if (is_dir(inc)) memcpy(n->include_dir, inc, sizeof inc);
        }
    }
    if (n->include_dir[0]) snprintf(n->include_opt, sizeof n->include_opt, "-I%s", n->include_dir);
}

int lntune_nvrtc_open(lntune_nvrtc **out) {
    if (!out) return LNTUNE_EINVAL;
    lntune_nvrtc *n = calloc(1, sizeof *n);
    *out = n;
    if (!n) return LNTUNE_ENOMEM;
    const char *env = getenv("LNTUNE_NVRTC");
    char tried[2048] = "";
    if (env && *env) {
        /* An explicit choice is honoured or reported, never silently replaced. */
        if (!(n->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL))) {
            const char *why = dlerror();
            set_error(n, "NVRTC not available: cannot load $LNTUNE_NVRTC=%s (%s)", env,
                      why ? why : "unknown error");
            return LNTUNE_ENODEVICE;
        }
    } else if (!(n->lib = open_default(tried, sizeof tried))) {
        set_error(n,
                  "NVRTC not available: none of %s could be loaded; install the CUDA toolkit's "
                  "NVRTC or set LNTUNE_NVRTC to libnvrtc.so",
                  tried);
        return LNTUNE_ENODEVICE;
    }
    const char *requested = env && *env ? env : "libnvrtc";
    snprintf(n->path, sizeof n->path, "%s", requested);
    int rc = resolve(n);
    if (rc) return rc;
    find_paths(n, requested);
    if (n->api.Version(&n->major, &n->minor) != 0) {
        set_error(n, "NVRTC at %s does not report its version", n->path);
        return LNTUNE_ENODEVICE;
    }
    snprintf(n->describe, sizeof n->describe, "NVRTC %d.%d (%s)", n->major, n->minor, n->path);
    return LNTUNE_OK;
}

/*
 * The library stays loaded (dlopen counts the references): NVRTC carries its own C++ runtime,
 * whose process-lifetime allocations would read as leaks once unmapped, and loading it again
 * costs more than keeping it.
 */
void lntune_nvrtc_close(lntune_nvrtc *n) {
    free(n);
}

const char *lntune_nvrtc_errmsg(const lntune_nvrtc *n) {
    return n ? n->errmsg : "out of memory";
}

const char *lntune_nvrtc_describe(const lntune_nvrtc *n) {
    return n ? n->describe : "";
}

int lntune_nvrtc_version(const lntune_nvrtc *n, int *major, int *minor) {
    if (!n || !n->api.Version) return LNTUNE_ENODEVICE;
    if (major) *major = n->major;
    if (minor) *minor = n->minor;
    return LNTUNE_OK;
}

const char *lntune_nvrtc_include_dir(const lntune_nvrtc *n) {
    return n ? n->include_dir : "";
}

static char *format_message(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

static const char *result_name(const lntune_nvrtc *n, nvrtcResult r) {
    return n->api.GetErrorString ? n->api.GetErrorString(r) : "NVRTC error";
}

/* The program's log (malloc'd, possibly empty); NULL only when out of memory. */
static char *program_log(const lntune_nvrtc *n, nvrtcProgram prog) {
    size_t len = 0;
    if (n->api.GetProgramLogSize(prog, &len) != 0) len = 0;
    char *log = malloc(len + 1);
    if (!log) return NULL;
    log[0] = '\0';
    if (len && n->api.GetProgramLog(prog, log) != 0) log[0] = '\0';
    log[len] = '\0';
    return log;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Copies the compiled PTX or cubin out of prog; an empty result is an error. */
static int fetch(const lntune_nvrtc *n, nvrtcProgram prog, int cubin, const char *arch, void **data,
                 size_t *size, char **message) {
    size_t len = 0;
    nvrtcResult r = cubin ? n->api.GetCUBINSize(prog, &len) : n->api.GetPTXSize(prog, &len);
    /* PTX sizes count the terminating NUL; an empty result is never a kernel. */
    size_t payload = cubin ? len : (len ? len - 1 : 0);
    if (r != 0 || payload == 0) {
        *message =
            format_message("NVRTC (%s) produced an empty %s for %s (%s)", n->describe,
                           cubin ? "cubin" : "PTX", arch, r != 0 ? result_name(n, r) : "size 0");
        return LNTUNE_ECOMPILE;
    }
    char *buf = malloc(len + 1);
    if (!buf) return LNTUNE_ENOMEM;
    r = cubin ? n->api.GetCUBIN(prog, buf) : n->api.GetPTX(prog, buf);
    buf[len] = '\0';
    if (r != 0) {
        *message = format_message("nvrtcGet%s: %s", cubin ? "CUBIN" : "PTX", result_name(n, r));
        free(buf);
        return LNTUNE_ECOMPILE;
    }
    *data = buf;
    *size = payload;
    return LNTUNE_OK;
}

int lntune_nvrtc_compile(const lntune_nvrtc *n, const char *source, const char *name, int sm,
                         lntune_nvrtc_kind kind, const char *const *extra_options,
                         lntune_nvrtc_output *out) {
    if (!out) return LNTUNE_EINVAL;
    memset(out, 0, sizeof *out);
    if (!n || !source || sm <= 0) return LNTUNE_EINVAL;
    if (!n->api.CreateProgram) {
        out->message = format_message("NVRTC not loaded: %s", n->errmsg);
        return LNTUNE_ENODEVICE;
    }
    if (!name) name = "lntune_kernel.cu";
    char arch[48];
    if (kind == LNTUNE_NVRTC_CUBIN)
        snprintf(arch, sizeof arch, "-arch=sm_%d", sm);
    else
        snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d", sm);
    const char *opts[40];
    int nopt = 0;
    opts[nopt++] = arch;
    opts[nopt++] = "-std=c++17";
    if (n->include_opt[0]) opts[nopt++] = n->include_opt;
    for (; extra_options && *extra_options && nopt < 40; ++extra_options)
        opts[nopt++] = *extra_options;

    nvrtcProgram prog = NULL;
    nvrtcResult r = n->api.CreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != 0) {
        out->message = format_message("nvrtcCreateProgram: %s", result_name(n, r));
        return LNTUNE_ECOMPILE;
    }
    double t0 = now_ms();
    r = n->api.CompileProgram(prog, nopt, opts);
    out->compile_ms = now_ms() - t0;
    int rc = LNTUNE_OK;
    if (r != 0) {
        char *log = program_log(n, prog);
        out->message = format_message("NVRTC (%s) failed to compile %s for %s: %s\n%s", n->describe,
                                      name, arch, result_name(n, r), log ? log : "");
        free(log);
        rc = LNTUNE_ECOMPILE;
    } else {
        rc = fetch(n, prog, kind == LNTUNE_NVRTC_CUBIN, arch, &out->data, &out->len, &out->message);
        if (rc == LNTUNE_OK && kind == LNTUNE_NVRTC_CUBIN) {
            void *ptx = NULL;
            rc = fetch(n, prog, 0, arch, &ptx, &out->ptx_len, &out->message);
            out->ptx = ptx;
        }
        if (rc != LNTUNE_OK) {
            free(out->data);
            free(out->ptx);
            out->data = out->ptx = NULL;
            out->len = out->ptx_len = 0;
        }
    }
    n->api.DestroyProgram(&prog);
    return rc;
}

void lntune_nvrtc_output_free(lntune_nvrtc_output *out) {
    if (!out) return;
    free(out->data);
    free(out->ptx);
    free(out->message);
    out->data = NULL;
    out->ptx = out->message = NULL;
    out->len = out->ptx_len = 0;
}

typedef struct {
    const lntune_nvrtc *n;
    int sm;
    lntune_nvrtc_kind kind;
    lntune_nvrtc_job *jobs;
    size_t count;
    atomic_size_t next;
} batch;

static void *compile_worker(void *arg) {
    batch *b = arg;
    for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->count;) {
        lntune_nvrtc_job *j = &b->jobs[i];
        j->rc = lntune_nvrtc_compile(b->n, j->source, j->name ? j->name : "variant.cu", b->sm,
                                     b->kind, j->options, &j->out);
    }
    return NULL;
}

int lntune_nvrtc_compile_many(const lntune_nvrtc *n, int sm, lntune_nvrtc_kind kind,
                              lntune_nvrtc_job *jobs, size_t count, int threads) {
    enum { MAX_THREADS = 64 };
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (int)(cores < MAX_THREADS ? cores : MAX_THREADS) : 1;
    }
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if ((size_t)threads > count) threads = count ? (int)count : 1;
    batch b = {.n = n, .sm = sm, .kind = kind, .jobs = jobs, .count = count};
    atomic_init(&b.next, 0);
    pthread_t th[MAX_THREADS];
    int started = 0;
    while (started < threads && pthread_create(&th[started], NULL, compile_worker, &b) == 0)
        ++started;
    if (started == 0) return LNTUNE_ERROR;
    for (int i = 0; i < started; ++i) pthread_join(th[i], NULL);
    return LNTUNE_OK;
}
