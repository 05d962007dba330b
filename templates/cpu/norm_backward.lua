-- templates/cpu/norm_backward.lua - CPU LayerNorm and RMSNorm backward: dx, and the rows'
-- dgamma/dbeta contributions added into the caller's fp32 partials (lntune_kernel_backward.h).
-- x, dy and dx share one type (f32, f16, bf16: shape.types.x); gamma and the partials' final
-- type is shape.types.params.
--
-- Shared by cpu/layernorm_backward.lua and cpu/rmsnorm_backward.lua. Knobs go from the simplest
-- value to the most elaborate, as in cpu/norm.lua (the first of each is the naive baseline).
--
-- Per row: xhat = (x - mean) * rstd (RMSNorm x * rstd), g = dy * gamma; one pass sums g and
-- g * xhat (fp32 lanes flushed into double every BLOCK, as the forward sums) and adds dy * xhat
-- and dy into the partials; a second pass writes dx = rstd * (g - mean(g) - xhat * mean(g xhat))
-- in fp32, rounded once to dx's type. Without saved statistics mean and rstd are recomputed with
-- the forward's two-pass (LayerNorm) or blocked (RMSNorm) sums. rows > 1 handles a group of rows
-- column by column, adding the group's dgamma/dbeta terms in registers before they touch the
-- partials: the second reduction strategy (fewer partial reads and writes, another fp32 order).
--
-- Fused residual (shape.fusion = "residual": the forward was y = Norm(s), s = x + residual, and
-- the caller gives dresidual_out, the gradient at residual_out = s): dx = the norm's gradient +
-- dresidual_out, added in fp32 before dx's one rounding; dx is then the gradient of s, so of x
-- and of residual alike. Each element of dresidual_out is read just before dx's element at the
-- same index is written, so dx may be dresidual_out's buffer. Without fusion the code is what
-- it was before the fusion existed, plus the refusal of a dresidual_out it would ignore.

local M = {}

local cpu = lntune.import("cpu/host.lua")
local cv = lntune.import("cpu/convert.lua")

local FILE_SCOPE_NAMES = {
    "vf", "LANES", "STEP", "BLOCK", "xt", "pt", "load_x", "load_p", "store_dx", "stream_dx",
    "load_f", "store_f", "row_stats", "sum_rows", "grad_gamma", "grad_plain", "grad1_gamma",
    "grad1_plain", "grad_fn", "narrow_f", "narrow_dx",
}
for _, n in ipairs(cv.names) do FILE_SCOPE_NAMES[#FILE_SCOPE_NAMES + 1] = n end

-- The built-in backward kernels' knob values (gen/template/builtin.c), per instruction-set
-- level: the forward built-ins' heuristic (4-lane portable vectors, or 8 for AVX2; 2
-- accumulators), one row at a time, plain stores; the streaming level is AVX2's (dx is stored
-- plainly: the streaming copies are the forward's).
local function builtin_preset(vec)
    return { vec = vec, acc = 2, rows = 1, h = "runtime", store = "plain", threads = 1 }
end

