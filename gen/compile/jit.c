/*
 * jit.c - the compile pipeline's in-process step: generated C compiled by cc.h's compiler (source
 * on stdin, object on stdout), objects cached on disk, and loaded in process with the LLVM-C ORC
 * LLJIT API.
 *
 * Every module goes into the LLJIT's main JITDylib under its own resource tracker. LLVM 14's C
 * API can only look up symbols in the main JITDylib (LLVMOrcLLJITLookup), so a JITDylib per
 * module would be unreachable; instead each object's defined global symbols are renamed to
 * "lntune.m<N>.<name>" in a copy of the ELF before it is added. Two variants defining the same
 * symbol therefore coexist, and neither can bind to the other's code, so unloading one (removing
 * its tracker) never leaves the other pointing at freed memory.
 */
#define _GNU_SOURCE
#include "jit.h"
#include "object_cache.h"

#include "cc.h"
#include "hardware.h"
#include "lntune.h"
#include "make_dirs.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* After cc.h's kernel flags and the extra ones: source on stdin, object on stdout. */
static const char *const io_flags[] = {"-c", "-o", "-", "-x", "c", "-", NULL};

struct lntune_jit {
    char *compiler;
    char *version;   /* first line of `compiler --version` */
    char *cache_dir; /* NULL: no cache */
    LLVMOrcLLJITRef lljit;
    pthread_mutex_t lock; /* the LLJIT, the module list, next_id */
    lntune_jit_module *modules;
    unsigned long long next_id;
    char link_err[1024];      /* what ORC reported while linking, under lock */
    pthread_mutex_t msg_lock; /* compiles on many threads may report at once */
    char msg[2048];
};

struct lntune_jit_module {
    lntune_jit *jit;
    LLVMOrcResourceTrackerRef rt;
    lntune_jit_module *prev, *next;
};

static void set_msg(lntune_jit *jit, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&jit->msg_lock);
    vsnprintf(jit->msg, sizeof jit->msg, fmt, ap);
    pthread_mutex_unlock(&jit->msg_lock);
    va_end(ap);
}

/* Puts what (e.g. "loading the object") and LLVM's message on the handle; consumes err. */
static void set_llvm_msg(lntune_jit *jit, const char *what, LLVMErrorRef err) {
    char *text = LLVMGetErrorMessage(err);
    set_msg(jit, "%s: %s", what, text ? text : "unknown LLVM error");
    LLVMDisposeErrorMessage(text);
}

/*
 * ORC reports the cause of a failed link (e.g. "Symbols not found: [ foo ]") here rather than in
 * the lookup's own error, which only says materialization failed. Links happen synchronously
 * inside lntune_jit_load, which holds the lock, so the text lands in the right load's message.
 */
static void report_session_error(void *ctx, LLVMErrorRef err) {
    lntune_jit *jit = ctx;
    char *text = LLVMGetErrorMessage(err);
    size_t used = strlen(jit->link_err);
    snprintf(jit->link_err + used, sizeof jit->link_err - used, "%s%s", used ? "; " : "",
             text ? text : "unknown LLVM error");
    LLVMDisposeErrorMessage(text);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------------------------------ */
/* ELF objects                                                                                */

/* The validated section headers of an ELF64 little-endian relocatable object, or NULL. */
static const unsigned char *elf_sections(const unsigned char *p, size_t len, Elf64_Ehdr *eh) {
    if (len < sizeof *eh) return NULL;
    memcpy(eh, p, sizeof *eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_REL ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
        (len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        return NULL;
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh->e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > len || len - sh.sh_offset < sh.sh_size))
            return NULL;
    }
    return p + eh->e_shoff;
}

/* True if the bytes look like a whole object: a truncated or garbled cache file fails this. */
static int elf_valid(const void *p, size_t len) {
    Elf64_Ehdr eh;
    return elf_sections(p, len, &eh) != NULL;
}

