/*
 * test_jit.c - the JIT's contract: C source in, a callable kernel out, through a compiler
 * subprocess, the object cache and the LLVM ORC loader; and the failures (a syntax error, a
 * missing compiler, a missing symbol, an unresolved external) come back as codes and messages.
 *
 * With a C file as argument it instead times compiling that file (no cache), e.g. the output of
 * `lntune emit --op layernorm --target cpu --variant vec=16,acc=2 --shape H=4096`.
 */
#define _GNU_SOURCE
#include "jit.h"

#include "cc.h"
#include "lntune.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("    FAILED line %d: %s\n", __LINE__, #cond);                                   \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != (want)) {                                                                       \
            printf("    FAILED line %d: %s gave %d (%s), want %d\n", __LINE__, #expr, rc_,         \
                   lntune_errstr(rc_), (want));                                                    \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

static const char *const include_flags[] = {"-I" LNTUNE_TEST_INCLUDE, NULL};

/*
 * A kernel y = sqrt(x) * scale that calls memcpy and sqrtf, so loading it proves libc and libm
 * resolve from the process. Every variant defines the same symbol, lntune_kernel.
 */
static char *kernel_source(int scale) {
    char *s = NULL;
    if (asprintf(&s,
                 "#include \"lntune_kernel.h\"\n"
                 "#include <math.h>\n"
                 "#include <string.h>\n"
                 "int lntune_kernel(const lntune_kernel_args *a, int64_t r0, int64_t r1) {\n"
                 "    float row[64];\n"
                 "    if (a->H > 64) return LNTUNE_KERNEL_EUNSUPPORTED;\n"
                 "    for (int64_t r = r0; r < r1; ++r) {\n"
                 "        memcpy(row, (const float *)a->x + r * a->x_stride,\n"
                 "               (size_t)a->H * sizeof(float));\n"
                 "        float *y = (float *)a->y + r * a->y_stride;\n"
                 "        for (int64_t i = 0; i < a->H; ++i) y[i] = sqrtf(row[i]) * %d.0f;\n"
                 "    }\n"
                 "    return LNTUNE_KERNEL_OK;\n"
                 "}\n",
                 scale) < 0)
        return NULL;
    return s;
}

/* Runs fn over a 3 x 5 problem; 1 if every element is sqrt(x) * scale. */
static int kernel_gives(lntune_kernel_fn fn, int scale) {
    if (!fn) return 0;
    float x[15], y[15];
    for (int i = 0; i < 15; ++i) x[i] = (float)(i * i), y[i] = -1.0f;
    lntune_kernel_args a = {.rows = 3, .H = 5, .x_stride = 5, .y_stride = 5, .x = x, .y = y};
    if (fn(&a, 0, 3) != LNTUNE_KERNEL_OK) return 0;
    for (int i = 0; i < 15; ++i)
        if (fabsf(y[i] - (float)(i * scale)) > 1e-4f) return 0;
    return 1;
}

static char *temp_dir;

static char *path_in_temp(const char *name) {
    char *p = NULL;
    if (asprintf(&p, "%s/%s", temp_dir, name) < 0) return NULL;
    return p;
}

static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle)) ++n;
    fclose(f);
    return n;
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n;
}

static void case_compile_load_call(lntune_jit *jit) {
    printf("compile, load and call a kernel that uses memcpy and sqrtf\n");
    char *src = kernel_source(2);
    lntune_jit_object obj;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &obj), LNTUNE_OK);
    CHECK(obj.data && obj.len > 0 && !obj.diag && strlen(obj.key) == 16);
    printf("    %zu bytes, key %s, %.1f ms\n", obj.len, obj.key, obj.compile_ms);
    lntune_jit_module *m = NULL;
    lntune_kernel_fn fn = NULL;
    CHECK_RC(lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", &m, &fn), LNTUNE_OK);
    if (m)
        CHECK(kernel_gives(fn, 2));
    else
        printf("    %s\n", lntune_jit_errmsg(jit));
    lntune_jit_unload(m);
    lntune_jit_object_free(&obj);
    free(src);
}