function M.family(op)
    local layernorm = op == "layernorm_backward"
    return lntune.family { op = op, target = "cpu",
        file_scope_names = FILE_SCOPE_NAMES,
        params = {
            { name = "vec", values = cpu.vector_widths, doc = "floats per SIMD vector" },
            { name = "acc", values = { 1, 2, 4 }, doc = "independent accumulators (unroll)" },
            {
                name = "rows",
                values = { 1, 2, 4 },
                doc = "rows whose dgamma/dbeta terms are summed in registers before the partials",
            },
            {
                name = "h",
                values = function(_, shape) return shape.H and { "runtime", "fixed" } or { "runtime" } end,
                doc = "H read at run time, or fixed when the source is generated",
            },
            { name = "store", values = { "plain", "nt" }, doc = "plain or non-temporal stores of dx" },
            { name = "threads", values = cpu.thread_counts, launch = true, doc = "threads across rows" },
        },
        -- Named variants C code asks for (lntune_gen_preset); see builtin_preset above.
        presets = {
            builtin = builtin_preset(4),
            builtin_avx2 = builtin_preset(8),
            builtin_avx2_streaming = builtin_preset(8),
        },
        valid = function(p, host, shape)
            local types = shape.types or { x = "f32", params = "f32" }
            if p.store == "nt" then
                local nt = cpu.stream[p.vec]
                if types.x ~= "f32" or not (nt and host.isa[nt.isa]) then
                    return false, "non-temporal stores need fp32 dx in 16-byte vectors on x86"
                end
            end
            if p.h == "fixed" and not shape.H then return false, "h=fixed needs a shape with H" end
            if shape.rows and p.threads > 1 and p.threads > shape.rows then
                return false, "more threads than rows"
            end
            if shape.rows and p.rows > 1 and p.rows > shape.rows then
                return false, "a row group larger than the rows"
            end
            if shape.fusion and shape.fusion ~= "residual" then
                return false, "the backward fuses only \"residual\" (dresidual_out given)"
            end
            return true
        end,
        derive = function(p, _, shape)
            local types = shape.types or { x = "f32", y = "f32", params = "f32" }
            return {
                types = types,
                XT = cv.CTYPE[types.x],
                PT = cv.CTYPE[types.params],
                layernorm = layernorm,
                V = p.vec,
                A = p.acc,
                R = p.rows,
                fixed_H = p.h == "fixed" and shape.H or false,
                nt = p.store == "nt" and cpu.stream[p.vec] or false,
                tail = not (p.h == "fixed" and shape.H % (p.vec * p.acc) == 0),
                fused = shape.fusion == "residual",
                -- engine.lua is left unchanged (its text is part of every forward template hash),
                -- so the backward ABI comes from the global gen/template/generator.c sets.
                backward_abi = (lntune_backward_abi_header:gsub('#include "lntune_kernel.h"\n', "")),
                cv = cv,
            }
        end,
        properties = function(p, _, shape)
            return { threads = p.threads, affine = "fused", fixed_h = p.h == "fixed" and shape.H or 0 }
        end,
        source = lntune.template [==[
@ local LN = layernorm
{{ lntune.abi_header() }}
{{ backward_abi }}
@ if V > 1 then
typedef float vf __attribute__((vector_size({{V * 4}})));
@ else
typedef float vf;
@ end

/* {{V}} lanes, {{A}} accumulators, {{R}} row(s) a group; fp32 sums flushed to double every BLOCK. */
enum { LANES = {{V}}, STEP = {{V * A}}, BLOCK = {{V * A * 64}} };
typedef {{XT}} xt; /* x, dy, dx: {{types.x}} */
typedef {{PT}} pt; /* gamma: {{types.params}} */
{{ cv.scalar_functions({ types.x, types.params }, V) }}
{{ cv.loader("load_x", types.x, "xt", V) }}
{{ cv.loader("load_p", types.params, "pt", V) }}
{{ cv.loader("load_f", "f32", "float", V) }}
{{ cv.narrower("narrow_f", "f32", "float", V) }}
{{ cv.storer("store_f", "f32", "float", V, "narrow_f") }}
{{ cv.narrower("narrow_dx", types.x, "xt", V) }}
{{ cv.storer("store_dx", types.x, "xt", V, "narrow_dx") }}
@ local function X(e) return string.format(cv.widen[types.x], e) end
@ local function P(e) return string.format(cv.widen[types.params], e) end
@ local function DX(e) return string.format(cv.narrow[types.x], e) end
@ if nt then

/* A non-temporal store of an aligned vector. */
static inline void stream_dx(xt *p, vf v)
{
#if defined(__clang__)
    __builtin_nontemporal_store(v, (vf *)p);
#else
    {{nt.gcc}}(p, v);
#endif
}
@ end

{{ cv.hsum(V) }}

/* *s += sum over i of x[i] - k and *q of its square, in fp32 lanes flushed to double per BLOCK. */
static void sum_rows(const xt *x, int64_t H, float k, double *s, double *q)
{
    const int64_t nstep = H / STEP * STEP;
    int64_t i = 0;
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@ for u = 0, A - 1 do
        vf a{{u}} = {0}, q{{u}} = {0};
@ end
        for (i = b; i < e; i += STEP) {
@ for u = 0, A - 1 do
            {
                const vf d = load_x(x + i + {{u * V}}) - k;
                a{{u}} += d;
                q{{u}} += d * d;
            }
@ end
        }
@ local sum, sq = {}, {}
@ for u = 0, A - 1 do sum[#sum + 1] = "a" .. u; sq[#sq + 1] = "q" .. u end
        *s += hsum({{ table.concat(sum, " + ") }});
        *q += hsum({{ table.concat(sq, " + ") }});
    }
@ if tail then
    for (i = nstep; i < H; ++i) {
        const float d = {{X("x[i]")}} - k;
        *s += d;
        *q += d * d;
    }
@ end
}

/* The forward's statistics: {{LN and "the corrected two passes (the shifted mean, then deviations from it)" or "the blocked mean square"}}. */
static void row_stats(const xt *x, int64_t H, float eps, float *mean, float *rstd)
{
    double s = 0.0, q = 0.0;
@ if LN then
    const float k = {{X("x[0]")}};
    sum_rows(x, H, k, &s, &q);
    const float m = (float)(k + s / (double)H);
    s = q = 0.0;
    sum_rows(x, H, m, &s, &q);
    const double c = s / (double)H, var = q / (double)H - c * c;
    *mean = (float)((double)m + c);
    *rstd = (float)(1.0 / __builtin_sqrt((var < 0.0 ? 0.0 : var) + (double)eps));
@ else
    sum_rows(x, H, 0.0f, &s, &q);
    *mean = 0.0f;
    *rstd = (float)(1.0 / __builtin_sqrt(q / (double)H + (double)eps));
@ end
}
@
@ -- Emits the gradient of a row group, with gamma (has_gamma) or with gamma = ones.
@ local function grad(name, has_gamma, G)
@   local function rows(body) for r = 0, G - 1 do body(r) end end
@   local function lanes(body) for r = 0, G - 1 do for u = 0, A - 1 do body(r, u) end end end
@   local function xh(r, e) return LN and ("(" .. e .. " - mean[" .. r .. "]) * rstd[" .. r .. "]") or (e .. " * rstd[" .. r .. "]") end
@   local function gv(d, o) return has_gamma and (d .. " * load_p(gamma + " .. o .. ")") or d end
@   local function gs(d) return has_gamma and (d .. " * " .. P("gamma[i]")) or d end
@   -- fused: + dresidual_out's element, in fp32 before the rounding (vector at j, or scalar)
@   local function rv(r) return fused and (" + load_x(dres[" .. r .. "] + j)") or "" end
@   local function rs(r) return fused and (" + " .. X("dres[" .. r .. "][j]")) or "" end

/* dx of {{G}} row(s){{has_gamma and "" or ", gamma = ones"}}; their dy * xhat{{LN and " and dy" or ""}} added to the partials. */
static void {{name}}(const xt *const x[{{G}}], const xt *const dy[{{G}}], xt *const dx[{{G}}],
@   if fused then
{{string.rep(" ", #name + 13)}}const xt *const dres[{{G}}],
@   end
{{string.rep(" ", #name + 13)}}const pt *gamma, const float mean[{{G}}], const float rstd[{{G}}],
{{string.rep(" ", #name + 13)}}int64_t H, float *dgamma, float *dbeta)
{
    (void)gamma, (void)mean, (void)dbeta;
    double sg[{{G}}] = {0}, sgx[{{G}}] = {0};
    const int64_t nstep = H / STEP * STEP;
    int64_t i = 0;
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@   lanes(function(r, u)
        vf g{{r}}_{{u}} = {0}, q{{r}}_{{u}} = {0};
@   end)
        for (i = b; i < e; i += STEP) {
@   for u = 0, A - 1 do
            {
                vf tg = {0}, tb = {0};
@     rows(function(r)
                {
                    const vf d = load_x(dy[{{r}}] + i + {{u * V}});
                    const vf xh = {{ xh(r, "load_x(x[" .. r .. "] + i + " .. u * V .. ")") }};
                    const vf g = {{ gv("d", "i + " .. u * V) }};
                    g{{r}}_{{u}} += g;
                    q{{r}}_{{u}} += g * xh;
                    tg += d * xh;
                    tb += d;
                }
@     end)
                if (dgamma) store_f(dgamma + i + {{u * V}}, load_f(dgamma + i + {{u * V}}) + tg);
@     if LN then
                if (dbeta) store_f(dbeta + i + {{u * V}}, load_f(dbeta + i + {{u * V}}) + tb);
@     else
                (void)tb;
@     end
            }
@   end
        }
@   rows(function(r)
@     local s, q = {}, {}
@     for u = 0, A - 1 do s[#s + 1] = "g" .. r .. "_" .. u; q[#q + 1] = "q" .. r .. "_" .. u end
        sg[{{r}}] += hsum({{ table.concat(s, " + ") }});
        sgx[{{r}}] += hsum({{ table.concat(q, " + ") }});
@   end)
    }
@   if tail then
    for (i = nstep; i < H; ++i) {
        float tg = 0.0f, tb = 0.0f;
@     rows(function(r)
        {
            const float d = {{X("dy[" .. r .. "][i]")}};
            const float xh = {{ xh(r, X("x[" .. r .. "][i]")) }};
            const float g = {{ gs("d") }};
            sg[{{r}}] += g;
            sgx[{{r}}] += g * xh;
            tg += d * xh;
            tb += d;
        }
@     end)
        if (dgamma) dgamma[i] += tg;
@     if LN then
        if (dbeta) dbeta[i] += tb;
@     else
        (void)tb;
@     end
    }
@   end
@   rows(function(r)
    {
        const float mg = {{LN and ("(float)(sg[" .. r .. "] / (double)H)") or "0.0f"}};
        const float mgx = (float)(sgx[{{r}}] / (double)H);
        (void)mg;
        int64_t j = 0;
@     if nt then
        /* Non-temporal stores need aligned addresses: peel scalars until dx is aligned. */
        for (; j < H && ((uintptr_t)(dx[{{r}}] + j) & {{V * 4 - 1}}) != 0; ++j) {
            const float xh = {{ xh(r, X("x[" .. r .. "][j]")) }};
            const float g = {{ has_gamma and (X("dy[" .. r .. "][j]") .. " * " .. P("gamma[j]")) or X("dy[" .. r .. "][j]") }};
            dx[{{r}}][j] = {{ DX("rstd[" .. r .. "] * (g - mg - xh * mgx)" .. rs(r)) }};
        }
@     end
        for (; j + {{V}} <= H; j += {{V}}) {
            const vf xh = {{ xh(r, "load_x(x[" .. r .. "] + j)") }};
            const vf g = {{ gv("load_x(dy[" .. r .. "] + j)", "j") }};
            {{nt and "stream_dx" or "store_dx"}}(dx[{{r}}] + j, rstd[{{r}}] * (g - mg - xh * mgx){{rv(r)}});
        }
        for (; j < H; ++j) {
            const float xh = {{ xh(r, X("x[" .. r .. "][j]")) }};
            const float g = {{ has_gamma and (X("dy[" .. r .. "][j]") .. " * " .. P("gamma[j]")) or X("dy[" .. r .. "][j]") }};
            dx[{{r}}][j] = {{ DX("rstd[" .. r .. "] * (g - mg - xh * mgx)" .. rs(r)) }};
        }
    }
@   end)
}
@ end
@ grad("grad_gamma", true, R)
@ grad("grad_plain", false, R)
@ if R > 1 then
@   grad("grad1_gamma", true, 1)
@   grad("grad1_plain", false, 1)
@ end

typedef void grad_fn(const xt *const x[{{R}}], const xt *const dy[{{R}}], xt *const dx[{{R}}],
@ if fused then
                     const xt *const dres[{{R}}],
@ end
                     const pt *gamma, const float mean[{{R}}], const float rstd[{{R}}], int64_t H,
                     float *dgamma, float *dbeta);

int {{symbol}}(const lntune_backward_kernel_args *a, int64_t row_begin, int64_t row_end,
{{string.rep(" ", #symbol + 5)}}float *dgamma, float *dbeta)
{
@ if fixed_H then
    const int64_t H = {{fixed_H}};
    if (a->H != H)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ else
    const int64_t H = a->H;
@ end
@ if not LN then
    if (dbeta)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ end
@ if fused then
    /* dx = the norm's gradient + dresidual_out: a call without it is an unfused kernel's */
    if (!a->dresidual_out)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    const xt *dres = (const xt *)a->dresidual_out;
@ else
    /* a dresidual_out this kernel would ignore is a fused kernel's call */
    if (a->dresidual_out)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ end
    const xt *x = (const xt *)a->x, *dy = (const xt *)a->dy;
    xt *dx = (xt *)a->dx;
    const pt *gamma = (const pt *)a->gamma;
    grad_fn *const grad = gamma ? grad_gamma : grad_plain;
    /* {{LN and "LayerNorm uses the saved statistics when both are given" or "RMSNorm needs only rstd"}}. */
    const int saved = {{LN and "a->mean && a->rstd" or "a->rstd != 0"}};
    for (int64_t r = row_begin; r < row_end; r += {{R}}) {
        const int n = row_end - r < {{R}} ? (int)(row_end - r) : {{R}};
        const xt *xr[{{R}}], *dyr[{{R}}];
        xt *dxr[{{R}}];
@ if fused then
        const xt *dresr[{{R}}];
@ end
        float mean[{{R}}], rstd[{{R}}];
        for (int j = 0; j < n; ++j) {
            const int64_t row = r + j;
            xr[j] = x + row * a->x_stride;
            dyr[j] = dy + row * a->dy_stride;
            dxr[j] = dx + row * a->dx_stride;
@ if fused then
            dresr[j] = dres + row * a->dresidual_out_stride;
@ end
            if (saved) {
                mean[j] = {{LN and "a->mean[row]" or "0.0f"}};
                rstd[j] = a->rstd[row];
            } else {
                row_stats(xr[j], H, a->eps, &mean[j], &rstd[j]);
            }
        }
@ if R > 1 then
        if (n < {{R}}) { /* the short last group, row by row */
            for (int j = 0; j < n; ++j)
                (gamma ? grad1_gamma : grad1_plain)(&xr[j], &dyr[j], &dxr[j], {{fused and "&dresr[j], " or ""}}gamma, &mean[j],
                                                    &rstd[j], H, dgamma, dbeta);
            break;
        }
@ end
        grad(xr, dyr, dxr, {{fused and "dresr, " or ""}}gamma, mean, rstd, H, dgamma, dbeta);
    }
@ if nt then
    __builtin_ia32_sfence();
@ end
    return LNTUNE_KERNEL_OK;
}
]==],
    }
end

return M