/*
 * Copies an object, prefixing every defined global or weak symbol's name with prefix. The new
 * string table is appended at the end (the old one stays as the new one's head, so section
 * names that share it keep their offsets); relocations name symbols by index, so they follow.
 * Returns 0, ENOENT when `symbol` is not defined in the object, EINVAL for a bad object, ENOMEM.
 */
static int elf_prefix_symbols(const void *object, size_t len, const char *prefix,
                              const char *symbol, unsigned char **out, size_t *out_len) {
    const unsigned char *p = object;
    Elf64_Ehdr eh;
    const unsigned char *shdrs = elf_sections(p, len, &eh);
    if (!shdrs) return EINVAL;
    Elf64_Shdr symtab, strtab;
    unsigned symtab_i = 0;
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
        memcpy(&symtab, shdrs + i * sizeof symtab, sizeof symtab);
        if (symtab.sh_type == SHT_SYMTAB) {
            symtab_i = i;
            break;
        }
    }
    if (!symtab_i || symtab.sh_link >= eh.e_shnum || symtab.sh_entsize != sizeof(Elf64_Sym))
        return EINVAL;
    memcpy(&strtab, shdrs + symtab.sh_link * sizeof strtab, sizeof strtab);
    if (strtab.sh_type != SHT_STRTAB || strtab.sh_size == 0) return EINVAL;
    const char *names = (const char *)p + strtab.sh_offset;
    if (names[strtab.sh_size - 1] != '\0') return EINVAL;

    size_t nsyms = symtab.sh_size / sizeof(Elf64_Sym), plen = strlen(prefix), extra = 0;
    int found = 0;
    for (size_t i = 0; i < nsyms; ++i) {
        Elf64_Sym s;
        memcpy(&s, p + symtab.sh_offset + i * sizeof s, sizeof s);
        if (ELF64_ST_BIND(s.st_info) == STB_LOCAL || s.st_shndx == SHN_UNDEF) continue;
        if (s.st_name >= strtab.sh_size) return EINVAL;
        extra += plen + strlen(names + s.st_name) + 1;
        if (strcmp(names + s.st_name, symbol) == 0) found = 1;
    }
    if (!found) return ENOENT;

    size_t base = (len + 7) & ~(size_t)7;
    size_t new_len = base + strtab.sh_size + extra;
    unsigned char *q = calloc(1, new_len);
    if (!q) return ENOMEM;
    memcpy(q, p, len);
    memcpy(q + base, names, strtab.sh_size);
    size_t at = strtab.sh_size;
    for (size_t i = 0; i < nsyms; ++i) {
        Elf64_Sym s;
        unsigned char *sp = q + symtab.sh_offset + i * sizeof s;
        memcpy(&s, sp, sizeof s);
        if (ELF64_ST_BIND(s.st_info) == STB_LOCAL || s.st_shndx == SHN_UNDEF) continue;
        int n = sprintf((char *)q + base + at, "%s%s", prefix, names + s.st_name);
        s.st_name = (Elf64_Word)at;
        memcpy(sp, &s, sizeof s);
        at += (size_t)n + 1;
    }
    strtab.sh_offset = base;
    strtab.sh_size = at;
    memcpy(q + eh.e_shoff + symtab.sh_link * sizeof strtab, &strtab, sizeof strtab);
    *out = q;
    *out_len = new_len;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The object cache                                                                           */

static uint64_t hash_str(uint64_t h, const char *s) {
    return lntune_fnv1a(h, s, strlen(s) + 1); /* the NUL keeps "ab","c" apart from "a","bc" */
}

static char *cache_path(const lntune_jit *jit, const char *key) {
    size_t n = strlen(jit->cache_dir) + 32;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%s/%s.o", jit->cache_dir, key);
    return path;
}

/* The whole file at path (malloc'd), or NULL. */
static void *read_whole(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    unsigned char *data = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (data = malloc((size_t)st.st_size))) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += (size_t)n;
        }
        if (got != (size_t)st.st_size) {
            free(data);
            data = NULL;
        }
        *len = got;
    }
    close(fd);
    return data;
}

