/*
 * chart.c - the SVG chart: one panel per thread count and op, grouped bars of GB/s per
 * bandwidth shape and implementation, with the better copy drawn as a dashed line over each
 * group. Busy measurements are drawn pale and starred, disagreeing ones marked "!". Plain SVG
 * text: no plotting library, viewable in any browser.
 */
#include "bench.h"

#include <math.h>
#include <string.h>

static const char *const impls[] = {
    "lntune_tuned", "lntune_builtin", "lntune_export", "onednn", "onednn3",     "ort",
    "ggml",         "torch",          "torch_out",     "naive",  "copy_memcpy", "copy_nt"};
static const char *const colors[] = {"#d62728", "#ff9896", "#9467bd", "#1f77b4",
                                     "#aec7e8", "#17becf", "#bcbd22", "#ff7f0e",
                                     "#ffbb78", "#7f7f7f", "#2ca02c", "#98df8a"};
enum {
    NIMPL = sizeof impls / sizeof impls[0],
    BAR = 11,
    GAP = 24,
    LEFT = 70,
    PANEL_H = 260,
    PLOT_H = 180,
    TOP = 70
};

typedef struct {
    int threads;
    const char *op;
} panel;

/* The bandwidth shapes of one thread count, in the order measured. */
static size_t shapes_of(const lntune_bench_records *rs, int threads, lntune_bench_shape *out,
                        size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < rs->n; ++i) {
        const lntune_bench_record *r = &rs->r[i];
        if (r->threads != threads || lntune_bench_is_latency(r->rows, r->H)) continue;
        int seen = 0;
        for (size_t j = 0; j < n; ++j) seen |= out[j].rows == r->rows && out[j].H == r->H;
        if (!seen && n < cap) out[n].rows = r->rows, out[n].H = r->H, n++;
    }
    return n;
}

/* A round axis maximum: 1, 2 or 5 times a power of ten. */
static double nice_max(double v) {
    if (v <= 0) return 1.0;
    double p = pow(10.0, floor(log10(v)));
    return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

static void draw_panel(FILE *f, const lntune_bench_records *rs, panel pn, double y0) {
    lntune_bench_shape shapes[32];
    size_t ns = shapes_of(rs, pn.threads, shapes, 32);
    double top = 0.0;
    for (size_t s = 0; s < ns; ++s)
        for (int i = 0; i < NIMPL; ++i) {
            const lntune_bench_record *r =
                lntune_bench_find(rs, impls[i], pn.op, pn.threads, shapes[s].rows, shapes[s].H);
            if (r && r->us > 0 && r->gbps > top) top = r->gbps;
        }
    const double ymax = nice_max(top), base = y0 + PLOT_H;
    const int group = NIMPL * BAR + GAP;
    fprintf(f,
            "<text x=\"%d\" y=\"%.0f\" font-size=\"14\" font-weight=\"bold\">%s, %d thread%s "
            "(GB/s, higher is better)</text>\n",
            LEFT, y0 - 12, strcmp(pn.op, "layernorm") ? "RMSNorm" : "LayerNorm", pn.threads,
            pn.threads > 1 ? "s" : "");
    for (int t = 0; t <= 4; ++t) {
        const double y = base - PLOT_H * t / 4.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%zu\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT,
                y, LEFT + ns * group, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
                LEFT - 6, y + 4, ymax * t / 4.0);
    }
    for (size_t s = 0; s < ns; ++s) {
        const double gx = LEFT + (double)s * group + GAP / 2.0;
        for (int i = 0; i < NIMPL; ++i) {
            const lntune_bench_record *r =
                lntune_bench_find(rs, impls[i], pn.op, pn.threads, shapes[s].rows, shapes[s].H);
            const double x = gx + i * BAR;
            if (!r || r->us <= 0) {
                fprintf(f,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"8\" fill=\"#999\" "
                        "text-anchor=\"middle\">-</text>\n",
                        x + BAR / 2.0, base - 2);
                continue;
            }
            const double h = PLOT_H * r->gbps / ymax;
            const int busy = r->busy > LNTUNE_BENCH_BUSY_CORES;
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"%s>"
                    "<title>%s %lldx%lld: %.2f GB/s, %.2f us%s%s</title></rect>\n",
                    x, base - h, BAR - 1, h, colors[i], busy ? " fill-opacity=\"0.45\"" : "",
                    lntune_bench_impl_label(impls[i]), (long long)r->rows, (long long)r->H, r->gbps,
                    r->us, busy ? ", machine busy" : "", r->flagged ? ", disagrees" : "");
            if (busy || r->flagged)
                fprintf(f,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">"
                        "%s%s</text>\n",
                        x + BAR / 2.0, base - h - 2, busy ? "*" : "", r->flagged ? "!" : "");
        }
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">"
                "%lldx%lld</text>\n",
                gx + NIMPL * BAR / 2.0, base + 15, (long long)shapes[s].rows,
                (long long)shapes[s].H);
    }
}

void lntune_bench_write_svg(FILE *f, const lntune_bench_records *rs, const char *title) {
    panel panels[16];
    size_t np = 0, maxshapes = 1;
    for (size_t i = 0; i < rs->n && np + 2 <= 16; ++i) {
        int seen = 0;
        for (size_t j = 0; j < np; ++j) seen |= panels[j].threads == rs->r[i].threads;
        if (seen) continue;
        panels[np++] = (panel){rs->r[i].threads, "layernorm"};
        panels[np++] = (panel){rs->r[i].threads, "rmsnorm"};
        lntune_bench_shape tmp[32];
        size_t ns = shapes_of(rs, rs->r[i].threads, tmp, 32);
        if (ns > maxshapes) maxshapes = ns;
    }
    size_t width = LEFT + maxshapes * (NIMPL * BAR + GAP) + 20;
    if (width < LEFT + NIMPL * 105 + 20) width = LEFT + NIMPL * 105 + 20; /* the legend */
    const size_t height = TOP + np * PANEL_H + 30;
    fprintf(
        f,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%zu\" height=\"%zu\" "
        "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        width, height);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"16\" font-weight=\"bold\">%s</text>\n", LEFT,
            title ? title : "lntune benchmarks");
    for (int i = 0; i < NIMPL; ++i)
        fprintf(f,
                "<rect x=\"%d\" y=\"34\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" "
                "y=\"43\" font-size=\"11\">%s</text>\n",
                LEFT + i * 105, colors[i], LEFT + i * 105 + 14, lntune_bench_impl_label(impls[i]));
    fprintf(f,
            "<text x=\"%d\" y=\"60\" font-size=\"10\" fill=\"#555\">pale bar and *: machine busy "
            "while measured; !: disagrees with float64 reference; -: n/a</text>\n",
            LEFT);
    for (size_t p = 0; p < np; ++p) draw_panel(f, rs, panels[p], TOP + 30 + (double)p * PANEL_H);
    fprintf(f, "</svg>\n");
}
