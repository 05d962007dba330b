/*
 * test_bench_report.c - the bench's records and report, without timing anything: records survive
 * the JSON-lines round trip (ours and Python's json.dumps spelling), the markdown table gives the
 * ratio to the better copy, says n/a with its reason, and marks busy and disagreeing cells; the
 * SVG is one complete document. Built only with the bench (LNTUNE_BUILD_BENCH).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include "lntune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, what);                         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static lntune_bench_record rec(const char *impl, const char *op, double gbps, double busy,
                               int flagged, const char *note) {
    lntune_bench_record r = {0};
    snprintf(r.impl, sizeof r.impl, "%s", impl);
    snprintf(r.op, sizeof r.op, "%s", op);
    r.rows = 2048, r.H = 4096, r.threads = 1, r.reps = 7;
    r.gbps = gbps;
    r.us = gbps > 0 ? 2.0 * 2048 * 4096 * 4 / gbps * 1e-3 : -1.0;
    r.max_error = gbps > 0 ? 1e-7 : -1.0;
    r.busy = busy, r.flagged = flagged;
    snprintf(r.note, sizeof r.note, "%s", note);
    return r;
}

/* Renders rs with writer into a string (caller frees). */
static char *render(const lntune_bench_records *rs, int svg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (svg)
        lntune_bench_write_svg(f, rs, "t");
    else
        lntune_bench_write_markdown(f, rs, "t");
    fclose(f);
    return buf;
}