/* Reads a cached object; NULL when absent, unreadable or not a whole object (then we recompile). */
static void *cache_read(const char *path, size_t *len) {
    void *data = read_whole(path, len);
    if (data && !elf_valid(data, *len)) {
        free(data);
        return NULL;
    }
    return data;
}

/*
 * Stores an object under path: written to a unique temporary file in the same directory, then
 * renamed over path, so a concurrent reader sees the whole old file, the whole new one, or none.
 * Best effort: a cache that cannot be written only costs a recompile next time.
 */
static void cache_write(const lntune_jit *jit, const char *path, const void *data, size_t len) {
    if (lntune_make_dirs(jit->cache_dir, 0755, NULL, 0) != 0) return;
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) return;
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd >= 0) {
        size_t put = 0;
        while (put < len) {
            ssize_t w = write(fd, (const char *)data + put, len - put);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            put += (size_t)w;
        }
        int ok = close(fd) == 0 && put == len;
        if (!ok || rename(tmp, path) != 0) unlink(tmp);
    }
    free(tmp);
}

/* ------------------------------------------------------------------------------------------ */
/* Handle                                                                                     */

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static int llvm_init_failed;

static void llvm_init(void) {
    llvm_init_failed = LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter();
}

int lntune_jit_open(const lntune_jit_config *config, lntune_jit **out) {
    if (!out) return LNTUNE_EINVAL;
    *out = NULL;
    lntune_jit *jit = calloc(1, sizeof *jit);
    if (!jit) return LNTUNE_ENOMEM;
    pthread_mutex_init(&jit->lock, NULL);
    pthread_mutex_init(&jit->msg_lock, NULL);
    *out = jit; /* from here on a failure leaves its message on the handle */

    const char *cc = config && config->compiler && *config->compiler ? config->compiler
                                                                     : lntune_default_compiler();
    const char *dir = config ? config->cache_dir : NULL;
    char dflt[4096];
    if (!dir && lntune_object_cache_dir(dflt, sizeof dflt) == LNTUNE_OK) dir = dflt;
    if (!(jit->compiler = strdup(cc)) || (dir && *dir && !(jit->cache_dir = strdup(dir)))) {
        set_msg(jit, "out of memory");
        return LNTUNE_ENOMEM;
    }

    /* The version line keys the cache, and running it proves the compiler exists. */
    lntune_cc_output vout = {0}, verr = {0};
    const char *argv[] = {jit->compiler, "--version", NULL};
    int status = -1, rc = lntune_cc_run(argv, NULL, 0, &vout, &verr, &status);
    if (rc != 0 || status != 0 || !vout.data) {
        set_msg(jit,
                "cannot run the C compiler '%s' (set LNTUNE_CC or lntune_jit_config.compiler): %s",
                jit->compiler,
                rc          ? strerror(rc)
                : verr.data ? verr.data
                            : "`--version` failed");
        free(vout.data);
        free(verr.data);
        return LNTUNE_ECOMPILE;
    }
    vout.data[strcspn(vout.data, "\r\n")] = '\0';
    jit->version = strdup(vout.data);
    free(vout.data);
    free(verr.data);
    if (!jit->version) {
        set_msg(jit, "out of memory");
        return LNTUNE_ENOMEM;
    }

    pthread_once(&llvm_once, llvm_init);
    if (llvm_init_failed) {
        set_msg(jit, "LLVM has no native target for this machine");
        return LNTUNE_EUNSUPPORTED;
    }
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit->lljit, NULL);
    if (err) {
        jit->lljit = NULL;
        set_llvm_msg(jit, "cannot create the LLVM JIT", err);
        return LNTUNE_ERROR;
    }
    /* Kernels call libc and libm (memcpy, sqrtf, ...): resolve those from this process. */
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(jit->lljit), NULL, NULL);
    if (err) {
        set_llvm_msg(jit, "cannot expose process symbols to the JIT", err);
        return LNTUNE_ERROR;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit->lljit), gen);
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(jit->lljit),
                                            report_session_error, jit);
    return LNTUNE_OK;
}