static void case_same_symbol_twice_and_reload(lntune_jit *jit) {
    printf("two modules defining lntune_kernel are loaded at once; unload, then load again\n");
    char *sa = kernel_source(3), *sb = kernel_source(5);
    lntune_jit_object a, b;
    CHECK_RC(lntune_jit_compile(jit, sa, include_flags, &a), LNTUNE_OK);
    CHECK_RC(lntune_jit_compile(jit, sb, include_flags, &b), LNTUNE_OK);
    CHECK(strcmp(a.key, b.key) != 0);
    lntune_jit_module *ma = NULL, *mb = NULL;
    lntune_kernel_fn fa = NULL, fb = NULL;
    CHECK_RC(lntune_jit_load(jit, a.data, a.len, "lntune_kernel", &ma, &fa), LNTUNE_OK);
    CHECK_RC(lntune_jit_load(jit, b.data, b.len, "lntune_kernel", &mb, &fb), LNTUNE_OK);
    CHECK(fa && fb && fa != fb);
    CHECK(kernel_gives(fa, 3));
    CHECK(kernel_gives(fb, 5));
    lntune_jit_unload(ma); /* b must survive a's removal */
    CHECK(kernel_gives(fb, 5));
    CHECK_RC(lntune_jit_load(jit, a.data, a.len, "lntune_kernel", &ma, &fa), LNTUNE_OK);
    CHECK(kernel_gives(fa, 3));
    /* The same object twice is two independent modules. */
    lntune_jit_module *ma2 = NULL;
    lntune_kernel_fn fa2 = NULL;
    CHECK_RC(lntune_jit_load(jit, a.data, a.len, "lntune_kernel", &ma2, &fa2), LNTUNE_OK);
    CHECK(fa2 && fa2 != fa && kernel_gives(fa2, 3));
    lntune_jit_unload(ma);
    CHECK(kernel_gives(fa2, 3));
    lntune_jit_unload(ma2);
    lntune_jit_unload(mb);
    lntune_jit_object_free(&a);
    lntune_jit_object_free(&b);
    free(sa);
    free(sb);
}

static void case_cache(void) {
    printf("a second compile of the same source is a cache hit with no compiler run\n");
    /* A wrapper compiler that logs its arguments, so we can count real compiler runs. */
    char *wrapper = path_in_temp("cc.sh"), *log = path_in_temp("cc.log");
    char *cache = path_in_temp("cache");
    FILE *f = fopen(wrapper, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f,
            "#!/bin/sh\necho \"$@\" >> '%s'\n"
            "if command -v clang-14 >/dev/null 2>&1; then exec clang-14 \"$@\"; fi\n"
            "exec clang \"$@\"\n",
            log);
    fclose(f);
    chmod(wrapper, 0755);

    lntune_jit_config cfg = {.compiler = wrapper, .cache_dir = cache};
    lntune_jit *jit = NULL;
    CHECK_RC(lntune_jit_open(&cfg, &jit), LNTUNE_OK);
    char *src = kernel_source(7);
    lntune_jit_object first, second, other;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &first), LNTUNE_OK);
    CHECK(first.cache_hit == 0);
    CHECK(count_lines(log, " -c ") == 1);
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &second), LNTUNE_OK);
    CHECK(second.cache_hit == 1);
    CHECK(count_lines(log, " -c ") == 1); /* no compiler ran */
    CHECK(strcmp(first.key, second.key) == 0);
    CHECK(first.len == second.len && first.data && second.data &&
          memcmp(first.data, second.data, first.len) == 0);
    CHECK(count_files(cache) == 1); /* the object, and no temporary left behind */
    printf("    miss %.1f ms, hit %.3f ms\n", first.compile_ms, second.compile_ms);

    /* Other flags are another key. */
    const char *const flags2[] = {"-I" LNTUNE_TEST_INCLUDE, "-DUNUSED=1", NULL};
    CHECK_RC(lntune_jit_compile(jit, src, flags2, &other), LNTUNE_OK);
    CHECK(other.cache_hit == 0 && strcmp(other.key, first.key) != 0);
    CHECK(count_lines(log, " -c ") == 2);
    lntune_jit_object_free(&other);

    /* A truncated cache file (a crash mid-write by some other tool) is ignored and rewritten. */
    char *obj_path = NULL;
    CHECK(asprintf(&obj_path, "%s/%s.o", cache, first.key) > 0);
    CHECK(truncate(obj_path, (off_t)(first.len / 2)) == 0);
    lntune_jit_object third;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &third), LNTUNE_OK);
    CHECK(third.cache_hit == 0 && third.len == first.len);
    CHECK(count_lines(log, " -c ") == 3);
    lntune_jit_object_free(&third);
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &third), LNTUNE_OK);
    CHECK(third.cache_hit == 1);
    lntune_jit_module *m = NULL;
    lntune_kernel_fn fn = NULL;
    CHECK_RC(lntune_jit_load(jit, third.data, third.len, "lntune_kernel", &m, &fn), LNTUNE_OK);
    CHECK(kernel_gives(fn, 7));
    lntune_jit_unload(m);
    lntune_jit_object_free(&third);

    /* "" disables the cache. */
    lntune_jit *nocache = NULL;
    lntune_jit_config cfg2 = {.compiler = wrapper, .cache_dir = ""};
    CHECK_RC(lntune_jit_open(&cfg2, &nocache), LNTUNE_OK);
    CHECK_RC(lntune_jit_compile(nocache, src, include_flags, &third), LNTUNE_OK);
    CHECK(third.cache_hit == 0);
    CHECK(count_lines(log, " -c ") == 4);
    lntune_jit_object_free(&third);
    lntune_jit_close(nocache);

    lntune_jit_object_free(&first);
    lntune_jit_object_free(&second);
    lntune_jit_close(jit);
    unlink(obj_path);
    free(obj_path);
    lntune_cc_remove_dir(cache);
    unlink(wrapper);
    unlink(log);
    free(src);
    free(wrapper);
    free(log);
    free(cache);
}