int main(void) {
    /* A record written and parsed back is the same record. */
    lntune_bench_record a = rec("onednn", "layernorm", 4.5, 0.02, 0, "oneDNN simple:any"), b;
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    lntune_bench_record_write(f, &a);
    fclose(f);
    CHECK(lntune_bench_record_parse(line, &b) == LNTUNE_OK, "round trip parses");
    CHECK(strcmp(b.impl, a.impl) == 0 && strcmp(b.op, a.op) == 0 && b.rows == a.rows &&
              b.H == a.H && b.reps == 7 && strcmp(b.note, a.note) == 0,
          "round trip keeps the fields");
    CHECK(b.gbps > 4.49 && b.gbps < 4.51, "round trip keeps GB/s");
    CHECK(strcmp(b.dtype, "f32") == 0, "a record of no type is written and read as f32");
    free(line);
    snprintf(a.dtype, sizeof a.dtype, "bf16");
    f = open_memstream(&line, &len);
    lntune_bench_record_write(f, &a);
    fclose(f);
    CHECK(lntune_bench_record_parse(line, &b) == LNTUNE_OK && strcmp(b.dtype, "bf16") == 0,
          "round trip keeps the type");
    free(line);

    /* Python's spelling (escapes, key order) parses too; a line that is not a record does not. */
    CHECK(lntune_bench_record_parse("{\"note\": \"a \\\"q\\\" \\u00e9\", \"impl\": \"torch\", "
                                    "\"op\": \"rmsnorm\", \"rows\": 1, \"H\": 4096, \"us\": 2.5}",
                                    &b) == LNTUNE_OK &&
              strcmp(b.impl, "torch") == 0 && b.us == 2.5,
          "json.dumps line parses");
    CHECK(lntune_bench_record_parse("bench_torch: 1x4096 at 1 thread(s)", &b) != LNTUNE_OK,
          "progress text is not a record");

    /* The table: ratio to the better copy, n/a with reason, busy and disagreement marks. */
    lntune_bench_records rs = {0};
    lntune_bench_record in[] = {
        rec("copy_memcpy", "copy", 6.0, 0.0, 0, ""),
        rec("copy_nt", "copy", 8.0, 0.0, 0, ""),
        rec("onednn", "layernorm", 4.0, 0.0, 0, ""),
        rec("naive", "layernorm", 2.0, 0.5, 1, ""),
        rec("onednn", "rmsnorm", -1.0, 0.0, 0, "oneDNN 2.6 has no RMSNorm primitive"),
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; ++i) lntune_bench_records_add(&rs, &in[i]);
    char *md = render(&rs, 0);
    CHECK(strstr(md, "4.0 GB/s (0.50x) |") != NULL, "oneDNN at half the better copy, unmarked");
    CHECK(strstr(md, "2.0 GB/s (0.25x) \\* ! |") != NULL, "a busy, disagreeing cell is marked");
    CHECK(strstr(md, "n/a: oneDNN 2.6 has no RMSNorm primitive") != NULL, "n/a says why");
    CHECK(strstr(md, "## RMSNorm, 1 thread") != NULL, "RMSNorm has its own table");
    free(md);
    char *svg = render(&rs, 1);
    CHECK(strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>\n") != NULL, "one SVG document");
    CHECK(strstr(svg, "fill-opacity=\"0.45\"") != NULL, "the busy bar is pale");
    free(svg);
    lntune_bench_records_free(&rs);

    /* The targets' verdict comes from the same records: a cell below 0.9x the better copy or
     * slower than oneDNN is named; the latency target reads 1x4096 at 1 thread. */
    lntune_bench_records ts = {0};
    lntune_bench_record t[] = {
        rec("copy_memcpy", "copy", 6.0, 0.0, 0, ""),
        rec("copy_nt", "copy", 10.0, 0.0, 0, ""),
        rec("lntune_tuned", "layernorm", 8.0, 0.0, 0, ""),
        rec("onednn", "layernorm", 9.0, 0.0, 0, ""),
        rec("lntune_tuned", "rmsnorm", 9.5, 0.0, 0, ""),
        rec("lntune_tuned", "layernorm", 1.0, 0.0, 0, ""),
        rec("lntune_tuned", "rmsnorm", 1.0, 0.0, 0, ""),
    };
    t[5].rows = t[6].rows = 1;
    t[5].us = 0.91, t[6].us = 0.45;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; ++i) lntune_bench_records_add(&ts, &t[i]);
    md = render(&ts, 0);
    CHECK(strstr(md, "**missed:** lntune tuned >= 0.9x the better copy at every bandwidth shape "
                     "(1 of 2 shape x op x thread-count cells below): LayerNorm 2048x4096 1t "
                     "0.80x") != NULL,
          "the copy target names the cell below 0.9x");
    CHECK(strstr(md, "RMSNorm 2048x4096 1t 0.95x") == NULL, "a cell at 0.95x is not named");
    CHECK(strstr(md, "**missed:** never slower than oneDNN 2 (1 of 1 cells slower): LayerNorm "
                     "2048x4096 1t 0.89x oneDNN 2's speed") != NULL,
          "the oneDNN target names the slower cell");
    CHECK(strstr(md, ">= 1.3x oneDNN 2 in geometric mean: 0.89x over 1 cells") != NULL,
          "the geometric mean over the cells both measured");
    CHECK(strstr(md, "**missed:** LayerNorm 1x4096 at 1 thread <= 0.7 us: 0.91 us") != NULL &&
              strstr(md, "**met:** RMSNorm 1x4096 at 1 thread <= 0.7 us: 0.45 us") != NULL,
          "the latency target per op");
    free(md);

    /* With oneDNN 3 beside oneDNN 2, each cell is against the faster of the two. */
    lntune_bench_record d3 = rec("onednn3", "layernorm", 12.0, 0.0, 0, "");
    lntune_bench_records_add(&ts, &d3);
    md = render(&ts, 0);
    CHECK(strstr(md, "**missed:** never slower than the faster of oneDNN 2 and 3 (1 of 1 cells "
                     "slower): LayerNorm 2048x4096 1t 0.67x oneDNN 3's speed") != NULL,
          "the faster oneDNN is the one named");
    CHECK(strstr(md, ">= 1.3x the faster of oneDNN 2 and 3 in geometric mean: 0.67x over 1 "
                     "cells") != NULL,
          "one cell, against the faster oneDNN");
    CHECK(strstr(md, "| oneDNN 2 | oneDNN 3 |") != NULL, "a column per oneDNN");
    free(md);

    /* A bf16 run: its intro names the type, and its target is issue #6's, LayerNorm 4096x4096
     * at 0.85x the better copy (the 2048x4096 cells are not part of it). */
    for (size_t i = 0; i < ts.n; ++i) snprintf(ts.r[i].dtype, sizeof ts.r[i].dtype, "bf16");
    lntune_bench_record big[] = {rec("copy_nt", "copy", 10.0, 0.0, 0, ""),
                                 rec("lntune_tuned", "layernorm", 8.2, 0.0, 0, "")};
    for (size_t i = 0; i < 2; ++i) {
        big[i].rows = 4096;
        snprintf(big[i].dtype, sizeof big[i].dtype, "bf16");
        lntune_bench_records_add(&ts, &big[i]);
    }
    md = render(&ts, 0);
    CHECK(strstr(md, "bf16 forward: x, y, gamma and beta in bf16") != NULL,
          "the intro names the type");
    CHECK(strstr(md, "## Targets (issue #6)") != NULL &&
              strstr(md, "**missed:** lntune tuned LayerNorm 4096x4096 >= 0.85x the better copy (1 "
                         "of 1 shape x op x thread-count cells below): LayerNorm 4096x4096 1t "
                         "0.82x") != NULL,
          "a 16-bit run is judged on LayerNorm 4096x4096 alone");
    CHECK(strstr(md, "1x4096 at 1 thread <= 0.7 us") == NULL, "no latency target for 16 bits");
    free(md);
    lntune_bench_records_free(&ts);

    if (failures) return 1;
    printf("test_bench_report: all checks passed\n");
    return 0;
}