/* Removes a module's code; the caller holds jit->lock. */
static void unload_locked(lntune_jit_module *m) {
    lntune_jit *jit = m->jit;
    if (m->prev)
        m->prev->next = m->next;
    else
        jit->modules = m->next;
    if (m->next) m->next->prev = m->prev;
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(m->rt);
    if (err) set_llvm_msg(jit, "unloading a module", err);
    LLVMOrcReleaseResourceTracker(m->rt);
    free(m);
}

void lntune_jit_close(lntune_jit *jit) {
    if (!jit) return;
    pthread_mutex_lock(&jit->lock);
    while (jit->modules) unload_locked(jit->modules);
    pthread_mutex_unlock(&jit->lock);
    if (jit->lljit) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(jit->lljit);
        if (err) LLVMConsumeError(err); /* nothing is left to report it to */
    }
    pthread_mutex_destroy(&jit->lock);
    pthread_mutex_destroy(&jit->msg_lock);
    free(jit->compiler);
    free(jit->version);
    free(jit->cache_dir);
    free(jit);
}

const char *lntune_jit_errmsg(const lntune_jit *jit) {
    if (!jit) return "out of memory";
    return jit->msg[0] ? jit->msg : "ok";
}

const char *lntune_jit_compiler_version(const lntune_jit *jit) {
    return jit && jit->version ? jit->version : "";
}

/* ------------------------------------------------------------------------------------------ */
/* Compile                                                                                    */

/* Fails a compile with a message in obj->diag and on the handle. */
static int compile_fail(lntune_jit *jit, lntune_jit_object *obj, int rc, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    free(obj->diag);
    obj->diag = strdup(text);
    set_msg(jit, "%s", text);
    return rc;
}

int lntune_jit_compile(lntune_jit *jit, const char *source, const char *const *extra_flags,
                       lntune_jit_object *obj) {
    if (!obj) return LNTUNE_EINVAL;
    memset(obj, 0, sizeof *obj);
    if (!jit || !source || !jit->version) return LNTUNE_EINVAL;
    double t0 = now_ms();

    size_t nextra = 0;
    while (extra_flags && extra_flags[nextra]) ++nextra;
    const char **argv = malloc((nextra + 16) * sizeof *argv);
    if (!argv) return compile_fail(jit, obj, LNTUNE_ENOMEM, "out of memory");
    size_t argc = 0;
    argv[argc++] = jit->compiler;
    for (const char *const *f = lntune_kernel_cflags; *f; ++f) argv[argc++] = *f;
    for (size_t i = 0; i < nextra; ++i) argv[argc++] = extra_flags[i];
    for (const char *const *f = io_flags; *f; ++f) argv[argc++] = *f;
    argv[argc] = NULL;

    /* The key covers every argument after the compiler's name, so flags can't be confused. */
    uint64_t h = hash_str(LNTUNE_FNV_INIT, source);
    for (size_t i = 1; i < argc; ++i) h = hash_str(h, argv[i]);
    h = hash_str(h, jit->version);
    snprintf(obj->key, sizeof obj->key, "%016llx", (unsigned long long)h);

    char *path = jit->cache_dir ? cache_path(jit, obj->key) : NULL;
    if (path && (obj->data = cache_read(path, &obj->len))) {
        obj->cache_hit = 1;
        obj->compile_ms = now_ms() - t0;
        free(path);
        free(argv);
        return LNTUNE_OK;
    }

    lntune_cc_output out = {0}, err = {0};
    int status = -1;
    int rc = lntune_cc_run(argv, source, strlen(source), &out, &err, &status);
    free(argv);
    obj->compile_ms = now_ms() - t0;
    if (rc != 0 || status != 0 || out.len == 0) {
        if (rc != 0)
            compile_fail(jit, obj, LNTUNE_ECOMPILE, "cannot run the C compiler '%s': %s",
                         jit->compiler, strerror(rc));
        else if (status != 0 && err.len > 0) {
            /* diag is the compiler's own text; the handle gets a summary naming the compiler. */
            set_msg(jit, "%s exited with status %d:\n%s", jit->compiler, status, err.data);
            obj->diag = err.data;
            err.data = NULL;
        } else if (status != 0)
            compile_fail(jit, obj, LNTUNE_ECOMPILE, "%s exited with status %d", jit->compiler,
                         status);
        else
            compile_fail(jit, obj, LNTUNE_ECOMPILE, "%s wrote no object to its output:\n%s",
                         jit->compiler, err.data ? err.data : "");
        free(out.data);
        free(err.data);
        free(path);
        return LNTUNE_ECOMPILE;
    }
    free(err.data); /* warnings from a successful compile are not kept */
    obj->data = out.data;
    obj->len = out.len;
    if (path && elf_valid(obj->data, obj->len)) cache_write(jit, path, obj->data, obj->len);
    free(path);
    return LNTUNE_OK;
}