static void case_syntax_error(lntune_jit *jit) {
    printf("a syntax error is LNTUNE_ECOMPILE with the compiler's message in diag\n");
    lntune_jit_object obj;
    const char *src = "int lntune_kernel(void) { return undeclared_thing_42 }\n";
    CHECK_RC(lntune_jit_compile(jit, src, NULL, &obj), LNTUNE_ECOMPILE);
    CHECK(obj.data == NULL && obj.len == 0);
    CHECK(obj.diag && strstr(obj.diag, "error") && strstr(obj.diag, "undeclared_thing_42"));
    if (obj.diag) printf("    diag: %.*s\n", (int)strcspn(obj.diag, "\n"), obj.diag);
    lntune_jit_object_free(&obj);
    CHECK(obj.diag == NULL);
}

static void case_missing_compiler(void) {
    printf("a missing compiler fails open with LNTUNE_ECOMPILE and a message\n");
    lntune_jit_config cfg = {.compiler = "/nonexistent/cc", .cache_dir = ""};
    lntune_jit *jit = NULL;
    CHECK_RC(lntune_jit_open(&cfg, &jit), LNTUNE_ECOMPILE);
    CHECK(jit != NULL); /* the handle carries the message */
    const char *msg = lntune_jit_errmsg(jit);
    CHECK(strstr(msg, "/nonexistent/cc") != NULL);
    printf("    %s\n", msg);
    lntune_jit_object obj;
    CHECK_RC(lntune_jit_compile(jit, "int x;", NULL, &obj), LNTUNE_EINVAL);
    lntune_jit_close(jit);
}

