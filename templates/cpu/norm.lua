-- templates/cpu/norm.lua - CPU LayerNorm and RMSNorm forward, fp32 in and out.
--
-- Shared by cpu/layernorm.lua and cpu/rmsnorm.lua, which differ only in their statistics. The
-- parameter space below is the whole list of knobs: C code reads it, never repeats it. Each
-- knob lists its values from the simplest to the most elaborate: the tuner takes the variant of
-- first values as the naive baseline, and prefers the simpler of two variants within noise.
--
-- Numerics. LayerNorm shifts every row by its first element k before summing, so that fp32
-- partial sums stay of the order of the deviations even when the mean is large (1000 + randn),
-- and a constant row gives a variance of exactly 0. fp32 partial sums are flushed into double
-- every BLOCK elements, so no long fp32 accumulation chain ever forms (H = 65536 at mean 1000
-- would otherwise lose three digits). "onepass" and "wide" accumulate in double lanes.

local M = {}

local cpu = lntune.import("cpu/host.lua")
local vector_widths, thread_counts, stream = cpu.vector_widths, cpu.thread_counts, cpu.stream

-- Every name the source declares at file scope besides the kernel, so that several kernels can
-- share one translation unit (the engine prefixes them with the kernel's symbol).
local FILE_SCOPE_NAMES = {
    "vf", "vd", "LANES", "STEP", "BLOCK", "load", "store", "stream", "hsum", "square", "hsum_wide",
    "welford", "merge", "sum_shifted", "sum_squared_deviations", "sum_squares", "row_stats",
    "normalize_gamma_beta", "normalize_gamma", "normalize_plain", "normalize_fn",
}

-- Rows per iteration only pays off while a row's statistics are short loops.
local MAX_H_FOR_ROW_GROUPS = 4096

function M.family(op)
    local layernorm = op == "layernorm"
    return lntune.family {
        op = op,
        target = "cpu",
        file_scope_names = FILE_SCOPE_NAMES,
        params = {
            { name = "vec", values = vector_widths, doc = "floats per SIMD vector" },
            { name = "acc", values = { 1, 2, 4 }, doc = "independent accumulators (unroll)" },
            {
                name = "stats",
                values = layernorm and { "twopass", "welford", "onepass" } or { "blocked", "wide" },
                doc = layernorm
                    and "twopass: mean then squared deviations; welford: per-lane Welford merged "
                        .. "with Chan's formula; onepass: sum and sum of squares in double lanes"
                    or "blocked: fp32 lanes flushed into double; wide: double lanes",
            },
            { name = "affine", values = { "fused", "none" }, doc = "gamma/beta in the normalize pass, or none" },
            { name = "rows", values = { 1, 2, 4 }, doc = "rows whose statistics are computed together" },
            {
                name = "h",
                values = function(_, shape) return shape.H and { "runtime", "fixed" } or { "runtime" } end,
                doc = "H read at run time, or fixed when the source is generated",
            },
            { name = "store", values = { "plain", "nt" }, doc = "plain or non-temporal stores of y" },
            { name = "prefetch", values = { 0, 1 }, doc = "prefetch the next row (group) into L2 while normalizing" },
            { name = "threads", values = thread_counts, launch = true, doc = "threads across rows" },
        },
        valid = function(p, host, shape)
            if p.store == "nt" and not (stream[p.vec] and host.isa[stream[p.vec].isa]) then
                return false, "non-temporal stores need vec >= 4 on x86"
            end
            if p.rows > 1 and shape.H and shape.H > MAX_H_FOR_ROW_GROUPS then
                return false, "rows > 1 is for H <= " .. MAX_H_FOR_ROW_GROUPS
            end
            if p.h == "fixed" and not shape.H then return false, "h=fixed needs a shape with H" end
            if shape.affine and p.affine ~= shape.affine then
                return false, "the call " .. (shape.affine == "none" and "has no" or "has") .. " gamma"
            end
            if shape.rows and p.threads > 1 and p.threads > shape.rows then
                return false, "more threads than rows"
            end
            return true
        end,
        derive = function(p, _, shape)
            return {
                layernorm = layernorm,
                V = p.vec,
                A = p.acc,
                R = p.rows,
                fixed_H = p.h == "fixed" and shape.H or false,
                nt = p.store == "nt" and stream[p.vec] or false,
                -- A fixed H that is a multiple of the step needs no scalar tail loops (and GCC
                -- warns about the dead ones).
                tail = not (p.h == "fixed" and shape.H % (p.vec * p.acc) == 0),
            }
        end,
        properties = function(p, _, shape)
            return {
                threads = p.threads,
                affine = p.affine,
                fixed_h = p.h == "fixed" and shape.H or 0,
            }
        end,
        source = lntune.template [==[
@ local LN = layernorm
@ local wide = p.stats == "onepass" or p.stats == "wide"
@ -- Calls body(r) once per row of a row group.
@ local function rows(body) for r = 0, R - 1 do body(r) end end
@ -- Calls body(r, u) once per row and accumulator.
@ local function lanes(body) for r = 0, R - 1 do for u = 0, A - 1 do body(r, u) end end end
{{ lntune.abi_header() }}

@ if V > 1 then
typedef float vf __attribute__((vector_size({{V * 4}})));
@   if wide then
typedef double vd __attribute__((vector_size({{V * 8}})));
@   end
@ else
typedef float vf;
@   if wide then
typedef double vd;
@   end
@ end

/* {{V}} lanes; {{A}} accumulators per row; fp32 partial sums flushed to double every BLOCK. */
enum { LANES = {{V}}, STEP = {{V * A}}, BLOCK = {{V * A * 64}} };

/* x and y need only float alignment: every vector access is unaligned. */
static inline vf load(const float *p)
{
    vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

@ if not nt then

static inline void store(float *p, vf v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
@ else

/* A non-temporal store of an aligned vector (the builtins of the _mm*_stream_ps intrinsics,
 * used directly because <immintrin.h> alone triples the compile time of a kernel). */
static inline void stream(float *p, vf v)
{
#if defined(__clang__)
    __builtin_nontemporal_store(v, (vf *)p);
#else
    {{nt.gcc}}(p, v);
#endif
}
@ end
@ if p.stats == "twopass" or p.stats == "blocked" then

static inline double hsum(vf v)
{
@ if V == 1 then
    return v;
@ else
    double s = 0.0;
    for (int j = 0; j < LANES; ++j) s += v[j];
    return s;
@ end
}

static inline vf square(vf v)
{
    return v * v;
}
@ end
@ if wide then

static inline double hsum_wide(const vd *v)
{
@   if V == 1 then
    return *v;
@   else
    double s = 0.0;
    for (int j = 0; j < LANES; ++j) s += (*v)[j];
    return s;
@   end
}
@ end
@
@ -- Emits a function that adds term(r, offset) (an fp32 vector expression) over every element
@ -- of R rows into double sums s[r], flushing the fp32 partial sums every BLOCK elements;
@ -- scalar(r) is the same term for the one element at index i.
@ local function reduction(name, comment, extra, term, scalar)
/* {{comment}} */
static void {{name}}(const float *const x[{{R}}], int64_t H{{extra}}, double s[{{R}}])
{
    const int64_t nstep = H / STEP * STEP;
    int64_t i = 0;
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@   lanes(function(r, u)
        vf a{{r}}_{{u}} = {0};
@   end)
        for (i = b; i < e; i += STEP) {
@   lanes(function(r, u)
            a{{r}}_{{u}} += {{ term(r, u * V) }};
@   end)
        }
@   rows(function(r)
@     local sum = {}
@     for u = 0, A - 1 do sum[#sum + 1] = "a" .. r .. "_" .. u end
        s[{{r}}] += hsum({{ table.concat(sum, " + ") }});
@   end)
    }
@   if tail then
    for (i = nstep; i < H; ++i) {
@     rows(function(r)
        s[{{r}}] += {{ scalar(r) }};
@     end)
    }
@   end
}

@ end
@ local function at(r, o) return "load(x[" .. r .. "] + i + " .. o .. ")" end
@ if LN and p.stats == "twopass" then
@   reduction("sum_shifted", "s[r] += sum of x[r][i] - k[r].", ", const float k[" .. R .. "]",
@             function(r, o) return at(r, o) .. " - k[" .. r .. "]" end,
@             function(r) return "x[" .. r .. "][i] - k[" .. r .. "]" end)
@   reduction("sum_squared_deviations", "s[r] += sum of (x[r][i] - mean[r])^2.",
@             ", const float mean[" .. R .. "]",
@             function(r, o) return "square(" .. at(r, o) .. " - mean[" .. r .. "])" end,
@             function(r) return "(x[" .. r .. "][i] - mean[" .. r .. "]) * (x[" .. r .. "][i] - mean[" .. r .. "])" end)
/* Mean and 1/sqrt(var + eps) of {{R}} row(s): a pass for the mean, one for squared deviations. */
static void row_stats(const float *const x[{{R}}], int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}])
{
    float k[{{R}}];
    double s[{{R}}] = {0}, ss[{{R}}] = {0};
    for (int r = 0; r < {{R}}; ++r) k[r] = x[r][0];
    sum_shifted(x, H, k, s);
    for (int r = 0; r < {{R}}; ++r) mean[r] = (float)(k[r] + s[r] / (double)H);
    sum_squared_deviations(x, H, mean, ss);
    for (int r = 0; r < {{R}}; ++r)
        rstd[r] = (float)(1.0 / __builtin_sqrt(ss[r] / (double)H + (double)eps));
}
@ elseif LN and p.stats == "welford" then
/* Welford's update of one lane group; the state is (count, mean, M2) of x - k. */
static inline void welford(vf v, float inv_n, vf *m, vf *m2)
{
    const vf d = v - *m;
    *m += d * inv_n;
    *m2 += d * (v - *m);
}

/* Merges a block's lane states (n elements each) into a double running state (Chan et al.). */
static inline void merge(double *n, double *mean, double *m2, double nb, vf mb, vf m2b)
{
@   if V == 1 then
    const double total = *n + nb, d = (double)mb - *mean;
    *mean += d * nb / total;
    *m2 += (double)m2b + d * d * *n * nb / total;
    *n = total;
@   else
    for (int j = 0; j < LANES; ++j) {
        const double total = *n + nb, d = (double)mb[j] - *mean;
        *mean += d * nb / total;
        *m2 += (double)m2b[j] + d * d * *n * nb / total;
        *n = total;
    }
@   end
}

/* Mean and 1/sqrt(var + eps) of {{R}} row(s) by per-lane Welford over blocks of BLOCK. */
static void row_stats(const float *const x[{{R}}], int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}])
{
    const int64_t nstep = H / STEP * STEP;
    double n[{{R}}] = {0}, mu[{{R}}] = {0}, m2[{{R}}] = {0};
    float k[{{R}}];
@   rows(function(r)
    k[{{r}}] = x[{{r}}][0];
@   end)
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@   lanes(function(r, u)
        vf m{{r}}_{{u}} = {0}, q{{r}}_{{u}} = {0};
@   end)
        float count = 0.0f;
        for (int64_t i = b; i < e; i += STEP) {
            count += 1.0f;
            const float inv_n = 1.0f / count;
@   lanes(function(r, u)
            welford(load(x[{{r}}] + i + {{u * V}}) - k[{{r}}], inv_n, &m{{r}}_{{u}}, &q{{r}}_{{u}});
@   end)
        }
@   lanes(function(r, u)
        merge(&n[{{r}}], &mu[{{r}}], &m2[{{r}}], count, m{{r}}_{{u}}, q{{r}}_{{u}});
@   end)
    }
@   if tail then
    for (int64_t i = nstep; i < H; ++i) {
@     rows(function(r)
        {
            const double v = (double)(x[{{r}}][i] - k[{{r}}]), d = v - mu[{{r}}];
            n[{{r}}] += 1.0;
            mu[{{r}}] += d / n[{{r}}];
            m2[{{r}}] += d * (v - mu[{{r}}]);
        }
@     end)
    }
@   end
@   rows(function(r)
    mean[{{r}}] = (float)(k[{{r}}] + mu[{{r}}]);
    rstd[{{r}}] = (float)(1.0 / __builtin_sqrt(m2[{{r}}] / (double)H + (double)eps));
@   end)
}
@ elseif wide then
/* {{LN and "Mean and" or "Mean square and"}} 1/sqrt(... + eps) of {{R}} row(s), accumulated in double lanes. */
static void row_stats(const float *const x[{{R}}], int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}])
{
    const int64_t nstep = H / STEP * STEP;
@   if LN then
    double k[{{R}}];
@     rows(function(r)
    k[{{r}}] = (double)x[{{r}}][0];
@     end)
@   end
@   lanes(function(r, u)
    vd s{{r}}_{{u}} = {0}{{LN and (", q" .. r .. "_" .. u .. " = {0}") or ""}};
@   end)
    int64_t i = 0;
    for (; i < nstep; i += STEP) {
@   lanes(function(r, u)
@     if V > 1 then
        {
            const vd v = __builtin_convertvector(load(x[{{r}}] + i + {{u * V}}), vd){{LN and (" - k[" .. r .. "]") or ""}};
@     else
        {
            const vd v = (double)x[{{r}}][i + {{u}}]{{LN and (" - k[" .. r .. "]") or ""}};
@     end
@     if LN then
            s{{r}}_{{u}} += v;
            q{{r}}_{{u}} += v * v;
@     else
            s{{r}}_{{u}} += v * v;
@     end
        }
@   end)
    }
@   rows(function(r)
@     local s, q = {}, {}
@     for u = 0, A - 1 do s[#s + 1] = "s" .. r .. "_" .. u; q[#q + 1] = "q" .. r .. "_" .. u end
    const vd sum{{r}} = {{ table.concat(s, " + ") }};
    double s{{r}} = hsum_wide(&sum{{r}});
@     if LN then
    const vd sumsq{{r}} = {{ table.concat(q, " + ") }};
    double q{{r}} = hsum_wide(&sumsq{{r}});
@     end
@   end)
@   if tail then
    for (; i < H; ++i) {
@   rows(function(r)
@     if LN then
        {
            const double v = (double)x[{{r}}][i] - k[{{r}}];
            s{{r}} += v;
            q{{r}} += v * v;
        }
@     else
        s{{r}} += (double)x[{{r}}][i] * (double)x[{{r}}][i];
@     end
@   end)
    }
@   end
@   rows(function(r)
@     if LN then
    {
        const double m = s{{r}} / (double)H, var = q{{r}} / (double)H - m * m;
        mean[{{r}}] = (float)(k[{{r}}] + m);
        rstd[{{r}}] = (float)(1.0 / __builtin_sqrt((var < 0.0 ? 0.0 : var) + (double)eps));
    }
@     else
    mean[{{r}}] = 0.0f;
    rstd[{{r}}] = (float)(1.0 / __builtin_sqrt(s{{r}} / (double)H + (double)eps));
@     end
@   end)
}
@ else
@   reduction("sum_squares", "s[r] += sum of x[r][i]^2.", "",
@             function(r, o) return "square(" .. at(r, o) .. ")" end,
@             function(r) return "x[" .. r .. "][i] * x[" .. r .. "][i]" end)
/* 1/sqrt(mean square + eps) of {{R}} row(s); mean is 0 for RMSNorm. */
static void row_stats(const float *const x[{{R}}], int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}])
{
    double s[{{R}}] = {0};
    sum_squares(x, H, s);
    for (int r = 0; r < {{R}}; ++r) {
        mean[r] = 0.0f;
        rstd[r] = (float)(1.0 / __builtin_sqrt(s[r] / (double)H + (double)eps));
    }
}
@ end
@
@ -- Emits a function writing one output row: expr(v, o) is the output vector for input vector
@ -- v at offset o, scalar the output for element i. next is the row to prefetch.
@ local function normalize(name, comment, expr, scalar)
/* {{comment}} */
static void {{name}}(const float *x, float *y, const float *gamma, const float *beta,
{{string.rep(" ", #name + 13)}}float mean, float rstd, int64_t H, const float *next)
{
    (void)gamma, (void)beta, (void)mean, (void)next;
    int64_t i = 0;
@   if nt then
    /* Non-temporal stores need aligned addresses: peel scalars until y is aligned. */
    for (; i < H && ((uintptr_t)(y + i) & {{V * 4 - 1}}) != 0; ++i) y[i] = {{ scalar }};
    for (; i + STEP <= H; i += STEP) {
@     if p.prefetch == 1 then
@       for o = 0, math.max(V * A * 4, 64) - 1, 64 do
        __builtin_prefetch(next + i + {{o // 4}}, 0, 2);
@       end
@     end
@     for u = 0, A - 1 do
        stream(y + i + {{u * V}}, {{ expr("load(x + i + " .. u * V .. ")", "i + " .. u * V) }});
@     end
    }
@   else
    for (; i + STEP <= H; i += STEP) {
@     if p.prefetch == 1 then
@       for o = 0, math.max(V * A * 4, 64) - 1, 64 do
        __builtin_prefetch(next + i + {{o // 4}}, 0, 2);
@       end
@     end
@     for u = 0, A - 1 do
        store(y + i + {{u * V}}, {{ expr("load(x + i + " .. u * V .. ")", "i + " .. u * V) }});
@     end
    }
@   end
@   if tail or nt then
    for (; i < H; ++i) y[i] = {{ scalar }};
@   end
}

@ end
@ local center = LN and "(%s - mean)" or "%s"
@ local function out(v, g, b)
@   local e = string.format(center, v) .. " * rstd"
@   if g then e = e .. " * " .. g end
@   if b then e = e .. " + " .. b end
@   return e
@ end
@ local function vec(name) return function(o) return "load(" .. name .. " + " .. o .. ")" end end
@ local G, B = vec("gamma"), vec("beta")
@ if p.affine == "fused" then
@   if LN then
@     normalize("normalize_gamma_beta", "y = (x - mean) * rstd * gamma + beta",
@               function(v, o) return out(v, G(o), B(o)) end, out("x[i]", "gamma[i]", "beta[i]"))
@   end
@   normalize("normalize_gamma", "y = " .. string.format(center, "x") .. " * rstd * gamma",
@             function(v, o) return out(v, G(o)) end, out("x[i]", "gamma[i]"))
@ else
@   normalize("normalize_plain", "y = " .. string.format(center, "x") .. " * rstd",
@             function(v) return out(v) end, out("x[i]"))
@ end
@ local normalize_row = p.affine == "none" and "normalize_plain"
@   or LN and "beta ? normalize_gamma_beta : normalize_gamma" or "normalize_gamma"
typedef void normalize_fn(const float *x, float *y, const float *gamma, const float *beta,
                          float mean, float rstd, int64_t H, const float *next);
int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
@ if fixed_H then
    const int64_t H = {{fixed_H}};
    if (a->H != H)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ else
    const int64_t H = a->H;
@ end
    if (a->residual || a->residual_out)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ if p.affine == "fused" then
    if (!a->gamma)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ else
    if (a->gamma || a->beta)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ end
@ if not LN then
    if (a->beta)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ end
    const float *x = (const float *)a->x;
    float *y = (float *)a->y;
    const float *gamma = (const float *)a->gamma, *beta = (const float *)a->beta;
    normalize_fn *const normalize = {{normalize_row}};
    int64_t r = row_begin;
@ if R > 1 then
    for (; r + {{R}} <= row_end; r += {{R}}) {
        const float *rows[{{R}}];
        float mean[{{R}}], rstd[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rows[j] = x + (r + j) * a->x_stride;
        row_stats(rows, H, a->eps, mean, rstd);
        for (int j = 0; j < {{R}}; ++j) {
            /* the same row of the next group: its reads overlap this group's stores */
            const float *next = r + j + {{R}} < row_end ? rows[j] + {{R}} * a->x_stride : rows[j];
            normalize(rows[j], y + (r + j) * a->y_stride, gamma, beta, mean[j], rstd[j], H, next);
            if (a->mean) a->mean[r + j] = mean[j];
            if (a->rstd) a->rstd[r + j] = rstd[j];
        }
    }
    /* Rows left over go one at a time through a group that repeats the same row. */
    for (; r < row_end; ++r) {
        const float *row = x + r * a->x_stride;
        const float *rows[{{R}}];
        float mean[{{R}}], rstd[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rows[j] = row;
        row_stats(rows, H, a->eps, mean, rstd);
        normalize(row, y + r * a->y_stride, gamma, beta, mean[0], rstd[0], H, row);
        if (a->mean) a->mean[r] = mean[0];
        if (a->rstd) a->rstd[r] = rstd[0];
    }
@ else
    for (; r < row_end; ++r) {
        const float *row = x + r * a->x_stride;
        const float *next = r + 1 < row_end ? row + a->x_stride : row;
        float mean, rstd;
        row_stats(&row, H, a->eps, &mean, &rstd);
        normalize(row, y + r * a->y_stride, gamma, beta, mean, rstd, H, next);
        if (a->mean) a->mean[r] = mean;
        if (a->rstd) a->rstd[r] = rstd;
    }
@ end
@ if nt then
    __builtin_ia32_sfence(); /* order the non-temporal stores before the caller's next access */
@ end
    return LNTUNE_KERNEL_OK;
}
]==],
    }
end

return M