typedef struct {
    lntune_jit *jit;
    const char *const *sources;
    const char *const *const *flags;
    lntune_jit_object *objs;
    size_t n;
    atomic_size_t next, failed;
} compile_batch;

static void *compile_worker(void *arg) {
    compile_batch *b = arg;
    for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;) {
        if (lntune_jit_compile(b->jit, b->sources[i], b->flags ? b->flags[i] : NULL, &b->objs[i]) !=
            LNTUNE_OK)
            atomic_fetch_add(&b->failed, 1);
    }
    return NULL;
}

size_t lntune_jit_compile_many(lntune_jit *jit, const char *const *sources,
                               const char *const *const *extra_flags, size_t n, int parallel,
                               lntune_jit_object *objs) {
    if (!objs || n == 0) return n;
    if (!sources) {
        for (size_t i = 0; i < n; ++i) memset(&objs[i], 0, sizeof objs[i]);
        return n;
    }
    compile_batch b = {jit, sources, extra_flags, objs, n, 0, 0};
    lntune_cc_run_workers(compile_worker, &b, n, parallel);
    return atomic_load(&b.failed);
}

void lntune_jit_object_free(lntune_jit_object *obj) {
    if (!obj) return;
    free(obj->data);
    free(obj->diag);
    obj->data = NULL;
    obj->diag = NULL;
    obj->len = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Load                                                                                       */

int lntune_jit_load(lntune_jit *jit, const void *object, size_t len, const char *symbol,
                    lntune_jit_module **module, lntune_kernel_fn *fn) {
    if (module) *module = NULL;
    if (fn) *fn = NULL;
    if (!jit || !object || !symbol || !module || !fn) return LNTUNE_EINVAL;
    if (!jit->lljit) {
        set_msg(jit, "the JIT failed to open");
        return LNTUNE_EINVAL;
    }
    lntune_jit_module *m = calloc(1, sizeof *m);
    if (!m) {
        set_msg(jit, "out of memory");
        return LNTUNE_ENOMEM;
    }
    m->jit = jit;
    pthread_mutex_lock(&jit->lock);
    char prefix[48], name[64];
    snprintf(prefix, sizeof prefix, "lntune.m%llu.", jit->next_id++);
    snprintf(name, sizeof name, "%sobject", prefix);
    unsigned char *renamed = NULL;
    size_t renamed_len = 0;
    int e = elf_prefix_symbols(object, len, prefix, symbol, &renamed, &renamed_len);
    if (e != 0) {
        pthread_mutex_unlock(&jit->lock);
        free(m);
        if (e == ENOENT)
            set_msg(jit, "the object defines no symbol '%s'", symbol);
        else if (e == ENOMEM)
            set_msg(jit, "out of memory");
        else
            set_msg(jit, "not an ELF64 little-endian relocatable object (%zu bytes)", len);
        return e == ENOENT ? LNTUNE_ENOTFOUND : e == ENOMEM ? LNTUNE_ENOMEM : LNTUNE_EINVAL;
    }
    LLVMMemoryBufferRef mb =
        LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)renamed, renamed_len, name);
    free(renamed);
    m->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(jit->lljit));
    int rc = LNTUNE_OK;
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(jit->lljit, m->rt, mb); /* owns mb now */
    if (err) {
        set_llvm_msg(jit, "cannot add the object to the JIT", err);
        rc = LNTUNE_ERROR;
    } else {
        /* The lookup links the object: unresolved externals and bad relocations surface here. */
        char full[1024];
        snprintf(full, sizeof full, "%s%s", prefix, symbol);
        LLVMOrcExecutorAddress addr = 0;
        jit->link_err[0] = '\0';
        if ((err = LLVMOrcLLJITLookup(jit->lljit, &addr, full))) {
            char what[1200];
            snprintf(what, sizeof what, "cannot link the object%s%s", jit->link_err[0] ? ": " : "",
                     jit->link_err);
            set_llvm_msg(jit, what, err);
            rc = LNTUNE_ERROR;
        } else {
            *fn = (lntune_kernel_fn)(uintptr_t)addr;
        }
    }
    if (rc != LNTUNE_OK) {
        if ((err = LLVMOrcResourceTrackerRemove(m->rt))) LLVMConsumeError(err);
        LLVMOrcReleaseResourceTracker(m->rt);
        free(m);
    } else {
        m->next = jit->modules;
        if (m->next) m->next->prev = m;
        jit->modules = m;
        *module = m;
    }
    pthread_mutex_unlock(&jit->lock);
    return rc;
}