static void case_compile_many(lntune_jit *jit) {
    printf("compile_many builds 8 variants on 4 threads; all 8 loaded at once\n");
    enum { N = 8 };
    char *src[N];
    const char *const *flags[N];
    lntune_jit_object objs[N];
    lntune_jit_module *mods[N] = {0};
    lntune_kernel_fn fns[N] = {0};
    for (int i = 0; i < N; ++i) src[i] = kernel_source(100 + i), flags[i] = include_flags;
    CHECK(lntune_jit_compile_many(jit, (const char *const *)src, flags, N, 4, objs) == 0);
    for (int i = 0; i < N; ++i) {
        CHECK(objs[i].data != NULL);
        CHECK_RC(
            lntune_jit_load(jit, objs[i].data, objs[i].len, "lntune_kernel", &mods[i], &fns[i]),
            LNTUNE_OK);
    }
    for (int i = 0; i < N; ++i) CHECK(kernel_gives(fns[i], 100 + i));
    for (int i = 0; i < N; ++i) {
        lntune_jit_unload(mods[i]);
        lntune_jit_object_free(&objs[i]);
    }
    /* One bad source among good ones: one failure, counted and described. */
    free(src[3]);
    src[3] = strdup("this is not C");
    CHECK(lntune_jit_compile_many(jit, (const char *const *)src, flags, N, 3, objs) == 1);
    CHECK(objs[3].data == NULL && objs[3].diag != NULL);
    CHECK(objs[2].data != NULL && objs[4].data != NULL);
    for (int i = 0; i < N; ++i) {
        lntune_jit_object_free(&objs[i]);
        free(src[i]);
    }
}

static void case_link_shared(lntune_jit *jit) {
    printf("link_shared gives a shared object that dlopen()s and runs\n");
    char *src = kernel_source(11);
    lntune_jit_object obj;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &obj), LNTUNE_OK);
    void *so = NULL;
    size_t so_len = 0;
    char *diag = NULL;
    CHECK_RC(lntune_jit_link_shared(jit, obj.data, obj.len, &so, &so_len, &diag), LNTUNE_OK);
    CHECK(so && so_len > 4 && memcmp(so, "\177ELF", 4) == 0 && !diag);
    char *so_path = path_in_temp("variant.so");
    FILE *f = fopen(so_path, "wb");
    CHECK(f && fwrite(so, 1, so_len, f) == so_len);
    if (f) fclose(f);
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (h) {
        lntune_kernel_fn fn = NULL;
        *(void **)&fn = dlsym(h, "lntune_kernel");
        CHECK(kernel_gives(fn, 11));
        dlclose(h);
    } else {
        printf("    %s\n", dlerror());
    }
    /* Garbage is a link failure with the linker's message, not a crash. */
    free(so);
    so = NULL;
    CHECK_RC(lntune_jit_link_shared(jit, "not an object", 13, &so, &so_len, &diag),
             LNTUNE_ECOMPILE);
    CHECK(so == NULL && diag && *diag);
    free(diag);
    unlink(so_path);
    free(so_path);
    lntune_jit_object_free(&obj);
    free(src);
}

