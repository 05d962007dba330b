-- templates/cuda/norm.lua - CUDA LayerNorm and RMSNorm forward: x, y and gamma/beta each fp32,
-- fp16 or bf16 (shape.types; y also int8 or fp8 e4m3 codes), an fp32 data path with statistics
-- reduced in double.
--
-- Shared by cuda/layernorm.lua and cuda/rmsnorm.lua. The parameter space below is the whole list
-- of knobs: C code reads it, never repeats it. host.sm is the target's compute capability
-- (80, 90, ...), set by the caller with lntune_gen_set_cuda_arch.
--
-- Layouts. warp: a group of tpr threads (1..32) per row, block/tpr rows per block, reduced with
-- shuffles only. block: one block per row, the row cached in registers (fixed H) or shared
-- memory. uncached: one block per row, x read from global memory in every pass. cluster: a
-- thread-block cluster per row (sm_90), each block caching a slice in shared memory and the
-- partial statistics exchanged through distributed shared memory.
--
-- Numerics. LayerNorm shifts every row by its first element k, so fp32 sums stay of the order of
-- the deviations when the mean is large (1000 + randn), and a constant row has variance exactly 0.
-- A thread accumulates at most CHUNK elements in fp32 before adding them to a double, and the
-- reductions across threads and blocks run in double, so no long fp32 chain forms even with one
-- thread per row and H = 65536. A NaN or Inf anywhere in a LayerNorm row makes the row NaN, as in
-- PyTorch; RMSNorm gives x * 0 (NaN at the Inf) as its formula does. 16-bit inputs widen exactly
-- to fp32 (the row caches hold the widened floats); y is computed in fp32 and rounded once to its
-- type (round to nearest even, NaN stays a quiet NaN, overflow gives Inf), bit for bit as the CPU
-- template rounds.
--
-- Residual (shape.fusion = "residual" or "residual_out", residual and residual_out of type
-- types.residual): the row normalized is s = x + residual, each element one fp32 addition
-- (__fadd_rn: never contracted) of the exactly widened inputs, as the CPU template forms it. The
-- row caches hold s; uncached passes re-read x and residual and add again (the same bits). The
-- shift k is s's first element. The normalize pass, the last, also writes residual_out = s rounded
-- once to the residual type, each element by the thread that read it, after the reductions that
-- end every read of the row: residual_out may be residual itself. A fused kernel launched without
-- residual (or with residual_out for "residual", without it for "residual_out") writes nothing,
-- as with a fixed H that differs: the host matches the call to the variant before launching.
--
-- The residual ran on an H200 (bench/results/h200-mixed-2026-11-30.md); in place
-- (residual_out == residual) is refused by the runtime until a GPU has verified it.
--
-- Weight offset (shape.affine = "offset": Gemma's y = norm(x) * (offset + gamma), offset the
-- call's lntune_kernel_args.weight_offset): wherever gamma is read it reads gamma + offset, one
-- fp32 addition (__fadd_rn) of the exactly widened gamma, as the CPU template forms it.
--
-- Quantized y (types.y i8, i8row, e4m3 or e4m3row; core/quant.h has the exact semantics): the
-- fp32 y as above times qinv, then its code (convert.lua: int8 or OCP e4m3, saturating, ties to
-- even). Static scale: qinv = 1 / y_scale in fp32. A scale per row: a pass over the row (the
-- cache, or x again) takes the largest |y| of the same fp32 y (NaN left out: fmaxf), reduced
-- over the row group like the statistics; qinv = QMAX / absmax (0 where absmax is 0 or Inf),
-- and y_scales[row] = absmax / QMAX. A kernel launched without a valid static scale, or without
-- y_scales, writes nothing; the host checks before launching.
--
-- Weight offset and quantized y: no GPU has run them yet. tests/test_cuda_compile_quant.c puts
-- a sample (both ops, the four code types, three x/params tuples, the residual and the offset
-- taking turns, every knob value) through NVRTC for sm_90 and sm_80 and, on a GPU, through the
-- verifier there; tests/test_cuda_codes.sh checks the codes' device functions on the host
-- against core/quant.h. The CUDA tuner verifies every variant on the device before timing it
-- (gen/verify/cuda_check.c: y_scales between guard floats, one-byte poison). liblntune's
-- built-ins for them are the preset "builtin" with x, gamma/beta and residual left to macros
-- (shape.generic_types) and a quantized y kept as the shape gives it: one source per op, affine
-- kind, code type and fusion.

-- Launch. properties() returns what the host needs, and the source repeats it in one line
--   // lntune-cuda-launch: block=B rows_per_block=R cluster=C smem=S smem_per_h=E max_h=M
-- (the generator's C side reads only threads/affine/fixed_h/cflags for now). The host runs
-- ceil(rows / R) * C blocks of B threads (any fewer is also correct: the kernels stride over
-- rows), with S + E * slice bytes of dynamic shared memory, slice = ceil(ceil(H / C) / 4) * 4,
-- and refuses H > M when M > 0.

local M = {}

-- fp16/bf16 <-> fp32 conversions, packed accesses and type tables, shared with the backward.
local cv = lntune.import("cuda/convert.lua")
local layout = lntune.import("cuda/layout.lua")

local max_smem = layout.max_smem -- by compute capability

local WARP_MAX_REGS = 128  -- floats a warp-layout thread may cache (fixed H)
local BLOCK_MAX_REGS = 64  -- floats a block-layout thread may cache (fixed H)
local WARP_MAX_LOOP = 1024 -- with a known H, warp-layout threads loop over at most this many
local CLUSTER_MIN_H = 8192 -- clusters pay off only for very large rows

local ceil_div = layout.ceil_div

local CTYPE = cv.CTYPE -- C element type of each tensor type; 16-bit types travel as their bits
local ALL_F32 = { x = "f32", y = "f32", params = "f32" }

-- The element types a source is generated for: the shape's; with shape.generic_types the
-- pseudo-types of cv.GENERIC, chosen by macros when it is compiled, except a quantized y, which
-- shapes the kernel (its code, a scale per row) and so stays as given.
local function shape_types(shape)
    if not shape.generic_types then return shape.types or ALL_F32 end
    local y = (shape.types or {}).y
    if not cv.QUANT[y] then return cv.GENERIC end
    return { x = cv.GENERIC.x, y = y, params = cv.GENERIC.params, residual = cv.GENERIC.residual }
end

-- The row slice a block caches: H split over cluster blocks, rounded up to 4 floats so that
-- slices start 16-byte aligned. Must match the kernel's computation of S.
local function slice(H, cluster) return ceil_div(ceil_div(H, cluster), 4) * 4 end

-- What the host needs to launch a variant (see "Launch" above).
local function launch(p, host, shape)
    local smem_per_h = p.cache == "smem" and 4 or 0
    local runtime_smem = smem_per_h > 0 and p.h ~= "fixed"
    return {
        block = p.block,
        rows_per_block = p.layout == "warp" and p.block // p.tpr or 1,
        cluster = p.cluster,
        smem = 0,
        smem_per_h = smem_per_h,
        max_h = runtime_smem and (max_smem(host.sm or 0) // 4) * p.cluster or 0,
    }
end

-- Named variants C code asks for (lntune_gen_preset), each a function of the layout and pack:
--   builtin: lntune export's fallback and liblntune's built-in for any H
--     (gen/template/builtin.c): a 256-thread block per row re-reading x, 16-byte accesses where
--     aligned; any H, no shared memory, any compute capability.
--   builtin_warp: liblntune's built-in for short rows (up to 1024 floats), a warp per row:
--     measured on an H200 near the best with H read at run time.
--   naive: the tuner's baseline for its speed-up, the block per row with scalar accesses.
-- Statistics: LayerNorm's two passes, RMSNorm's sum of squares; affine as the call's.
local function preset(layernorm, layout, pack)
    return function(_, shape)
        return {
            layout = layout,
            tpr = 32,
            cluster = 1,
            block = 256,
            pack = pack,
            cache = "none",
            stats = layernorm and "twopass" or "sumsq",
            h = "runtime",
            affine = shape.affine or "fused",
        }
    end
end

function M.family(op)
    local layernorm = op == "layernorm"
    return lntune.family { op = op, target = "cuda",
        params = {
            { name = "layout", values = { "warp", "block", "uncached", "cluster" },
              doc = "warp: tpr threads per row; block: block per row, cached; uncached: block per row, "
                  .. "x re-read; cluster: cluster per row (sm_90)" },
            { name = "tpr", values = { 32, 16, 8, 4, 2, 1 }, doc = "threads per row (layout=warp; else 32)" },
            { name = "cluster", values = { 1, 2, 4, 8 }, doc = "blocks per row (layout=cluster; else 1)" },
            { name = "block", values = { 128, 256, 512, 1024 }, doc = "threads per block (warp: <= 256)" },
            -- 8 only for fp16/bf16 x or y (their 16-byte accesses), listed last so that ties keep
            -- going to the packs that fp32 shares.
            { name = "pack", values = { 4, 2, 1, 8 },
              doc = "elements per load/store when pointers, strides and H allow (else scalar); "
                  .. "8: fp16/bf16 x or y" },
            { name = "cache", values = { "regs", "smem", "none" },
              doc = "where a row stays between passes: registers (fixed H), shared memory, or nowhere" },
            { name = "stats", values = layernorm and { "twopass", "welford" } or { "sumsq" },
              doc = layernorm and "twopass: shifted sum, then squared deviations; welford: per-lane "
                  .. "Welford merged with Chan's formula" or "sum of squares" },
            {
                name = "h",
                values = function(_, shape) return shape.H and { "runtime", "fixed" } or { "runtime" } end,
                doc = "H read at run time, or fixed when the source is generated",
            },
            {
                name = "affine",
                -- offset only for calls with a weight offset (shape.affine), which take nothing
                -- else: a kernel without it would compute another y
                values = function(_, shape)
                    return shape.affine == "offset" and { "offset" } or { "fused", "none" }
                end,
                doc = "gamma (and beta) in the normalize pass, or none; offset: gamma + the call's "
                    .. "weight_offset (Gemma)",
            },
        },
        presets = {
            builtin = preset(layernorm, "uncached", 4),
            builtin_warp = preset(layernorm, "warp", 4),
            naive = preset(layernorm, "uncached", 1),
        },
        valid = function(p, host, shape)
            local sm = host.sm or 0
            local H = shape.H
            local fixed = p.h == "fixed"
            if fixed and not H then return false, "h=fixed needs a shape with H" end
            local y = (shape.types or {}).y
            if y and not CTYPE[y] then return false, "unknown y type " .. y end
            if p.layout ~= "warp" and p.tpr ~= 32 then return false, "tpr is for layout=warp" end
            if (p.layout == "cluster") ~= (p.cluster > 1) then return false, "cluster > 1 is layout=cluster" end
            if p.pack == 8 then
                local types = shape_types(shape)
                if types.x == "f32" and (types.y == "f32" or cv.QUANT[types.y]) then
                    return false, "fp32 x moves 16 bytes at pack=4"
                end
                if p.layout == "cluster" then return false, "cluster slices are 16-byte aligned for pack=4" end
            end
            if fixed and p.cache ~= "regs" and p.layout ~= "cluster" then
                return false, "fixed H pays off with a register cache (or cluster slices)"
            end
            if p.layout == "warp" then return layout.warp_valid(p, H, fixed, WARP_MAX_REGS, WARP_MAX_LOOP) end
            if H and p.block > 128 and p.block * p.pack > H * p.cluster then
                return false, "more threads than columns"
            end
            if p.layout == "uncached" then
                return p.cache == "none", "uncached re-reads x"
            end
            if p.layout == "block" then
                if p.cache == "none" then return false, "layout=uncached is the block layout without a cache" end
                if p.cache == "regs" then
                    if not fixed then return false, "a register cache needs fixed H" end
                    if ceil_div(H, p.block) > BLOCK_MAX_REGS then return false, "row too long for registers" end
                    return true
                end
                if H and 4 * slice(H, 1) > max_smem(sm) then return false, "row too long for shared memory" end
                return true
            end
            -- cluster
            if sm < 90 then return false, "thread-block clusters need sm_90" end
            if p.cache ~= "smem" then return false, "cluster blocks cache their slice in shared memory" end
            if p.pack ~= 4 then return false, "rows long enough for clusters use 16-byte accesses" end
            if H then
                if H < CLUSTER_MIN_H then return false, "clusters are for H >= " .. CLUSTER_MIN_H end
                if 4 * slice(H, p.cluster) > max_smem(sm) then return false, "slice too long for shared memory" end
            end
            return true
        end,
        derive = function(p, host, shape)
            local warp = p.layout == "warp"
            local fixed_H = p.h == "fixed" and shape.H or false
            local types = shape_types(shape)
            return {
                cv = cv,
                types = types,
                XT = CTYPE[types.x],
                YT = CTYPE[types.y],
                PT = CTYPE[types.params],
                layernorm = layernorm,
                LAYOUT = p.layout,
                T = warp and p.tpr or p.block, -- threads per row (per block for clusters)
                RPB = warp and p.block // p.tpr or 1,
                CL = p.cluster,
                BLOCK = p.block,
                P = p.pack,
                fixed_H = fixed_H,
                SLICE = fixed_H and slice(fixed_H, p.cluster) or false,
                -- Residual add: false, or the residual's C type, and whether residual_out is written.
                fusion = shape.fusion or false,
                RT = shape.fusion and CTYPE[types.residual or types.x] or false,
                res_out = shape.fusion == "residual_out",
                -- A quantized y (convert.lua's QUANT: { code, row, max }), or false.
                quant = cv.QUANT[types.y] or false,
                launch = launch(p, host, shape),
            }
        end,
        properties = function(p, host, shape)
            local props = launch(p, host, shape)
            props.threads = 1
            props.affine = p.affine
            props.fixed_h = p.h == "fixed" and shape.H or 0
            return props
        end,
        source = lntune.template [==[
@ local LN = layernorm
@ local fixed = fixed_H ~= false
@ local cache = p.cache
@ local CHUNK_PACKS = 4 -- packs per unrolled chunk of a loop over a row: loads in flight
@ local typed = types.x ~= "f32" or types.y ~= "f32" or types.params ~= "f32"
@ if fusion and types.residual ~= "f32" then typed = true end
@ -- Accesses of x, gamma/beta (widened to packf) and y (narrowed from packf); fp32 moves as is.
@ local LX = types.x == "f32" and "load" or "load_x"
@ local LP = types.params == "f32" and "load" or "load_p"
@ local SY = types.y == "f32" and "store" or "store_y"
@ -- residual (widened to packf) and residual_out (narrowed from packf).
@ local LR = fusion and (types.residual == "f32" and "load" or "load_r")
@ local SR = fusion and (types.residual == "f32" and "store" or "store_r")
@ local widen = cv.widen
@ local ofs = p.affine == "offset" -- gamma + the call's weight offset wherever gamma is read
// lntune-cuda-launch: block={{launch.block}} rows_per_block={{launch.rows_per_block}} cluster={{launch.cluster}} smem={{launch.smem}} smem_per_h={{launch.smem_per_h}} max_h={{launch.max_h}}
/* NVRTC has no standard headers without an include path: the few types the ABI needs. nvcc
 * (lntune export's file of many kernels) has them. */
#ifdef __CUDACC_RTC__
typedef long int64_t;
typedef unsigned long uint64_t;
typedef unsigned long uintptr_t;
#else
#include <cstdint>
#endif
{{ (lntune.abi_header():gsub("#include <stdint.h>\n", "")) }}
#ifndef LN_INLINE
#define LN_INLINE __device__ __forceinline__
#endif

/* Every file-scope name of this kernel lives in a namespace of its own, so that many kernels
 * share one translation unit (lntune export); the extern "C" entry point keeps its name. */
namespace {{symbol}}_impl {

/* Threads per row group, rows per block, blocks per row, threads per block, widest pack. */
enum { T = {{T}}, RPB = {{RPB}}, CL = {{CL}}, BLOCK = {{BLOCK}}, P = {{P}}, CHUNK = {{CHUNK_PACKS}} };
static_assert(T * RPB == BLOCK, "row groups fill the block");
@ if quant and quant.row then
constexpr float QMAX = {{quant.max}}; /* the largest code's value */
@ end

@ if typed then
/* x: {{types.x}}, y: {{types.y}}, gamma/beta: {{types.params}}{{fusion and (", residual: " .. types.residual) or ""}}. 16-bit types travel as
 * their bits, converted by cuda/convert.lua's functions: no CUDA header needed (NVRTC's include
 * path is optional), and the bits of y (and residual_out) are the CPU template's. */
@ end
{{ cv.device_functions({ types.x, types.y, types.params, fusion and types.residual or nil }) }}
@ -- 16-bit tensors get typed accesses; fp32 ones use load and store directly.
@ if types.x ~= "f32" then
{{ cv.loader("load_x", types.x) }}
@ end
@ if types.params ~= "f32" then
{{ cv.loader("load_p", types.params) }}
@ end
@ if types.y ~= "f32" then
{{ cv.storer("store_y", types.y) }}
@ end
@ if fusion and types.residual ~= "f32" then
{{ cv.loader("load_r", types.residual) }}
{{ cv.storer("store_r", types.residual) }}
@ end
@ if fusion then

/* The row normalized: x + residual, one fp32 addition per element (never contracted into an fma). */
template <int V> LN_INLINE packf<V> add(const packf<V> &a, const packf<V> &b)
{
    packf<V> s;
#pragma unroll
    for (int e = 0; e < V; ++e) s.v[e] = __fadd_rn(a.v[e], b.v[e]);
    return s;
}
@ end

/* Chan et al.: merges (nb, mb, m2b) into the running Welford state (n, mu, m2). */
LN_INLINE void chan_merge(double &n, double &mu, double &m2, double nb, double mb, double m2b)
{
    if (nb == 0.0) return;
    const double total = n + nb, d = mb - mu;
    mu += d * (nb / total);
    m2 += m2b + d * d * (n * nb / total);
    n = total;
}
@ if LAYOUT ~= "warp" then

enum { WARPS = BLOCK / 32 };
__shared__ double red_slots[3][WARPS]; /* one warp total per slot, for block reductions */
@ end
@ if LAYOUT == "cluster" then
__shared__ double cluster_part[3]; /* this block's statistics, read by the other blocks */
extern __shared__ __attribute__((aligned(16))) float dyn_smem[];

LN_INLINE unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

LN_INLINE unsigned cluster_id()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}

LN_INLINE unsigned cluster_count()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
    return r;
}

/* Every thread of every block in the cluster; orders shared memory writes before reads. */
LN_INLINE void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

/* Reads a double at the same shared memory offset as p in block rank of the cluster. */
LN_INLINE double cluster_load(const double *p, unsigned rank)
{
    unsigned local, remote;
    double v;
    asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(local) : "l"(p));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(remote) : "memory");
    return v;
}
@ elseif cache == "smem" then
extern __shared__ __attribute__((aligned(16))) float dyn_smem[];
@ end

@ -- Emits name(v, slot): v combined over the T lanes of a row group, every lane getting the
@ -- result: shuffles, then (block layouts) one value per warp in red_slots[slot], then (clusters)
@ -- one per block in cluster_part[slot]. combine(a, b) is the C expression of the operation,
@ -- zero its identity; each stage combines in the same fixed order, so every row gets the same
@ -- bits whatever the rows around it.
@ local function group_reduction(name, ctype, combine, zero)
LN_INLINE {{ctype}} {{name}}({{ctype}} v, int slot)
{
@   if LAYOUT == "warp" then
    (void)slot;
    for (int o = T / 2; o > 0; o >>= 1) v = {{combine("v", "__shfl_xor_sync(0xffffffffu, v, o)")}};
    return v;
@   else
    for (int o = 16; o > 0; o >>= 1) v = {{combine("v", "__shfl_xor_sync(0xffffffffu, v, o)")}};
    __syncthreads(); /* the previous reader of red_slots is done */
    if ((threadIdx.x & 31) == 0) red_slots[slot][threadIdx.x >> 5] = v;
    __syncthreads();
    {{ctype}} s = {{zero}};
    for (int w = 0; w < WARPS; ++w) s = {{combine("s", "(" .. ctype .. ")red_slots[slot][w]")}};
@     if LAYOUT == "cluster" then
    if (threadIdx.x == 0) cluster_part[slot] = s;
    cluster_sync();
    s = {{zero}};
    for (unsigned r = 0; r < CL; ++r) s = {{combine("s", "(" .. ctype .. ")cluster_load(&cluster_part[slot], r)")}};
    cluster_sync(); /* no block moves on (or exits) while another reads its part */
@     end
    return s;
@   end
}
@ end

/* Sums v over the T lanes of a row group (every lane gets the same total). */
@ group_reduction("group_sum", "double", function(a, b) return a .. " + " .. b end, "0.0")
@ if quant and quant.row then

/* The largest v over the T lanes of a row group (every lane gets it). fmaxf takes the number
 * where one operand is NaN: a NaN y counts for nothing, as core/quant.h's absmax leaves it out. */
@   group_reduction("group_max", "float", function(a, b) return "fmaxf(" .. a .. ", " .. b .. ")" end, "0.0f")
@ end
@ if LN and p.stats == "welford" then

/* Merges Welford states over the row group; every lane gets the state of lane 0's order. */
LN_INLINE void group_welford(double &n, double &mu, double &m2)
{
@   if LAYOUT == "warp" then
    for (int o = T / 2; o > 0; o >>= 1) {
        const double nb = __shfl_xor_sync(0xffffffffu, n, o);
        const double mb = __shfl_xor_sync(0xffffffffu, mu, o);
        const double qb = __shfl_xor_sync(0xffffffffu, m2, o);
        chan_merge(n, mu, m2, nb, mb, qb);
    }
    /* Chan's merge is not symmetric in its operands: take one lane's result for all. */
    n = __shfl_sync(0xffffffffu, n, 0, T);
    mu = __shfl_sync(0xffffffffu, mu, 0, T);
    m2 = __shfl_sync(0xffffffffu, m2, 0, T);
@   else
    for (int o = 16; o > 0; o >>= 1) {
        const double nb = __shfl_xor_sync(0xffffffffu, n, o);
        const double mb = __shfl_xor_sync(0xffffffffu, mu, o);
        const double qb = __shfl_xor_sync(0xffffffffu, m2, o);
        chan_merge(n, mu, m2, nb, mb, qb);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
        red_slots[0][threadIdx.x >> 5] = n;
        red_slots[1][threadIdx.x >> 5] = mu;
        red_slots[2][threadIdx.x >> 5] = m2;
    }
    __syncthreads();
    n = mu = m2 = 0.0;
    for (int w = 0; w < WARPS; ++w) chan_merge(n, mu, m2, red_slots[0][w], red_slots[1][w], red_slots[2][w]);
@     if LAYOUT == "cluster" then
    if (threadIdx.x == 0) {
        cluster_part[0] = n;
        cluster_part[1] = mu;
        cluster_part[2] = m2;
    }
    cluster_sync();
    n = mu = m2 = 0.0;
    for (unsigned r = 0; r < CL; ++r)
        chan_merge(n, mu, m2, cluster_load(&cluster_part[0], r), cluster_load(&cluster_part[1], r),
                   cluster_load(&cluster_part[2], r));
    cluster_sync();
@     end
@   end
}
@ end
@
@ -- Emits a loop over this thread's packs of the row slice [lo, hi): pre once per fp32 chunk,
@ -- body per pack (with q: the pack's V values, i: its first column, ord: its 1-based place in
@ -- the chunk, a constant once unrolled), post after each chunk.
@ -- first: the pass that reads x from global memory and fills the cache.
@ local function sweep(first, pre, body, post)
@   -- The row's V elements at i read from global memory: x, or the sum x + residual.
@   local ROW = LX .. "<V>(xr + i)"
@   if fusion then ROW = "add<V>(" .. ROW .. ", " .. LR .. "<V>(rr + i))" end
@   local function fetch()
@     if cache == "regs" then
@       if first then
            cached[j] = {{ROW}};
@       end
            const packf<V> q = cached[j];
@     elseif cache == "smem" then
@       if first then
            const packf<V> q = {{ROW}};
            store<V>(srow + (i - lo), q);
@       else
            const packf<V> q = load<V>(srow + (i - lo));
@       end
@     else
            const packf<V> q = {{ROW}};
@     end
@   end
@   if cache == "regs" then
    /* The cached packs in chunks too: no fp32 chain longer than CHUNK packs. */
#pragma unroll
    for (int c0 = 0; c0 < NPACKS; c0 += CHUNK) {
        {{pre}}
#pragma unroll
        for (int j = c0; j < c0 + CHUNK && j < NPACKS; ++j) {
            const int64_t i = lo + ((int64_t)j * T + t) * V;
            const int ord = j - c0 + 1;
            (void)ord;
            if (i >= hi) break;
@     fetch()
            {{body}}
        }
        {{post}}
    }
@   else
    for (int64_t i0 = lo + (int64_t)t * V; i0 < hi; i0 += (int64_t)CHUNK * T * V) {
        {{pre}}
#pragma unroll
        for (int c = 0; c < CHUNK; ++c) {
            const int64_t i = i0 + (int64_t)c * T * V;
            const int ord = c + 1;
            (void)ord;
            if (i >= hi) break;
@     fetch()
            {{body}}
        }
        {{post}}
    }
@   end
@ end
@
@ -- The loads of gamma/beta and the fp32 y of element e of a pack, (loads, expression): the one
@ -- formula of the normalize pass and of a quantized y's absmax pass (the same bits in both).
@ local function y_of(g, b)
@   local e = LN and "(q.v[e] - mean) * rstd" or "q.v[e] * rstd"
@   local pre_load = ""
@   if g then pre_load = pre_load .. "const packf<V> g = " .. LP .. "<V>(gamma + i); " end
@   -- fmaf(z, g, 0) rounds like z * g, so a missing beta is a zero pack, not a second loop.
@   if b then pre_load = pre_load .. "const packf<V> b = beta ? " .. LP .. "<V>(beta + i) : packf<V>{}; " end
@   -- the weight offset: one fp32 addition to the exactly widened gamma (Gemma's 1 + w.float())
@   local gv = ofs and "__fadd_rn(g.v[e], wofs)" or "g.v[e]"
@   if g and b then e = "fmaf(" .. e .. ", " .. gv .. ", b.v[e])" elseif g then e = e .. " * " .. gv end
@   return pre_load, e
@ end
@
@ -- A quantized y with a scale per row: its largest |y|, then qinv = QMAX / absmax (0 where that
@ -- is 0 or Inf) and the row's scale absmax / QMAX, as core/quant.h has them.
@ local function row_scale(g, b)
@   local loads, e = y_of(g, b)
        float amax = 0.0f;
@   sweep(false, "", loads .. "for (int e = 0; e < V; ++e) amax = fmaxf(amax, fabsf(" .. e .. "));", "")
        amax = group_max(amax, 2);
        const float qinv = amax > 0.0f ? __fdiv_rn(QMAX, amax) : 0.0f;
@   if LAYOUT == "cluster" then
        if (active && t == 0 && rank == 0) a.y_scales[row] = __fdiv_rn(amax, QMAX);
@   else
        if (active && t == 0) a.y_scales[row] = __fdiv_rn(amax, QMAX);
@   end
@ end
@
@ local function normalize(g, b)
@   local pre_load, e = y_of(g, b)
@   -- a quantized y: the codes of y times qinv, the fp32 reciprocal of the scale
@   if quant then e = "(" .. e .. ") * qinv" end
@   local keep = res_out and (" " .. SR .. "<V>(ror + i, q);") or "" -- residual_out = s
@   sweep(false, "", pre_load .. "packf<V> o; for (int e = 0; e < V; ++e) o.v[e] = " .. e .. "; " .. SY .. "<V>(yr + i, o);" .. keep, "")
@ end

@ -- Emits fn_name: this kernel's rows with V-float accesses, the row kept in cache_mode.
@ local function emit_run(fn_name, V, cache_mode)
@ cache = cache_mode
/* The rows of this kernel, {{V}} {{typed and "element" or "float"}}(s) per access, row cache: {{cache}}. */
LN_INLINE void {{fn_name}}(const lntune_kernel_args &a)
{
    enum { V = {{V}} };
    const {{XT}} *const x = (const {{XT}} *)a.x;
    {{YT}} *const y = ({{YT}} *)a.y;
    const {{PT}} *const gamma = (const {{PT}} *)a.gamma;
    const {{PT}} *const beta = (const {{PT}} *)a.beta;
    (void)gamma, (void)beta;
@ if fusion then
    const {{RT}} *const res = (const {{RT}} *)a.residual;
@   if res_out then
    {{RT}} *const res_out = ({{RT}} *)a.residual_out;
@   end
@ end
@ if fixed then
    const int64_t H = {{fixed_H}};
@ else
    const int64_t H = a.H;
@ end
@ if ofs then
    const float wofs = a.weight_offset;
@ end
@ if quant and not quant.row then
    /* the codes of y / y_scale, as y times its fp32 reciprocal (core/quant.h) */
    const float qinv = __fdiv_rn(1.0f, a.y_scale);
@ end
@ if LAYOUT == "warp" then
    const int t = threadIdx.x % T;
    for (int64_t r0 = (int64_t)blockIdx.x * RPB; r0 < a.rows; r0 += (int64_t)gridDim.x * RPB) {
        /* The whole block iterates together, so every lane reaches every shuffle. */
        const int64_t row = r0 + threadIdx.x / T;
        const bool active = row < a.rows;
        const int64_t lo = 0, hi = active ? H : 0;
@ elseif LAYOUT == "cluster" then
    const int t = threadIdx.x;
    const unsigned rank = cluster_rank();
    /* A slice per block, a multiple of 4 floats (see slice() in the template). */
    const int64_t S = ((H + CL - 1) / CL + 3) / 4 * 4;
    const int64_t lo = (int64_t)rank * S < H ? (int64_t)rank * S : H;
    const int64_t hi = lo + S < H ? lo + S : H;
    float *const srow = dyn_smem;
    (void)srow; /* unused by the scalar fallback, which re-reads x */
    for (int64_t row = cluster_id(); row < a.rows; row += cluster_count()) {
        const bool active = true;
@ else
    const int t = threadIdx.x;
    const int64_t lo = 0, hi = H;
@   if cache == "smem" then
    float *const srow = dyn_smem;
@   end
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const bool active = true;
@ end
        const {{XT}} *const xr = x + row * a.x_stride;
        {{YT}} *const yr = y + row * a.y_stride;
@ if fusion then
        const {{RT}} *const rr = res + row * a.residual_stride;
@   if res_out then
        {{RT}} *const ror = res_out + row * a.residual_out_stride;
@   end
@ end
        (void)active;
@ if cache == "regs" then
        constexpr int NPACKS = ({{SLICE}} + T * V - 1) / (T * V);
        packf<V> cached[NPACKS];
@ end
@ if LN then
        /* The shift: the row's first element, the same for every thread of the row. */
@   if fusion then
        const float k = active ? __fadd_rn({{string.format(widen[types.x], "xr[0]")}}, {{string.format(widen[types.residual], "rr[0]")}}) : 0.0f;
@   else
        const float k = active ? {{string.format(widen[types.x], "xr[0]")}} : 0.0f;
@   end
@ end
        float mean, rstd;
@ if LN and p.stats == "twopass" then
        double s = 0.0;
@   sweep(true, "float acc = 0.0f;", "for (int e = 0; e < V; ++e) acc += q.v[e] - k;", "s += acc;")
        s = group_sum(s, 0);
        mean = (float)((double)k + s / (double)H);
        double ss = 0.0;
@   sweep(false, "float acc = 0.0f;", "for (int e = 0; e < V; ++e) { const float d = q.v[e] - mean; acc += d * d; }", "ss += acc;")
        ss = group_sum(ss, 1);
        rstd = (float)(1.0 / __dsqrt_rn(ss / (double)H + (double)a.eps));
@ elseif LN then
        double n = 0.0, mu = 0.0, m2 = 0.0;
@   -- 1 / ord folds to a constant: no division per element.
@   sweep(true, "float cnt = 0.0f, m[V] = {}, q2[V] = {};",
@         "cnt = (float)ord; const float inv = 1.0f / (float)ord; for (int e = 0; e < V; ++e) { const float v = q.v[e] - k, d = v - m[e]; m[e] += d * inv; q2[e] += d * (v - m[e]); }",
@         "for (int e = 0; e < V; ++e) chan_merge(n, mu, m2, (double)cnt, (double)m[e], (double)q2[e]);")
        group_welford(n, mu, m2);
        mean = (float)((double)k + mu);
        rstd = (float)(1.0 / __dsqrt_rn(m2 / (double)H + (double)a.eps));
@ else
        double s = 0.0;
@   sweep(true, "float acc = 0.0f;", "for (int e = 0; e < V; ++e) acc += q.v[e] * q.v[e];", "s += acc;")
        s = group_sum(s, 0);
        mean = 0.0f;
        rstd = (float)(1.0 / __dsqrt_rn(s / (double)H + (double)a.eps));
@ end
@ local g_on = p.affine ~= "none"
@ if quant and quant.row then
@   row_scale(g_on, g_on and LN)
@ end
@ normalize(g_on, g_on and LN)
@ if LAYOUT == "cluster" then
        if (active && t == 0 && rank == 0) {
@ else
        if (active && t == 0) {
@ end
            if (a.mean) a.mean[row] = mean;
            if (a.rstd) a.rstd[row] = rstd;
        }
    }
}

@ end
@ if P > 1 then
@   emit_run("run_packed", P, p.cache)
@   -- Misaligned pointers or odd strides are rare: scalar accesses re-reading x keep them
@   -- correct without a second copy of the cached code.
@   emit_run("run_scalar", 1, "none")
@ else
@   emit_run("run_packed", 1, p.cache)
@ end

@ local size = cv.SIZE
@ if fusion then
@   local RS = size[types.residual]
/* Vector accesses need every row start of x, y, residual{{res_out and " and residual_out" or ""}} and gamma/beta aligned to P
 * elements of their type. */
LN_INLINE bool packs_fit(const lntune_kernel_args &a)
{
    const bool aligned = (uintptr_t)a.x % ({{size[types.x]}} * P) == 0 && (uintptr_t)a.y % ({{size[types.y]}} * P) == 0 &&
                         ((uintptr_t)a.gamma | (uintptr_t)a.beta) % ({{size[types.params]}} * P) == 0 &&
@   if res_out then
                         ((uintptr_t)a.residual | (uintptr_t)a.residual_out) % ({{RS}} * P) == 0;
    return P > 1 && aligned && a.H % P == 0 && a.x_stride % P == 0 && a.y_stride % P == 0 &&
           a.residual_stride % P == 0 && a.residual_out_stride % P == 0;
@   else
                         (uintptr_t)a.residual % ({{RS}} * P) == 0;
    return P > 1 && aligned && a.H % P == 0 && a.x_stride % P == 0 && a.y_stride % P == 0 &&
           a.residual_stride % P == 0;
@   end
}
@ elseif typed then
/* Vector accesses need every row start and gamma/beta aligned to P elements of their type. */
LN_INLINE bool packs_fit(const lntune_kernel_args &a)
{
    const bool aligned = (uintptr_t)a.x % ({{size[types.x]}} * P) == 0 && (uintptr_t)a.y % ({{size[types.y]}} * P) == 0 &&
                         ((uintptr_t)a.gamma | (uintptr_t)a.beta) % ({{size[types.params]}} * P) == 0;
    return P > 1 && aligned && a.H % P == 0 && a.x_stride % P == 0 && a.y_stride % P == 0;
}
@ else
/* Vector accesses need every row start and gamma/beta aligned to P floats. */
LN_INLINE bool packs_fit(const lntune_kernel_args &a)
{
    const uintptr_t addr = (uintptr_t)a.x | (uintptr_t)a.y | (uintptr_t)a.gamma | (uintptr_t)a.beta;
    return P > 1 && addr % (4 * P) == 0 && a.H % P == 0 && a.x_stride % P == 0 && a.y_stride % P == 0;
}
@ end

@ if LAYOUT == "cluster" then
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(BLOCK) {{symbol}}(lntune_kernel_args a)
@ else
extern "C" __global__ void __launch_bounds__(BLOCK) {{symbol}}(lntune_kernel_args a)
@ end
{
@ if fixed then
    if (a.H != {{fixed_H}}) return; /* the host checks fixed_h before launching */
@ end
@ if fusion then
    if (!a.residual || {{res_out and "!" or ""}}a.residual_out) return; /* the host matches the call's fusion */
@ end
@ -- The host checks the scales before launching (the CPU kernels refuse these calls).
@ if quant and quant.row then
    if (!a.y_scales) return;
@ elseif quant then
    if (!(a.y_scale >= 1.17549435e-38f && a.y_scale <= 3.40282347e38f)) return; /* normal, finite */
@ end
@ if P > 1 then
    if (packs_fit(a))
        run_packed(a);
    else
        run_scalar(a);
@ else
    run_packed(a);
@ end
}

} // namespace {{symbol}}_impl
]==],
    }
end

return M