void lntune_jit_unload(lntune_jit_module *module) {
    if (!module) return;
    lntune_jit *jit = module->jit;
    pthread_mutex_lock(&jit->lock);
    unload_locked(module);
    pthread_mutex_unlock(&jit->lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Shared objects                                                                             */

int lntune_jit_link_shared(lntune_jit *jit, const void *object, size_t len, void **so,
                           size_t *so_len, char **diag) {
    if (so) *so = NULL;
    if (so_len) *so_len = 0;
    if (diag) *diag = NULL;
    if (!jit || !object || !so || !so_len) return LNTUNE_EINVAL;
    char *dir = lntune_cc_tempdir();
    if (!dir) {
        set_msg(jit, "cannot create a temporary directory: %s", strerror(errno));
        return LNTUNE_EIO;
    }
    char obj_path[4200], so_path[4200];
    snprintf(obj_path, sizeof obj_path, "%s/variant.o", dir);
    snprintf(so_path, sizeof so_path, "%s/variant.so", dir);
    int rc = LNTUNE_OK;
    FILE *f = fopen(obj_path, "wb");
    if (!f || fwrite(object, 1, len, f) != len) rc = LNTUNE_EIO;
    if (f && fclose(f) != 0) rc = LNTUNE_EIO;
    if (rc != LNTUNE_OK) {
        set_msg(jit, "cannot write %s", obj_path);
    } else {
        const char *const objs[] = {obj_path};
        char *text = NULL;
        if (lntune_cc_link_shared(jit->compiler, objs, 1, so_path, &text) != 0) {
            set_msg(jit, "linking a shared object with %s failed: %s", jit->compiler,
                    text ? text : "");
            if (diag) *diag = strdup(text ? text : "");
            rc = LNTUNE_ECOMPILE;
        } else if (!(*so = read_whole(so_path, so_len))) {
            set_msg(jit, "cannot read %s", so_path);
            rc = LNTUNE_EIO;
        }
        free(text);
    }
    lntune_cc_remove_dir(dir);
    free(dir);
    return rc;
}