static void case_bad_loads(lntune_jit *jit) {
    printf("a missing symbol, an unresolved external or a non-object fail to load cleanly\n");
    char *src = kernel_source(2);
    lntune_jit_object obj;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &obj), LNTUNE_OK);
    lntune_jit_module *m = (lntune_jit_module *)1;
    lntune_kernel_fn fn = (lntune_kernel_fn)1;
    CHECK_RC(lntune_jit_load(jit, obj.data, obj.len, "no_such_kernel", &m, &fn), LNTUNE_ENOTFOUND);
    CHECK(m == NULL && fn == NULL);
    CHECK(strstr(lntune_jit_errmsg(jit), "no_such_kernel") != NULL);
    CHECK_RC(lntune_jit_load(jit, "garbage", 7, "lntune_kernel", &m, &fn), LNTUNE_EINVAL);
    CHECK_RC(lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", NULL, &fn), LNTUNE_EINVAL);
    lntune_jit_object_free(&obj);

    /* Compiles, but needs a function nobody defines: the link at load time names it. */
    const char *ext = "int lntune_missing_helper_77(void);\n"
                      "int lntune_kernel(void) { return lntune_missing_helper_77(); }\n";
    CHECK_RC(lntune_jit_compile(jit, ext, NULL, &obj), LNTUNE_OK);
    CHECK_RC(lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", &m, &fn), LNTUNE_ERROR);
    CHECK(m == NULL && strstr(lntune_jit_errmsg(jit), "lntune_missing_helper_77") != NULL);
    printf("    %s\n", lntune_jit_errmsg(jit));
    lntune_jit_object_free(&obj);

    lntune_jit_unload(NULL);
    lntune_jit_object_free(NULL);
    lntune_jit_close(NULL);
    free(src);
}

static void case_close_unloads(void) {
    printf("close unloads modules still loaded\n");
    lntune_jit_config cfg = {.cache_dir = ""};
    lntune_jit *jit = NULL;
    CHECK_RC(lntune_jit_open(&cfg, &jit), LNTUNE_OK);
    char *src = kernel_source(4);
    lntune_jit_object obj;
    CHECK_RC(lntune_jit_compile(jit, src, include_flags, &obj), LNTUNE_OK);
    lntune_jit_module *m = NULL;
    lntune_kernel_fn fn = NULL;
    CHECK_RC(lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", &m, &fn), LNTUNE_OK);
    CHECK(kernel_gives(fn, 4));
    lntune_jit_close(jit); /* m goes with it; nothing to unload afterwards */
    lntune_jit_object_free(&obj);
    free(src);
}

/* Compiles a file's source repeatedly without the cache and prints the times. */
static int time_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return perror(path), 1;
    static char src[1 << 20];
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    src[n] = '\0';
    lntune_jit_config cfg = {.cache_dir = ""};
    lntune_jit *jit = NULL;
    int rc = lntune_jit_open(&cfg, &jit);
    if (rc != LNTUNE_OK) return printf("%s\n", lntune_jit_errmsg(jit)), lntune_jit_close(jit), 1;
    printf("%s\n", lntune_jit_compiler_version(jit));
    double best = 1e30, sum = 0;
    for (int i = 0; i < 5; ++i) {
        lntune_jit_object obj;
        if ((rc = lntune_jit_compile(jit, src, NULL, &obj)) != LNTUNE_OK) {
            printf("%s\n", obj.diag ? obj.diag : lntune_jit_errmsg(jit));
            lntune_jit_object_free(&obj);
            break;
        }
        lntune_jit_module *m = NULL;
        lntune_kernel_fn fn = NULL;
        int lrc = lntune_jit_load(jit, obj.data, obj.len, "lntune_kernel", &m, &fn);
        printf("compile %d: %.1f ms, %zu bytes, load %s\n", i, obj.compile_ms, obj.len,
               lrc == LNTUNE_OK ? "ok" : lntune_jit_errmsg(jit));
        best = obj.compile_ms < best ? obj.compile_ms : best;
        sum += obj.compile_ms;
        lntune_jit_unload(m);
        lntune_jit_object_free(&obj);
    }
    printf("best %.1f ms, mean %.1f ms\n", best, sum / 5);
    lntune_jit_close(jit);
    return rc != LNTUNE_OK;
}

int main(int argc, char **argv) {
    if (argc > 1) return time_file(argv[1]);
    temp_dir = lntune_cc_tempdir();
    if (!temp_dir) return printf("cannot make a temporary directory\n"), 1;
    char *cache = path_in_temp("main-cache");
    lntune_jit_config cfg = {.cache_dir = cache};
    lntune_jit *jit = NULL;
    int rc = lntune_jit_open(&cfg, &jit);
    printf("open: %s; compiler: %s\n", lntune_errstr(rc), lntune_jit_compiler_version(jit));
    if (rc != LNTUNE_OK) {
        printf("    %s\n", lntune_jit_errmsg(jit));
        lntune_jit_close(jit);
        return 1;
    }
    CHECK(*lntune_jit_compiler_version(jit) != '\0');

    case_compile_load_call(jit);
    case_same_symbol_twice_and_reload(jit);
    case_cache();
    case_syntax_error(jit);
    case_missing_compiler();
    case_compile_many(jit);
    case_link_shared(jit);
    case_bad_loads(jit);
    case_close_unloads();

    lntune_jit_close(jit);
    lntune_cc_remove_dir(cache);
    lntune_cc_remove_dir(temp_dir);
    free(cache);
    free(temp_dir);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures != 0;
}
