-- templates/cuda/norm_backward.lua - CUDA LayerNorm and RMSNorm backward: dx, and dgamma (and
-- dbeta for LayerNorm) summed over rows in fp32. x, dy and dx share one type (shape.types.x:
-- f32, f16, bf16); gamma, dgamma and dbeta another (shape.types.params); statistics are fp32.
-- With shape.generic_types the two types are cuda/convert.lua's pseudo-types x_t and p_t,
-- chosen when the source is compiled (-DLNTUNE_X_T=lntune_bf16 -DLNTUNE_P_T=float): the
-- runtime's built-in backward (gen/template/builtin.c), one source per op and fusion, which
-- runtime/cuda_dispatch.c launches by the ABI below. Not tuned on a GPU yet.
--
-- Shared by cuda/layernorm_backward.lua and cuda/rmsnorm_backward.lua. The parameter space
-- below is the whole list of knobs: C code reads it, never repeats it. host.sm is the target's
-- compute capability.
--
-- Per row, as templates/cpu/norm_backward.lua: xhat = (x - mean) * rstd (RMSNorm x * rstd),
-- g = dy * gamma (gamma NULL: ones); mean(g) and mean(g * xhat) are summed in fp32 chunks of at
-- most CHUNK packs flushed into double, reduced across threads in double (the forward's scheme);
-- dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) in fp32 (RMSNorm without the mean(g) term),
-- rounded once to dx's type. Without saved statistics (LayerNorm: mean and rstd both given;
-- RMSNorm: rstd) they are recomputed from x as the forward's stats=twopass (LayerNorm) and sumsq
-- (RMSNorm) variants compute them. dgamma += dy * xhat and dbeta += dy, per column, in fp32.
--
-- Fused residual (shape.fusion = "residual", as templates/cpu/norm_backward.lua: the forward
-- was y = Norm(s), s = x + residual, and the caller gives dresidual_out, the gradient at
-- residual_out = s, in x's type): dx = the norm's gradient + dresidual_out, added in fp32 before
-- dx's one rounding. Each element of dresidual_out is read just before dx's element at the same
-- index is written, so dx may be dresidual_out's buffer. A fused kernel given no dresidual_out,
-- or an unfused one given one, writes nothing: the host launches only matching calls.
--
-- Layouts (as cuda/norm.lua): warp: tpr threads per row, block/tpr rows per block, shuffles
-- only; block: a block per row, x and dy cached between passes in registers (fixed H) or shared
-- memory; uncached: a block per row re-reading x and dy. Packs of up to 16 bytes when every
-- pointer, stride and H allow, else a scalar path (re-reading, like the forward's).
--
-- dgamma/dbeta (knob dgamma). Thread t of a row group always owns the same columns (t * V +
-- k * T * V .. + V - 1), whatever the row, so no two threads of a group touch one column.
--   atomic:   fp32 atomicAdd into dgamma_ws / dbeta_ws (H floats each, zeroed by the host
--             before the launch), per row, or once per thread at the end with cache=regs (the
--             thread's rows summed in registers first). Order of the adds, and so the last bits,
--             vary from run to run.
--   partials: row group p = blockIdx.x * RPB + threadIdx.x / T owns row p of dgamma_ws /
--             dbeta_ws (parts x H floats each, parts = grid * RPB); its threads zero their
--             columns and add their rows' terms in row order (cache=regs: sum in registers,
--             one store at the end). Every element is written: no zeroing by the host. The
--             same grid gives the same bits every run.
-- Then {{symbol}}_dgamma sums the parts of each column in part order in fp32 (atomic: parts=1,
-- a conversion) and writes dgamma / dbeta in the params type; it is lntune_backward_reduce's
-- order, so with the same parts the CPU and GPU second passes agree bit for bit.
--
-- Kernel ABI (both extern "C", in one module):
--   {{symbol}}(lntune_backward_kernel_args a, float *dgamma_ws, float *dbeta_ws)
--       a: by value, device pointers (include/lntune_kernel_backward.h); a.gamma may be NULL.
--       dgamma_ws NULL: no dgamma; dbeta_ws NULL: no dbeta (RMSNorm never touches dbeta_ws).
--       Workspaces 16-byte aligned (cuMemAlloc's are), else the scalar path runs.
--   {{symbol}}_dgamma(const float *dgamma_ws, const float *dbeta_ws, int64_t parts, int64_t H,
--                     void *dgamma, void *dbeta)
--       parts >= 1; dgamma (dbeta) written iff its workspace is non-NULL; no launch when neither is.
-- Launch. properties() returns what the host needs; the source repeats it in two lines:
--   // lntune-cuda-launch: block=B rows_per_block=R cluster=1 smem=S smem_per_h=E max_h=M
--   // lntune-cuda-backward: dgamma=D max_grid=G parts_per_block=R finish_block=F
-- The first is the forward's (core/cuda/cuda_launch.h parses it): kernel 1 runs on
-- grid = min(ceil(rows / R), G) blocks of B threads (any fewer is also correct: the kernels
-- stride over rows; for D=partials it sets parts = grid * R, which the host must use for the
-- workspace and pass to kernel 2), with S + E * (ceil(H / 4) * 4) bytes of dynamic shared
-- memory; the host refuses H > M when M > 0, and H != fixed_h when fixed_h > 0. Kernel 2 runs
-- on ceil(H / F) blocks of F threads (any fewer is also correct), no shared memory.
-- G bounds the partials' workspace (G * R <= MAX_PARTS rows of H floats); a host may launch
-- fewer blocks to bound it further, deterministically in rows and H so that runs repeat.
-- Dynamic shared memory above 48 KiB needs cuFuncSetAttribute, as the forward's launcher does.
--
-- Checked without a GPU (tests/test_cuda_compile_backward.c): NVRTC compiles a sample covering
-- every knob value and type tuple, both entry points exist, atomics appear only with
-- dgamma=atomic, and the launch lines parse. On a GPU the same test runs each sample through
-- the backward verifier (gen/verify/verify_backward.c) behind gen/verify/cuda_check_backward.c: dx, dgamma,
-- dbeta against the float64 reference at H = 1, 3, 17, 768, 4097 and fixed H, contiguous,
-- misaligned by one element (the scalar path) and strided; statistics saved and recomputed;
-- gamma NULL; dresidual_out when fused; the launch line's grid and half of it (the stride
-- loops); guard zones around dx, both workspaces and both outputs; every case run twice (dx, and
-- with partials dgamma/dbeta, bit for bit the same); dgamma/dbeta equal to
-- lntune_backward_reduce of the downloaded workspace, which is NaN-poisoned (every partial
-- written). Not checked there: cache=smem at its max_h (the sample's H stop at 4097).

local M = {}

local cv = lntune.import("cuda/convert.lua")
local layout = lntune.import("cuda/layout.lua")

local max_smem = layout.max_smem -- by compute capability

-- Floats a thread may hold per cached array with cache=regs: x, dy and (dgamma, dbeta) sums
-- make four arrays, so a quarter of the forward's register budgets (128 warp, 64 block).
local WARP_MAX_REGS = 32
local BLOCK_MAX_REGS = 16
local WARP_MAX_LOOP = 1024   -- with a known H, warp-layout threads loop over at most this many
local MAX_PARTS = 2048       -- partials: row groups (workspace rows) at most
local MAX_THREADS = 262144   -- partials: threads at most (an H200 holds 270336 at once)
local FINISH_BLOCK = 256
local GRID_ANY = 2147483647  -- atomic: any grid (core/cuda/cuda_launch.c caps at INT32_MAX)

local ceil_div = layout.ceil_div
local function slice(H) return ceil_div(H, 4) * 4 end -- floats per cached row, 16-byte multiple

local ALL_F32 = { x = "f32", y = "f32", params = "f32" }

-- What the host needs to launch a variant (see "Launch" above).
local function launch(p, host)
    local rpb = p.layout == "warp" and p.block // p.tpr or 1
    local smem_per_h = p.cache == "smem" and 8 or 0 -- x and dy, widened to fp32
    local max_grid = GRID_ANY
    if p.dgamma == "partials" then
        max_grid = math.max(1, math.min(MAX_PARTS // rpb, MAX_THREADS // p.block))
    end
    return {
        block = p.block,
        rows_per_block = rpb,
        cluster = 1,
        smem = 0,
        smem_per_h = smem_per_h,
        max_h = (smem_per_h > 0 and p.h ~= "fixed") and max_smem(host.sm or 0) // smem_per_h or 0,
        dgamma = p.dgamma,
        max_grid = max_grid,
        parts_per_block = rpb,
        finish_block = FINISH_BLOCK,
    }
end

-- Named variants C code asks for (lntune_gen_preset):
--   builtin: the runtime's built-in (gen/template/builtin.c): a block per row re-reading x and
--     dy, any H; dgamma and dbeta from per-row-group fp32 partials summed in order, so every run
--     gives the same bits.
--   naive: the tuner's baseline for its speed-up, the same with scalar accesses.
local function preset(pack)
    return {
        layout = "uncached", tpr = 32, block = 256, pack = pack, cache = "none", h = "runtime",
        dgamma = "partials",
    }
end

function M.family(op)
    local layernorm = op == "layernorm_backward"
    return lntune.family { op = op, target = "cuda",
        params = {
            { name = "layout", values = { "warp", "block", "uncached" },
              doc = "warp: tpr threads per row; block: block per row, x and dy cached; uncached: "
                  .. "block per row, re-read" },
            { name = "tpr", values = { 32, 16, 8, 4, 2, 1 }, doc = "threads per row (layout=warp; else 32)" },
            { name = "block", values = { 128, 256, 512, 1024 }, doc = "threads per block (warp: <= 256)" },
            { name = "pack", values = { 4, 2, 1 },
              doc = "elements per load/store when pointers, strides and H allow (else scalar)" },
            { name = "cache", values = { "regs", "smem", "none" },
              doc = "where x and dy stay between passes: registers (fixed H), shared memory, or nowhere" },
            {
                name = "h",
                values = function(_, shape) return shape.H and { "runtime", "fixed" } or { "runtime" } end,
                doc = "H read at run time, or fixed when the source is generated",
            },
            { name = "dgamma", values = { "partials", "atomic" },
              doc = "partials: fp32 sums per row group, reduced in order by a second kernel; "
                  .. "atomic: fp32 atomicAdd into one row, converted by a second kernel" },
        },
        presets = { builtin = preset(4), naive = preset(1) },
        valid = function(p, host, shape)
            if shape.fusion and shape.fusion ~= "residual" then
                return false, "the backward fuses only \"residual\" (dresidual_out given)"
            end
            local sm = host.sm or 0
            local H = shape.H
            local fixed = p.h == "fixed"
            if fixed and not H then return false, "h=fixed needs a shape with H" end
            if p.layout ~= "warp" and p.tpr ~= 32 then return false, "tpr is for layout=warp" end
            if fixed and p.cache ~= "regs" then return false, "fixed H pays off with a register cache" end
            if p.layout == "warp" then return layout.warp_valid(p, H, fixed, WARP_MAX_REGS, WARP_MAX_LOOP) end
            if H and p.block > 128 and p.block * p.pack > H then return false, "more threads than columns" end
            if p.layout == "uncached" then return p.cache == "none", "uncached re-reads x and dy" end
            if p.cache == "none" then return false, "layout=uncached is the block layout without a cache" end
            if p.cache == "regs" then
                if not fixed then return false, "a register cache needs fixed H" end
                if ceil_div(H, p.block) > BLOCK_MAX_REGS then return false, "row too long for registers" end
                return true
            end
            if H and 8 * slice(H) > max_smem(sm) then return false, "row too long for shared memory" end
            return true
        end,
        derive = function(p, host, shape)
            local warp = p.layout == "warp"
            local fixed_H = p.h == "fixed" and shape.H or false
            -- generic_types: x_t and p_t, macros chosen at compile time (the runtime's built-in)
            local types = shape.generic_types and cv.GENERIC or shape.types or ALL_F32
            return {
                types = types,
                fused = shape.fusion == "residual",
                XT = cv.CTYPE[types.x],
                PT = cv.CTYPE[types.params],
                cv = cv,
                layernorm = layernorm,
                LAYOUT = p.layout,
                T = warp and p.tpr or p.block,
                RPB = warp and p.block // p.tpr or 1,
                BLOCK = p.block,
                P = p.pack,
                fixed_H = fixed_H,
                SLICE = fixed_H and slice(fixed_H) or false,
                launch = launch(p, host),
                -- The backward ABI comes from the global gen/template/generator.c sets (engine.lua's text
                -- is part of every forward template hash); NVRTC has no stdint.h.
                backward_abi = (lntune_backward_abi_header:gsub('#include "lntune_kernel.h"\n', "")
                    :gsub("#include <stdint.h>\n", "")),
            }
        end,
        properties = function(p, host, shape)
            local props = launch(p, host)
            props.threads = 1
            props.affine = "fused" -- gamma optional at run time
            props.fixed_h = p.h == "fixed" and shape.H or 0
            return props
        end,
        source = lntune.template [==[
@ local LN = layernorm
@ local fixed = fixed_H ~= false
@ local atomic = p.dgamma == "atomic"
@ local CHUNK_PACKS = 4 -- packs per unrolled chunk of a loop over a row: loads in flight
@ local function X(e) return string.format(cv.widen[types.x], e) end
// lntune-cuda-launch: block={{launch.block}} rows_per_block={{launch.rows_per_block}} cluster=1 smem={{launch.smem}} smem_per_h={{launch.smem_per_h}} max_h={{launch.max_h}}
// lntune-cuda-backward: dgamma={{launch.dgamma}} max_grid={{launch.max_grid}} parts_per_block={{launch.parts_per_block}} finish_block={{launch.finish_block}}
/* NVRTC has no standard headers without an include path: the few types the ABI needs. */
#ifdef __CUDACC_RTC__
typedef long int64_t;
typedef unsigned long uint64_t;
typedef unsigned long uintptr_t;
#else
#include <cstdint>
#endif
{{ backward_abi }}
#ifndef LN_INLINE
#define LN_INLINE __device__ __forceinline__
#endif

/* Every file-scope name of this kernel lives in a namespace of its own, so that many kernels
 * share one translation unit; the extern "C" entry points keep their names. */
namespace {{symbol}}_impl {

/* Threads per row group, row groups per block, threads per block, widest pack. */
enum { T = {{T}}, RPB = {{RPB}}, BLOCK = {{BLOCK}}, P = {{P}}, CHUNK = {{CHUNK_PACKS}}, FINISH_BLOCK = {{launch.finish_block}} };
static_assert(T * RPB == BLOCK, "row groups fill the block");

/* x, dy, dx: {{types.x}}; gamma, dgamma, dbeta: {{types.params}}. */
{{ cv.device_functions({ types.x, types.params }) }}
{{ cv.loader("load_x", types.x) }}
{{ cv.storer("store_dx", types.x) }}
{{ cv.loader("load_p", types.params) }}

template <int V> LN_INLINE packf<V> ones()
{
    packf<V> q;
#pragma unroll
    for (int e = 0; e < V; ++e) q.v[e] = 1.0f;
    return q;
}
@ if LAYOUT ~= "warp" then

enum { WARPS = BLOCK / 32 };
__shared__ double red_slots[2][WARPS]; /* one warp total per slot, for block reductions */
@ end
@ if p.cache == "smem" then
extern __shared__ __attribute__((aligned(16))) float dyn_smem[];
@ end

/* Sums a and b over the T lanes of a row group (every lane gets the same totals). */
LN_INLINE void group_sum2(double &a, double &b)
{
@ if LAYOUT == "warp" then
    for (int o = T / 2; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
@ else
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    __syncthreads(); /* the previous readers of red_slots are done */
    if ((threadIdx.x & 31) == 0) {
        red_slots[0][threadIdx.x >> 5] = a;
        red_slots[1][threadIdx.x >> 5] = b;
    }
    __syncthreads();
    a = b = 0.0;
    for (int w = 0; w < WARPS; ++w) {
        a += red_slots[0][w];
        b += red_slots[1][w];
    }
@ end
}

/* One sum over the row group, for the recomputed statistics. */
LN_INLINE double group_sum(double v)
{
    double unused = 0.0;
    group_sum2(v, unused);
    return v;
}
@
@ -- Emits a loop over this thread's packs of the row [0, hi): pre once per fp32 chunk, body per
@ -- pack, post after each chunk. The body sees qx (x, fp32) and, unless from == "x", qd (dy),
@ -- i (the pack's first column) and, with the register cache, j (the pack's slot).
@ -- from: "x" reads x from global memory (statistics); "fill" reads x and dy from global memory
@ -- and fills the cache; "cache" reads them back from the cache (global memory with none).
@ local function sweep(cache, from, pre, body, post)
@   local function fetch()
@     if from == "x" then
            const packf<V> qx = load_x<V>(xr + i);
@     elseif cache == "regs" then
@       if from == "fill" then
            cx[j] = load_x<V>(xr + i);
            cd[j] = load_x<V>(dyr + i);
@       end
            const packf<V> qx = cx[j], qd = cd[j];
@     elseif cache == "smem" then
@       if from == "fill" then
            const packf<V> qx = load_x<V>(xr + i), qd = load_x<V>(dyr + i);
            store<V>(sx + i, qx);
            store<V>(sd + i, qd);
@       else
            const packf<V> qx = load<V>(sx + i), qd = load<V>(sd + i);
@       end
@     else
            const packf<V> qx = load_x<V>(xr + i), qd = load_x<V>(dyr + i);
@     end
@   end
@   if cache == "regs" then
    /* The cached packs in chunks too: no fp32 chain longer than CHUNK packs. */
#pragma unroll
    for (int c0 = 0; c0 < NPACKS; c0 += CHUNK) {
        {{pre}}
#pragma unroll
        for (int j = c0; j < c0 + CHUNK && j < NPACKS; ++j) {
            const int64_t i = ((int64_t)j * T + t) * V;
            if (i >= hi) break;
@     fetch()
            {{body}}
        }
        {{post}}
    }
@   else
    for (int64_t i0 = (int64_t)t * V; i0 < hi; i0 += (int64_t)CHUNK * T * V) {
        {{pre}}
#pragma unroll
        for (int c = 0; c < CHUNK; ++c) {
            const int64_t i = i0 + (int64_t)c * T * V;
            if (i >= hi) break;
@     fetch()
            {{body}}
        }
        {{post}}
    }
@   end
@ end
@
@ -- Emits fn_name: this kernel's rows with V-element accesses, x and dy kept in cache.
@ local function emit_run(fn_name, V, cache)
@ local regs = cache == "regs"
@ local xh = LN and "(qx.v[e] - mean) * rstd" or "qx.v[e] * rstd"

/* The rows of this kernel, {{V}} element(s) per access, x and dy cached: {{cache}}. */
LN_INLINE void {{fn_name}}(const lntune_backward_kernel_args &a, float *const wg, float *const wb)
{
    enum { V = {{V}} };
    const {{XT}} *const x = (const {{XT}} *)a.x;
    const {{XT}} *const dy = (const {{XT}} *)a.dy;
    {{XT}} *const dx = ({{XT}} *)a.dx;
@ if fused then
    const {{XT}} *const dres = (const {{XT}} *)a.dresidual_out;
@ end
    const {{PT}} *const gamma = (const {{PT}} *)a.gamma;
@ if fixed then
    const int64_t H = {{fixed_H}};
@ else
    const int64_t H = a.H;
@ end
    const bool saved = {{LN and "a.mean && a.rstd" or "a.rstd != 0"}};
@ if LAYOUT == "warp" then
    const int t = threadIdx.x % T;
    const int64_t part = (int64_t)blockIdx.x * RPB + threadIdx.x / T;
@ else
    const int t = threadIdx.x;
    const int64_t part = blockIdx.x;
@ end
@ if atomic then
    /* One shared row each, zeroed by the host; atomics make the adds of all threads safe. */
    (void)part;
    float *const pg = wg;
    float *const pb = wb;
@ else
    /* This row group's own rows of the workspaces: no other group writes there. */
    float *const pg = wg ? wg + part * H : nullptr;
    float *const pb = wb ? wb + part * H : nullptr;
@ end
@ if not LN then
    (void)pb; /* RMSNorm has no dbeta */
@ end
@ if regs then
    constexpr int NPACKS = ({{SLICE}} + T * V - 1) / (T * V);
    /* This thread's dgamma (dbeta) terms over all its rows, stored once at the end. */
    packf<V> ag[NPACKS], ab[NPACKS];
#pragma unroll
    for (int j = 0; j < NPACKS; ++j) ag[j] = ab[j] = packf<V>{};
    bool any = false;
@ elseif not atomic then
    /* Zero the columns this thread owns (its own writes only: no barrier needed). */
    for (int64_t i = (int64_t)t * V; i < H; i += (int64_t)T * V) {
        if (pg) store<V>(pg + i, packf<V>{});
@   if LN then
        if (pb) store<V>(pb + i, packf<V>{});
@   end
    }
@ end
@ if cache == "smem" then
    /* x, then dy, widened to fp32; each thread reads back only the columns it wrote. */
    float *const sx = dyn_smem;
    float *const sd = dyn_smem + (H + 3) / 4 * 4;
@ end
@ if LAYOUT == "warp" then
    for (int64_t r0 = (int64_t)blockIdx.x * RPB; r0 < a.rows; r0 += (int64_t)gridDim.x * RPB) {
        /* The whole block iterates together, so every lane reaches every shuffle. */
        const int64_t row = r0 + threadIdx.x / T;
        const bool active = row < a.rows;
        const int64_t hi = active ? H : 0;
@ else
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const bool active = true;
        const int64_t hi = H;
@ end
        const {{XT}} *const xr = x + row * a.x_stride;
        const {{XT}} *const dyr = dy + row * a.dy_stride;
        {{XT}} *const dxr = dx + row * a.dx_stride;
@ if fused then
        const {{XT}} *const drr = dres + row * a.dresidual_out_stride;
@ end
@ if regs then
        packf<V> cx[NPACKS], cd[NPACKS];
        any |= active;
@ end
@ if LN then
        float mean = 0.0f, rstd = 0.0f;
@ else
        float rstd = 0.0f;
@ end
        if (saved) {
            if (active) {
@ if LN then
                mean = a.mean[row];
@ end
                rstd = a.rstd[row];
            }
        } else { /* the forward's statistics ({{LN and "stats=twopass" or "sumsq"}}); x re-read later */
@ if LN then
            const float k = active ? {{X("xr[0]")}} : 0.0f; /* the shift: the row's first element */
            double s = 0.0;
@   sweep(cache, "x", "float acc = 0.0f;", "for (int e = 0; e < V; ++e) acc += qx.v[e] - k;", "s += acc;")
            s = group_sum(s);
            mean = (float)((double)k + s / (double)H);
            double ss = 0.0;
@   sweep(cache, "x", "float acc = 0.0f;", "for (int e = 0; e < V; ++e) { const float d = qx.v[e] - mean; acc += d * d; }", "ss += acc;")
            ss = group_sum(ss);
            rstd = (float)(1.0 / __dsqrt_rn(ss / (double)H + (double)a.eps));
@ else
            double s = 0.0;
@   sweep(cache, "x", "float acc = 0.0f;", "for (int e = 0; e < V; ++e) acc += qx.v[e] * qx.v[e];", "s += acc;")
            s = group_sum(s);
            rstd = (float)(1.0 / __dsqrt_rn(s / (double)H + (double)a.eps));
@ end
        }
        /* sum g and sum g * xhat, fp32 per chunk, then double. */
        double sg = 0.0, sq = 0.0;
@ sweep(cache, "fill", "float acc_g = 0.0f, acc_q = 0.0f;",
@       "const packf<V> gm = gamma ? load_p<V>(gamma + i) : ones<V>(); for (int e = 0; e < V; ++e) { const float g = qd.v[e] * gm.v[e]; acc_g += g; acc_q += g * (" .. xh .. "); }",
@       "sg += acc_g; sq += acc_q;")
        group_sum2(sg, sq);
        const float mg = {{LN and "(float)(sg / (double)H)" or "0.0f"}};
        const float mq = (float)(sq / (double)H);
        (void)mg;
@ local terms
@ if regs then
@   terms = "for (int e = 0; e < V; ++e) { ag[j].v[e] += tg.v[e]; ab[j].v[e] += qd.v[e]; }"
@ elseif atomic then
@   terms = "if (pg) for (int e = 0; e < V; ++e) atomicAdd(pg + i + e, tg.v[e]); "
@   if LN then terms = terms .. "if (pb) for (int e = 0; e < V; ++e) atomicAdd(pb + i + e, qd.v[e]);" end
@ else
@   terms = "if (pg) { packf<V> s = load<V>(pg + i); for (int e = 0; e < V; ++e) s.v[e] += tg.v[e]; store<V>(pg + i, s); } "
@   if LN then terms = terms .. "if (pb) { packf<V> s = load<V>(pb + i); for (int e = 0; e < V; ++e) s.v[e] += qd.v[e]; store<V>(pb + i, s); }" end
@ end
        /* dx, and this row's dgamma (dy * xhat){{LN and " and dbeta (dy)" or ""}} terms. */
@ sweep(cache, "cache", "",
@       "const packf<V> gm = gamma ? load_p<V>(gamma + i) : ones<V>(); " .. (fused and "const packf<V> qr = load_x<V>(drr + i); " or "") .. "packf<V> o, tg; for (int e = 0; e < V; ++e) { const float xh = " .. xh .. "; const float g = qd.v[e] * gm.v[e]; o.v[e] = rstd * (g - mg - xh * mq)" .. (fused and " + qr.v[e]" or "") .. "; tg.v[e] = qd.v[e] * xh; } store_dx<V>(dxr + i, o); " .. terms,
@       "")
    }
@ if regs then
@   -- the register sums out: dgamma's (pg, ag), and LayerNorm's dbeta (pb, ab)
@   for _, out in ipairs(LN and { { "pg", "ag" }, { "pb", "ab" } } or { { "pg", "ag" } }) do
    if ({{out[1]}}) {
#pragma unroll
        for (int j = 0; j < NPACKS; ++j) {
            const int64_t i = ((int64_t)j * T + t) * V;
            if (i >= H) break;
@     if atomic then
            if (any)
                for (int e = 0; e < V; ++e) atomicAdd({{out[1]}} + i + e, {{out[2]}}[j].v[e]);
@     else
            store<V>({{out[1]}} + i, {{out[2]}}[j]);
@     end
        }
    }
@   end
@   if not LN then
    (void)ab;
@   end
@ end
}
@ end
@ if P > 1 then
@   emit_run("run_packed", P, p.cache)
@   -- Misaligned pointers or odd strides are rare: scalar accesses re-reading x and dy keep them
@   -- correct without a second copy of the cached code.
@   emit_run("run_scalar", 1, "none")
@ else
@   emit_run("run_packed", 1, p.cache)
@ end

/* Vector accesses need every row start, gamma and the workspaces aligned to P elements. */
LN_INLINE bool packs_fit(const lntune_backward_kernel_args &a, const float *wg, const float *wb)
{
    const bool aligned = ((uintptr_t)a.x | (uintptr_t)a.dy | (uintptr_t)a.dx) % ({{cv.SIZE[types.x]}} * P) == 0 &&
                         (uintptr_t)a.gamma % ({{cv.SIZE[types.params]}} * P) == 0 &&
                         ((uintptr_t)wg | (uintptr_t)wb) % (4 * P) == 0;
@ if fused then
    if ((uintptr_t)a.dresidual_out % ({{cv.SIZE[types.x]}} * P) != 0 || a.dresidual_out_stride % P != 0) return false;
@ end
    return P > 1 && aligned && a.H % P == 0 && a.x_stride % P == 0 && a.dy_stride % P == 0 && a.dx_stride % P == 0;
}

/* dx of the rows; dgamma{{LN and "/dbeta" or ""}} terms into the workspaces ({{p.dgamma}}). */
extern "C" __global__ void __launch_bounds__(BLOCK) {{symbol}}(lntune_backward_kernel_args a, float *dgamma_ws, float *dbeta_ws)
{
@ if fixed then
    if (a.H != {{fixed_H}}) return; /* the host checks fixed_h before launching */
@ end
@ if fused then
    if (!a.dresidual_out) return; /* dx adds dresidual_out: a call without it is not this kernel's (the host checks) */
@ else
    if (a.dresidual_out) return; /* a dresidual_out this kernel would ignore: not its call (the host checks) */
@ end
@ if not LN then
    dbeta_ws = nullptr; /* RMSNorm: no dbeta, whatever the host passed */
@ end
@ if P > 1 then
    if (packs_fit(a, dgamma_ws, dbeta_ws))
        run_packed(a, dgamma_ws, dbeta_ws);
    else
        run_scalar(a, dgamma_ws, dbeta_ws);
@ else
    run_packed(a, dgamma_ws, dbeta_ws);
@ end
}

/* The second pass: the parts of each column summed in part order in fp32, stored as {{types.params}}. */
extern "C" __global__ void __launch_bounds__(FINISH_BLOCK) {{symbol}}_dgamma(const float *dgamma_ws, const float *dbeta_ws, int64_t parts, int64_t H, void *dgamma, void *dbeta)
{
@ if not LN then
    (void)dbeta_ws, (void)dbeta;
@ end
    for (int64_t j = (int64_t)blockIdx.x * FINISH_BLOCK + threadIdx.x; j < H; j += (int64_t)gridDim.x * FINISH_BLOCK) {
        if (dgamma_ws) {
            float s = dgamma_ws[j];
            for (int64_t q = 1; q < parts; ++q) s += dgamma_ws[q * H + j];
            (({{PT}} *)dgamma)[j] = {{string.format(cv.narrow[types.params], "s")}};
        }
@ if LN then
        if (dbeta_ws) {
            float s = dbeta_ws[j];
            for (int64_t q = 1; q < parts; ++q) s += dbeta_ws[q * H + j];
            (({{PT}} *)dbeta)[j] = {{string.format(cv.narrow[types.params], "s")}};
        }
@ end
    }
}

} // namespace {{symbol}}_impl
]==],
    }
end

return M
