/*
 * records.c - bench records as JSON lines: one flat object a line, the format both the C bench
 * and bench_torch.py write, so that runs in several processes merge by concatenation.
 */
#include "bench.h"

#include "lntune.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int lntune_bench_records_add(lntune_bench_records *rs, const lntune_bench_record *r) {
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        lntune_bench_record *p = realloc(rs->r, cap * sizeof *p);
        if (!p) return LNTUNE_ENOMEM;
        rs->r = p, rs->cap = cap;
    }
    rs->r[rs->n++] = *r;
    return LNTUNE_OK;
}

void lntune_bench_records_free(lntune_bench_records *rs) {
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

const char *lntune_bench_records_dtype(const lntune_bench_records *rs) {
    return rs->n && rs->r[0].dtype[0] ? rs->r[0].dtype : "f32";
}

/* Notes are our own text; quotes and backslashes are dropped rather than escaped. */
static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; ++s)
        if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20) fputc(*s, f);
    fputc('"', f);
}

void lntune_bench_record_write(FILE *f, const lntune_bench_record *r) {
    fprintf(f, "{\"impl\": ");
    put_string(f, r->impl);
    fprintf(f, ", \"op\": ");
    put_string(f, r->op);
    fprintf(f, ", \"dtype\": ");
    put_string(f, r->dtype[0] ? r->dtype : "f32");
    fprintf(f,
            ", \"rows\": %lld, \"H\": %lld, \"threads\": %d, \"us\": %.6g, \"gbps\": %.6g, "
            "\"max_error\": %.3g, \"busy\": %.3f, \"reps\": %d, \"flagged\": %d, \"note\": ",
            (long long)r->rows, (long long)r->H, r->threads, r->us, r->gbps, r->max_error, r->busy,
            r->reps, r->flagged);
    put_string(f, r->note);
    fprintf(f, "}\n");
}

/* Reads a JSON string at *p (after the quote) into out; handles the escapes json.dumps writes
 * for ASCII text. */
static const char *get_string(const char *p, char *out, size_t cap) {
    size_t n = 0;
    for (; *p && *p != '"'; ++p) {
        char c = *p;
        if (c == '\\' && p[1]) {
            c = *++p;
            if (c == 'n' || c == 't')
                c = ' ';
            else if (c == 'u') { /* non-ASCII: keep a placeholder */
                c = '?';
                for (int i = 0; i < 4 && p[1]; ++i) ++p;
            }
        }
        if (n + 1 < cap) out[n++] = c;
    }
    out[n] = '\0';
    return *p == '"' ? p + 1 : NULL;
}

int lntune_bench_record_parse(const char *line, lntune_bench_record *r) {
    memset(r, 0, sizeof *r);
    r->us = r->gbps = r->max_error = -1.0;
    snprintf(r->dtype, sizeof r->dtype, "f32"); /* lines written before runs had a type */
    const char *p = line;
    while (isspace((unsigned char)*p)) ++p;
    if (*p++ != '{') return LNTUNE_EINVAL;
    int have_impl = 0;
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ',') ++p;
        if (*p == '}') break;
        if (*p++ != '"') return LNTUNE_EINVAL;
        char key[32], sval[160];
        if (!(p = get_string(p, key, sizeof key))) return LNTUNE_EINVAL;
        while (isspace((unsigned char)*p)) ++p;
        if (*p++ != ':') return LNTUNE_EINVAL;
        while (isspace((unsigned char)*p)) ++p;
        double v = 0.0;
        sval[0] = '\0';
        if (*p == '"') {
            if (!(p = get_string(p + 1, sval, sizeof sval))) return LNTUNE_EINVAL;
        } else if (strncmp(p, "null", 4) == 0 || strncmp(p, "true", 4) == 0) {
            v = *p == 't';
            p += 4;
        } else if (strncmp(p, "false", 5) == 0) {
            p += 5;
        } else {
            char *end;
            v = strtod(p, &end);
            if (end == p) return LNTUNE_EINVAL;
            p = end;
        }
        if (strcmp(key, "impl") == 0) {
            snprintf(r->impl, sizeof r->impl, "%s", sval);
            have_impl = 1;
        } else if (strcmp(key, "op") == 0)
            snprintf(r->op, sizeof r->op, "%s", sval);
        else if (strcmp(key, "dtype") == 0)
            snprintf(r->dtype, sizeof r->dtype, "%s", sval);
        else if (strcmp(key, "note") == 0)
            snprintf(r->note, sizeof r->note, "%s", sval);
        else if (strcmp(key, "rows") == 0)
            r->rows = (int64_t)v;
        else if (strcmp(key, "H") == 0)
            r->H = (int64_t)v;
        else if (strcmp(key, "threads") == 0)
            r->threads = (int)v;
        else if (strcmp(key, "us") == 0)
            r->us = v;
        else if (strcmp(key, "gbps") == 0)
            r->gbps = v;
        else if (strcmp(key, "max_error") == 0)
            r->max_error = v;
        else if (strcmp(key, "busy") == 0)
            r->busy = v;
        else if (strcmp(key, "reps") == 0)
            r->reps = (int)v;
        else if (strcmp(key, "flagged") == 0)
            r->flagged = (int)v;
    }
    return have_impl && r->op[0] && r->rows > 0 && r->H > 0 ? LNTUNE_OK : LNTUNE_EINVAL;
}

int lntune_bench_records_read(FILE *f, lntune_bench_records *rs) {
    char line[1024];
    lntune_bench_record r;
    while (fgets(line, sizeof line, f))
        if (lntune_bench_record_parse(line, &r) == LNTUNE_OK &&
            lntune_bench_records_add(rs, &r) != LNTUNE_OK)
            return LNTUNE_ENOMEM;
    return LNTUNE_OK;
}

const lntune_bench_record *lntune_bench_find(const lntune_bench_records *rs, const char *impl,
                                             const char *op, int threads, int64_t rows, int64_t H) {
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        if (r->threads == threads && r->rows == rows && r->H == H && strcmp(r->impl, impl) == 0 &&
            (strcmp(r->op, op) == 0 || strcmp(r->op, "copy") == 0))
            return r;
    }
    return NULL;
}
