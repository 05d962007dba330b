-- templates/cpu/norm.lua - CPU LayerNorm and RMSNorm forward: x, y and gamma/beta each fp32,
-- fp16 or bf16 (shape.types), statistics in fp32 and double, optionally with a fused residual add.
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
-- would otherwise lose three digits): 64 additions per accumulator lane, in either layout.
-- "onepass" and "wide" accumulate in double lanes.
-- "sampled" shifts by the mean of the first 32 elements instead and then needs only the pass of
-- squared deviations, unless the shift turns out far from the row's mean (see its row_stats).
-- 16-bit inputs widen exactly to fp32; y is computed in fp32 and rounded once to its type
-- (round to nearest even, or ties away from zero with ties=away; NaN stays a quiet NaN, overflow
-- gives Inf).
--
-- Residual (shape.fusion = "residual" or "residual_out"): the row normalized is s = x + residual,
-- each element formed by one fp32 addition of the exactly widened inputs wherever a pass reads the
-- row (the statistics passes re-read x and residual from cache rather than keeping s in a
-- buffer: the kernel ABI has no scratch memory). The normalize pass, the last, also writes
-- residual_out = s rounded once to the residual type, so that residual_out may be residual itself.
--
-- Weight offset (shape.affine = "offset", lntune_args.weight_offset: Gemma's y = norm(x) *
-- (1 + gamma)): wherever a pass reads gamma it reads gamma + the offset, one fp32 addition of the
-- exactly widened gamma (what Gemma's 1.0 + weight.float() computes), passed at run time.
--
-- Layout. With x, y and gamma/beta all bf16 (and the residual, if any), layout=evenodd reads 2V
-- elements as V 32-bit words: the even elements are the words shifted up 16 bits, the odd ones
-- the words masked, and the rounded results (y, residual_out) merge back by a shift and an or.
-- Every operation of a normalization is per element (and sums do not care about order), so the
-- kernel never puts lanes back in memory order; the widening load of the linear layout costs a
-- lane shuffle per V elements.

local M = {}

local cpu = lntune.import("cpu/host.lua")
local cv = lntune.import("cpu/convert.lua")
local vector_widths, thread_counts, stream = cpu.vector_widths, cpu.thread_counts, cpu.stream

-- Every name the source declares at file scope besides the kernel, so that several kernels can
-- share one translation unit (the engine prefixes them with the kernel's symbol).
local FILE_SCOPE_NAMES = {
    "vf", "vd", "LANES", "STEP", "BLOCK", "load", "store", "stream", "square_add", "hsum_wide",
    "welford", "merge", "sum_shifted", "sum_squared_deviations", "sum_squares", "row_stats",
    "normalize_gamma_beta", "normalize_gamma", "normalize_plain", "normalize_fn", "xt", "yt", "pt",
    "load_x", "load_p", "store_y", "stream_y", "narrow_y", "CHUNK", "rt", "load_r", "narrow_r",
    "store_r", "stream_r", "bf16_even", "bf16_odd", "bf16_round", "store_y2", "stream_y2",
    "bf16_round_even", "store_r2", "stream_r2", "bf16_pack", "bf16_pack_even",
    "normalize_gamma_beta_next", "normalize_gamma_next", "normalize_plain_next", "normalize_next_fn",
    "QMAX", "max_abs", "absmax_gamma_beta", "absmax_gamma", "absmax_plain", "absmax_fn", "row_qinv",
    "lanes_max", "row_amax",
}
for _, n in ipairs(cv.names) do FILE_SCOPE_NAMES[#FILE_SCOPE_NAMES + 1] = n end

local CTYPE = cv.CTYPE

-- layout=evenodd serves calls whose x, gamma/beta and residual (when fused) are all bf16, and
-- whose y is bf16 or quantized (codes are interleaved back into memory order as they are stored).
-- Its rounding knob, ties, is a bf16 y's (residual_out always rounds ties to even).
local function evenodd_applies(shape)
    local t = shape.types or {}
    return t.x == "bf16" and (t.y == "bf16" or cv.QUANT[t.y or ""] ~= nil) and t.params == "bf16"
        and (not shape.fusion or (t.residual or t.x) == "bf16")
end
local function evenodd_ties_apply(shape)
    return evenodd_applies(shape) and (shape.types or {}).y == "bf16"
end

-- Rows per iteration only pays off while a row's statistics are short loops.
local MAX_H_FOR_ROW_GROUPS = 4096
-- pdensity's values, first the one every variant without prefetch takes.
local PDENSITIES = { 4, 8, 1 }

-- The built-in kernels' knob values (liblntune's untuned kernels and lntune export's generic ones,
-- gen/template/builtin.c), one preset per instruction-set level: a heuristic, not a measurement.
-- level.vec lanes of GCC vectors (4: SSE2 or NEON width, so the code runs on any x86-64 or aarch64
-- without -march; 8: AVX2), 2 accumulators, sampled statistics for LayerNorm (one pass where the
-- shift allows, else two: 19% faster than two passes at 256 x 4096 on one core) and blocked
-- fp32-into-double sums for RMSNorm (both exact to a few ulps at any H), H read at run time, plain
-- stores, one thread (threads are the caller's business). All-bf16 calls take the even/odd layout
-- (bf16 widened by a shift or a mask, no lane shuffles); with level.native_f16, tuples with fp16 x,
-- y or gamma/beta convert natively (F16C).
-- Every copy prefetches the next row once per line, and accumulates its statistics while it
-- normalizes this one (prefetch=1, overlap=1): on an Intel Xeon (AVX-512, 2 cores, 2026-12-06)
-- without it LayerNorm's built-in ran at 0.67-0.82x of the copy at 2048x4096, 1024x8192 and
-- 256x16384 and 0.75x at 4096x777, with it 0.88-1.00x; RMSNorm gained 2-8%; only cache-resident
-- calls (8x4096) lost 3-7%, and those are the ones a tuned nearby bucket serves.
-- level.streaming, for calls whose data exceed the cache, stores y non-temporally; LayerNorm
-- prefetches the next row in halves instead (prefetch=2: 0.74x of the copy at 32768x4096 against
-- 0.68x with overlap=1, where RMSNorm's overlap=1 reached 0.89x against 0.80x). One prefetch per
-- line (pdensity=1): 4 per line ran 0.65x and 0.72x there (Xeon). On a Zen 4, 4 per line had been
-- 8.7% faster at 2048 x 4096 with prefetch=2: the built-in follows the machine lntune is measured
-- on, the tuner picks per machine. In fused calls the residual's next row is prefetched too
-- (rprefetch=1: 10-58% for bf16 Add & Norm, Zen 4); residual_out stays plain (rstore's first
-- value: on a Zen 3, non-temporal residual_out was 2-9% faster at H = 1024-4096 but 1.4-1.6x
-- slower at H = 768 and 776).
local function builtin_preset(layernorm, level)
    return function(_, shape)
        local t = shape.types or {}
        local f16 = t.x == "f16" or t.y == "f16" or t.params == "f16"
        local halves = level.streaming and layernorm
        return {
            vec = level.vec,
            acc = 2,
            stats = layernorm and "sampled" or "blocked",
            affine = shape.affine or "fused",
            rows = 1,
            h = "runtime",
            store = level.streaming and "nt" or "plain",
            convert = (level.native_f16 and f16) and "native" or nil,
            layout = evenodd_applies(shape) and "evenodd" or nil,
            prefetch = halves and 2 or 1,
            pdensity = 1,
            overlap = not halves and 1 or nil,
            rprefetch = (level.streaming and shape.fusion) and 1 or nil,
            threads = 1,
        }
    end
end

function M.family(op)
    local layernorm = op == "layernorm"
    return lntune.family { op = op, target = "cpu",
        file_scope_names = FILE_SCOPE_NAMES,
        params = {
            { name = "vec", values = vector_widths, doc = "floats per SIMD vector" },
            { name = "acc", values = { 1, 2, 4 }, doc = "independent accumulators (unroll)" },
            {
                name = "stats",
                values = layernorm and { "twopass", "welford", "onepass", "sampled" } or { "blocked", "wide" },
                doc = layernorm
                    and "twopass: mean then squared deviations; welford: per-lane Welford merged "
                        .. "with Chan's formula; onepass: sum and sum of squares in double lanes; "
                        .. "sampled: squared deviations from the mean of the first 32 elements, "
                        .. "in one pass unless that mean lies far from the row's"
                    or "blocked: fp32 lanes flushed into double; wide: double lanes",
            },
            {
                -- offset only for calls with a weight offset (shape.affine), which take nothing
                -- else: the space of every other call stays as it was.
                name = "affine",
                values = function(_, shape)
                    return shape.affine == "offset" and { "offset" } or { "fused", "none" }
                end,
                doc = "gamma/beta in the normalize pass, or none; offset (lntune --weight-offset): gamma "
                    .. "plus the call's weight offset, norm(x) * (offset + gamma) (Gemma: offset 1)",
            },
            {
                -- fold's fp32 error grows with |mean| * rstd (as the verifier's bound does): far
                -- below a 16-bit y's rounding, but an fp32 y would lose digits, where a
                -- memory-bound kernel has no use for the saved operation.
                name = "center",
                values = function(_, shape)
                    local y = (shape.types or {}).y
                    return (layernorm and (y == "f16" or y == "bf16")) and { "subtract", "fold" } or { "subtract" }
                end,
                doc = "subtract: (x - mean) * rstd; fold (16-bit y): x * rstd - mean * rstd, one fused "
                    .. "multiply-add (PyTorch's CPU form)",
            },
            { name = "rows", values = { 1, 2, 4 }, family = true, doc = "rows whose statistics are computed together" },
            {
                name = "h",
                values = function(_, shape) return shape.H and { "runtime", "fixed" } or { "runtime" } end,
                doc = "H read at run time, or fixed when the source is generated",
            },
            { name = "store", values = { "plain", "nt" }, family = true, doc = "plain or non-temporal stores of y" },
            {
                name = "rstore",
                values = function(_, shape)
                    return shape.fusion == "residual_out" and { "plain", "nt" } or { "plain" }
                end,
                doc = "residual_out stored plainly (read again soon by the next layer) or non-temporally",
            },
            {
                name = "convert",
                values = function(host, shape)
                    local t = shape.types or {}
                    local f16 = t.x == "f16" or t.y == "f16" or t.params == "f16"
                        or (shape.fusion and t.residual == "f16")
                    -- bf16 widens by a shift either way: only its narrowing has an instruction
                    local bf16_out = t.y == "bf16" or (shape.fusion == "residual_out" and (t.residual or t.x) == "bf16")
                    local bf16 = bf16_out and host.isa.avx512bf16 and host.isa.avx512vl
                    local i8 = (t.y == "i8" or t.y == "i8row") and host.isa.avx512f
                    return ((f16 and host.isa.f16c) or bf16 or i8) and { "portable", "native" } or { "portable" }
                end,
                doc = "16-bit conversions in portable C, or native: fp16 by F16C / AVX-512 (vcvtph2ps, vcvtps2ph), "
                    .. "bf16 narrowed by AVX512-BF16 (vcvtneps2bf16, vcvtne2ps2bf16; ties to even), int8 "
                    .. "codes of vec=16 by AVX-512 (vcvtps2dq, vpmovsdb: rounding and saturation in two)",
            },
            {
                name = "layout",
                values = function(_, shape) return evenodd_applies(shape) and { "linear", "evenodd" } or { "linear" } end,
                doc = "bf16 lanes in memory order, or even/odd elements of a 32-bit load in two vectors "
                    .. "(widened by a shift and a mask, narrowed by one or: no lane shuffles; a quantized "
                    .. "y's codes interleaved by one shuffle)",
            },
            {
                name = "ties",
                values = function(_, shape) return evenodd_ties_apply(shape) and { "even", "away" } or { "even" } end,
                doc = "bf16 y of layout=evenodd: results halfway between two bf16 (1 in 2^16) round to the even "
                    .. "one, or away from zero (one integer add instead of four operations; the same error bound)",
            },
            {
                -- 2 before 1: the tuner's tie-break prefers a knob's earlier values, and at rows=1
                -- prefetch=2 ran 1-6% ahead of prefetch=1 in every interleaved run (8 of 8, Zen 4),
                -- while a 2.5 s final retime sometimes saw the two within 1% and took prefetch=1.
                name = "prefetch",
                values = { 0, 2, 1 },
                family = true,
                doc = "1: prefetch the next row (group) of x into L2 while normalizing; 2 (rows=1): its first "
                    .. "half during the statistics pass, its second half while normalizing",
            },
            {
                -- 4 first: with one prefetch per line, x's stream fell 12-25% behind the copy
                -- wherever a vector step covers 64 bytes or more (vec=16, or vec=8 with acc >= 2),
                -- where the same line prefetched again every 16 or 8 bytes kept up (Zen 4). One
                -- per line is last (the tie-break's least favoured): on an Intel Xeon (AVX-512,
                -- 260 MiB L3) the extra hints cost 5-6% at vec=16, side by side.
                name = "pdensity",
                values = PDENSITIES,
                doc = "prefetch instructions per 64-byte line of a prefetched row: 4, 8 or 1 (the same line "
                    .. "again every 16 or 8 bytes, or once)",
            },
            {
                -- bf16 Add & Norm gained 10-58% from it, fp32 Post-LN lost 9-17% with prefetch=1
                -- (Zen 4): a knob, not a rule.
                name = "rprefetch",
                values = function(_, shape) return shape.fusion and { 0, 1 } or { 0 } end,
                doc = "fused calls: 1 prefetches the residual's next row as prefetch does x's",
            },
            {
                -- The statistics pass reads a row with nothing to store, the normalize pass
                -- stores it from L1: the two streams take turns, where a copy runs them together
                -- (overlap=1 ran 4.5-7% faster, Zen 4). Declared last but threads: each sweep of
                -- the search tries it early, and then the code's knobs (acc, vec) around it.
                name = "overlap",
                values = { 0, 1 },
                doc = "1 (rows=1, prefetch=1): the next row's statistics accumulate in this row's normalize "
                    .. "loop, so that x streams in while y streams out, and the row after that is prefetched",
            },
            {
                -- A quantized y with a scale per row needs the row's largest |y| before its first
                -- code. RMSNorm's y is x * rstd * gamma, so max |x * gamma| can ride on the
                -- statistics pass, which waits on memory anyway, instead of a pass of its own
                -- (rmsnorm 2048x4096 f32 -> i8row, 2 threads, Xeon: 0.70x of the copy with the pass).
                name = "qabs",
                values = function(_, shape)
                    local q = cv.QUANT[(shape.types or {}).y or ""]
                    return (q and q.row and not layernorm) and { "pass", "stats" } or { "pass" }
                end,
                doc = "a scale per row: the largest |y| from a pass of its own, or (RMSNorm) "
                    .. "max |x * gamma| taken in the statistics pass, times rstd",
            },
            { name = "threads", values = thread_counts, launch = true, family = true, doc = "threads across rows" },
        },
        -- Named variants C code asks for (lntune_gen_preset); see builtin_preset above.
        presets = {
            builtin = builtin_preset(layernorm, { vec = 4 }),
            builtin_avx2 = builtin_preset(layernorm, { vec = 8, native_f16 = true }),
            builtin_avx2_streaming = builtin_preset(layernorm,
                { vec = 8, native_f16 = true, streaming = true }),
            builtin_avx512 = builtin_preset(layernorm, { vec = 16, native_f16 = true }),
            builtin_avx512_streaming = builtin_preset(layernorm,
                { vec = 16, native_f16 = true, streaming = true }),
        },
        valid = function(p, host, shape)
            local types = shape.types or { x = "f32", y = "f32", params = "f32" }
            local nt = stream[(types.y == "f32" or p.layout == "evenodd") and p.vec or p.vec // 2]
            if p.store == "nt" and cv.QUANT[types.y] then
                return false, "a quantized y (one byte an element) is stored plainly"
            end
            if p.store == "nt" and not (nt and host.isa[nt.isa]) then
                return false, "non-temporal stores need 16-byte vectors of y on x86"
            end
            if p.convert == "native" and p.vec < 4 then return false, "native conversions need vec >= 4" end
            if p.rstore == "nt" and p.store ~= "nt" then
                return false, "rstore=nt rides on store=nt's alignment of y"
            end
            if p.rstore == "nt" and ((types.residual or types.x) == "f32") ~= (types.y == "f32") then
                return false, "rstore=nt needs residual_out elements of y's size (one alignment for both)"
            end
            if p.layout == "evenodd" and p.vec < 4 then return false, "layout=evenodd needs vec >= 4" end
            if p.ties == "away" and p.layout ~= "evenodd" then return false, "ties=away is layout=evenodd's rounding" end
            if p.ties == "away" and p.convert == "native" then
                return false, "convert=native rounds bf16 ties to even (AVX512-BF16)"
            end
            if p.layout == "evenodd" and p.stats == "welford" then
                return false, "layout=evenodd feeds two vectors per step: not Welford's per-lane counts"
            end
            if p.convert == "native" and p.vec == 16 and not host.isa.avx512f then
                return false, "16-lane fp16 conversions need AVX-512"
            end
            -- A row group's statistics pass already streams R rows: R more prefetched streams
            -- there made rows=2 and rows=4 1-2% slower, where rows=1 gained 4-12% (Zen 4).
            if p.prefetch == 2 and p.rows > 1 then return false, "prefetch=2 is for rows=1" end
            if p.pdensity ~= PDENSITIES[1] and p.prefetch == 0 then return false, "pdensity applies to prefetch (1 or 2)" end
            if p.rprefetch == 1 and p.prefetch == 0 then return false, "rprefetch=1 follows prefetch (1 or 2)" end
            if p.overlap == 1 and p.rows > 1 then return false, "overlap=1 is for rows=1" end
            -- Without it the loop's demand loads of the next row stalled it: 0.51x of the copy,
            -- 0.93x with it (Zen 4).
            if p.overlap == 1 and p.prefetch ~= 1 then return false, "overlap=1 runs with prefetch=1" end
            if p.overlap == 1 and p.stats ~= "sampled" and p.stats ~= "blocked" then
                return false, "overlap=1 needs a one-pass statistic of fp32 lanes: sampled or blocked"
            end
            if p.qabs == "stats" and p.stats ~= "blocked" then
                return false, "qabs=stats rides on stats=blocked"
            end
            if p.rows > 1 and shape.H and shape.H > MAX_H_FOR_ROW_GROUPS then
                return false, "rows > 1 is for H <= " .. MAX_H_FOR_ROW_GROUPS
            end
            if p.h == "fixed" and not shape.H then return false, "h=fixed needs a shape with H" end
            if shape.affine and p.affine ~= shape.affine then
                return false, shape.affine == "none" and "the call has no gamma"
                    or shape.affine == "offset" and "the call has a weight offset"
                    or "the call has gamma and no weight offset"
            end
            if shape.rows and p.threads > 1 and p.threads > shape.rows then
                return false, "more threads than rows"
            end
            return true
        end,
        derive = function(p, _, shape)
            local types = shape.types or { x = "f32", y = "f32", params = "f32" }
            local half_y = types.y == "f16" or types.y == "bf16"
            return {
                types = types,
                cv = cv,
                XT = CTYPE[types.x],
                YT = CTYPE[types.y],
                PT = CTYPE[types.params],
                -- Residual add: false, or the residual's C type, and whether residual_out is written.
                fusion = shape.fusion or false,
                RT = shape.fusion and CTYPE[types.residual or types.x] or false,
                res_out = shape.fusion == "residual_out",
                nt_r = p.rstore == "nt",
                half_y = half_y,
                -- A quantized y (core/quant.h): { code, row (a scale per row), max }, or false.
                quant = cv.QUANT[types.y] or false,
                XB = types.x == "f32" and 4 or 2, -- bytes per element of x and of y
                YB = half_y and 2 or cv.QUANT[types.y] and 1 or 4,
                layernorm = layernorm,
                V = p.vec,
                A = p.acc,
                R = p.rows,
                fixed_H = p.h == "fixed" and shape.H or false,
                nt = p.store == "nt" and stream[(half_y and p.layout ~= "evenodd") and p.vec // 2 or p.vec] or false,
                -- vectors of V lanes per step and accumulator: 2 for even/odd
                S = p.layout == "evenodd" and 2 or 1,
                -- A fixed H that is a multiple of the step needs no scalar tail loops (and GCC
                -- warns about the dead ones).
                tail = not (p.h == "fixed" and shape.H % (p.vec * p.acc * (p.layout == "evenodd" and 2 or 1)) == 0),
            }
        end,
        properties = function(p, _, shape)
            return {
                threads = p.threads,
                affine = p.affine,
                fixed_h = p.h == "fixed" and shape.H or 0,
                -- Plain stores keep their speed on rows of any alignment; non-temporal ones do
                -- not (partial lines): liblntune gives such a kernel no H of less aligned rows.
                any_alignment = p.store ~= "nt",
            }
        end,
        source = lntune.template [==[
@ local LN = layernorm
@ local fold = p.center == "fold" -- y from x * rstd + shift, shift = -mean * rstd
@ local wide = p.stats == "onepass" or p.stats == "wide"
@ local STEP_BYTES = V * A * S * XB -- bytes of a row of x per step of the vector loops
@ -- The same of the residual (fused calls), whose rows rprefetch=1 prefetches alongside x's.
@ local RB = fusion and ((types.residual or types.x) == "f32" and 4 or 2)
@ local STEP_RBYTES = fusion and V * A * S * RB
@ local rpf = p.rprefetch == 1
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

/* {{V}} lanes; {{A}} accumulators per row; fp32 partial sums flushed to double every BLOCK, after
 * 64 additions to each lane (a step adds {{S}} vector(s) to each accumulator). */
enum { LANES = {{V}}, STEP = {{V * A * S}}, BLOCK = {{V * A * 64}} };

@ -- C expressions converting one element: X/P widen x/gamma to float, Y narrows to y's type.
@ -- The conversions are marked unused: which of them a variant calls depends on its tails.
@ local widen, narrow = cv.widen, cv.narrow
@ local function X(e) return string.format(widen[types.x], e) end
@ local function P(e) return string.format(widen[types.params], e) end
@ local function Y(e) return string.format(narrow[types.y], e) end
@ -- Every type the kernel converts (x stands in for an absent residual).
@ local used = { types.x, types.y, types.params, fusion and types.residual or types.x }
@ local native = p.convert == "native"
typedef {{XT}} xt; /* x: {{types.x}} */
typedef {{YT}} yt; /* y: {{types.y}} */
typedef {{PT}} pt; /* gamma, beta: {{types.params}} */
@ if fusion then
typedef {{RT}} rt; /* residual{{res_out and ", residual_out" or ""}}: {{types.residual}} */
@ end
@ -- The statistics functions' residual rows: a parameter (RP) and its argument (RA).
@ local RP = fusion and (", const rt *const res[" .. R .. "]") or ""
@ local RA = fusion and ", res" or ""
@ -- prefetch=2: the statistics' first pass takes ahead, the elements from x's row to the next
@ -- one (0 for the last: the row itself), and prefetches the first half of that row (rahead:
@ -- the same of the residual's rows).
@ local split = p.prefetch == 2
@ local PF = split and (", int64_t ahead" .. (rpf and ", int64_t rahead" or "")) or ""
@ -- row_stats' arguments to its first pass (PA), and to a pass that prefetches nothing (P0)
@ local PA = split and (", ahead" .. (rpf and ", rahead" or "")) or ""
@ local P0 = split and (", 0" .. (rpf and ", 0" or "")) or ""
@ -- The normalize functions' residual (and residual_out) row parameters.
@ local NP = fusion and ("const rt *res, " .. (res_out and "rt *res_out, " or "")) or ""
@ -- Quantized y: the normalize functions take qinv, the reciprocal of the row's scale (QP), and
@ -- store the codes of y * qinv (QX); QA(e) passes e as that argument.
@ -- affine=offset: the functions that read gamma also take wofs, the call's weight offset (WP,
@ -- passed by WA), and use gamma + wofs (GW) wherever they read gamma. QP and QA carry it too.
@ local ofs = p.affine == "offset"
@ local WP = ofs and ", float wofs" or ""
@ local WA = ofs and ", wofs" or ""
@ local function GW(e) return ofs and ("(" .. e .. " + wofs)") or e end
@ -- RMSNorm has no beta: its normalize functions fold qinv into rstd (x * (rstd * qinv) * gamma,
@ -- one multiply an element fewer; 7% at 2048x4096 bf16 -> int8 per row, Zen 4), so QX is
@ -- LayerNorm's only.
@ local QP = (quant and ", float qinv" or "") .. WP
@ local function QA(e) return (quant and (", " .. e) or "") .. WA end
@ local function QX(e) return (quant and LN) and ("(" .. e .. ") * qinv") or e end
{{ cv.scalar_functions(used, V, native) }}
{{ cv.loader("load_x", types.x, "xt", V, native) }}
{{ cv.loader("load_p", types.params, "pt", V, native) }}
@ if fusion then
{{ cv.loader("load_r", types.residual, "rt", V, native) }}
@ end
@ if S == 2 then

/* Even and odd elements of {{2 * V}} bf16 at p as floats. A bf16 is the top half of an fp32 and
 * x86 is little-endian: the even elements are the 32-bit words shifted up, the odd ones the
 * words with their low halves cleared (no lane shuffles, unlike a widening load). */
static inline vf bf16_even(const uint16_t *p)
{
    vu u;
    __builtin_memcpy(&u, p, sizeof u);
    u <<= 16;
    vf v;
    __builtin_memcpy(&v, &u, sizeof v);
    return v;
}

static inline vf bf16_odd(const uint16_t *p)
{
    vu u;
    __builtin_memcpy(&u, p, sizeof u);
    u &= 0xffff0000u;
    vf v;
    __builtin_memcpy(&v, &u, sizeof v);
    return v;
}
@ end
@ -- The load of the V elements at ptr (an element pointer expression) for vector h of a step:
@ -- loader (load_x or load_p) in the linear layout, the even or odd half of 2V elements else.
@ local function LD(loader, ptr, h)
@   if S == 1 then return loader .. "(" .. ptr .. ")" end
@   return (h == 0 and "bf16_even" or "bf16_odd") .. "(" .. ptr .. ")"
@ end
@
@ -- Emits name(p, v): v rounded by narrow (to vt, a vector of ct) and stored non-temporally at
@ -- p, an aligned address (the builtins of the _mm*_stream_ps intrinsics, used directly because
@ -- <immintrin.h> alone triples the compile time of a kernel).
@ local function streamer(name, ct, vt, narrow)

static inline void {{name}}({{ct}} *p, vf v)
{
    const {{vt}} o = {{narrow}}(v);
#if defined(__clang__)
    __builtin_nontemporal_store(o, ({{vt}} *)p);
#else
    typedef float vnf __attribute__((vector_size(sizeof o)));
    vnf f;
    __builtin_memcpy(&f, &o, sizeof f);
    {{nt.gcc}}((float *)p, f);
#endif
}
@ end
@ -- Emits name(p, even, odd) for layout=evenodd: the 2V bf16 whose even elements are even and
@ -- odd ones odd, rounded and merged into V words by pack (bf16_pack or bf16_pack_even) and
@ -- stored at p (a ct pointer), non-temporally with nontemporal (p aligned).
@ local function pair_storer(name, ct, pack, nontemporal)

/* Stores the {{2 * V}} bf16 whose even elements are even and odd ones odd ({{pack}}). */
static inline void {{name}}({{ct}} *p, vf even, vf odd)
{
    const vu w = {{pack}}(even, odd);
@   if nontemporal then
#if defined(__clang__)
    __builtin_nontemporal_store(w, (vu *)p);
#else
    vf f;
    __builtin_memcpy(&f, &w, sizeof f);
    {{nt.gcc}}((float *)p, f);
#endif
@   else
    __builtin_memcpy(p, &w, sizeof w);
@   end
}
@ end
@ -- The V results of v in y's type, in vy (a vector of y elements), then stored.
@ local vy = cv.vector_type(types.y, "yt", V)
@ if S == 1 or quant then
{{ cv.narrower("narrow_y", types.y, "yt", V, native) }}
@ end
@ if res_out and S == 1 then
@   -- residual_out: plain stores (it is read again soon, by the next layer).
{{ cv.narrower("narrow_r", types.residual, "rt", V, native) }}
{{ cv.storer("store_r", types.residual, "rt", V, "narrow_r") }}
@   if nt_r then -- where residual_out is aligned as y is (see normalize)
@     streamer("stream_r", "rt", cv.vector_type(types.residual, "rt", V), "narrow_r")
@   end
@ end
@ if S == 2 then
@   -- Emits name(v): v rounded to bf16 in the top half of each word, ties as given.
@   local function rounder(name, ties)
@     local ties_note = ties == "even" and "ties to even"
@       or "ties away from zero\n * (a sign-magnitude add of half the last place; it differs from ties to even only where v\n * lies exactly halfway)"

/* v rounded to bf16 in the top half of each word: to nearest, {{ties_note}}.
 * A NaN needs no case of its own here: every input is bf16 (s = x + residual is the fp32 sum of
 * two widened bf16), so a NaN in v comes out of fp32 arithmetic, quiet, with the low 16 bits of
 * a widened bf16 payload or of the default NaN: zero, and the increment cannot carry out of them. */
{{native and "__attribute__((unused)) " or ""}}static inline vu {{name}}(vf v)
{
    vu u;
    __builtin_memcpy(&u, &v, sizeof u);
    return u + {{ties == "even" and "0x7fffu + (u >> 16 & 1u)" or "0x8000u"}};
}
@   end
@   -- Emits name(even, odd): the 2V bf16 rounded by round, as V words (even ones in the low
@   -- halves); with native, by AVX512-BF16 where the file is compiled for it (round: ties to even).
@   local function packer(name, round, with_native)

static inline vu {{name}}(vf even, vf odd)
{
@     if with_native then
{{cv.BF16_NATIVE_IF}}
{{cv.bf16_pack_native(V)}}
#else
@     end
    return {{round}}(even) >> 16 | ({{round}}(odd) & 0xffff0000u);
@     if with_native then
#endif
@     end
}
@   end
@   -- y's packing: its ties (bf16_pack), or AVX512-BF16's, which rounds ties to even as
@   -- residual_out's does (bf16_pack_even)
@   local pack_y = native and "bf16_pack_even" or "bf16_pack"
@   if not native and not quant then
@     rounder("bf16_round", p.ties)
@     packer("bf16_pack", "bf16_round")
@   end
@   if res_out or (native and not quant) then
@     rounder("bf16_round_even", "even") -- residual_out's, whatever y's ties
@     packer("bf16_pack_even", "bf16_round_even", native)
@   end
@   if res_out then
@     pair_storer("store_r2", "rt", "bf16_pack_even", false)
@     if nt_r then pair_storer("stream_r2", "rt", "bf16_pack_even", true) end
@   end
@   if quant then
@     local lanes = {}
@     for j = 0, V - 1 do lanes[#lanes + 1] = j .. ", " .. (V + j) end

/* Stores the {{2 * V}} codes of the elements whose even ones are even and odd ones odd: each half
 * narrowed as the linear layout's are, the two interleaved back into memory order. */
static inline void store_y2(yt *p, vf even, vf odd)
{
    typedef yt vq2 __attribute__((vector_size({{2 * V}})));
    const vq2 c = __builtin_shufflevector(narrow_y(even), narrow_y(odd), {{table.concat(lanes, ", ")}});
    __builtin_memcpy(p, &c, sizeof c);
}
@   elseif not nt then pair_storer("store_y2", "yt", pack_y, false)
@   else pair_storer("stream_y2", "yt", pack_y, true) end
@ elseif not nt then
{{ cv.storer("store_y", types.y, "yt", V, "narrow_y") }}
@ else
@   streamer("stream_y", "yt", vy, "narrow_y")
@ end
@ if p.stats == "twopass" or p.stats == "blocked" or p.stats == "sampled" then

{{ cv.hsum(V) }}

/* a + v * v as one expression, so that it compiles to a fused multiply-add where the ISA has one. */
static inline vf square_add(vf a, vf v)
{
    return a + v * v;
}
@ end
@ if quant and quant.row then

static const float QMAX = {{quant.max}};

/* m, or |v| lane by lane where |v| is larger (a NaN lane is never larger). */
__attribute__((unused)) static inline vf max_abs(vf m, vf v)
{
@   if V == 1 then
    const float a = __builtin_fabsf(v);
    return a > m ? a : m;
@   else
    vu u, mu;
    __builtin_memcpy(&u, &v, sizeof u);
    __builtin_memcpy(&mu, &m, sizeof mu);
    u &= 0x7fffffffu;
    vf a;
    __builtin_memcpy(&a, &u, sizeof a);
    const vu larger = (vu)(a > m);
    mu = (mu & ~larger) | (u & larger);
    __builtin_memcpy(&m, &mu, sizeof m);
    return m;
@   end
}

/* The largest of f and v's lanes (all >= 0). */
__attribute__((unused)) static inline float lanes_max(float f, vf v)
{
@   if V == 1 then
    return v > f ? v : f;
@   else
    for (int j = 0; j < LANES; ++j) f = v[j] > f ? v[j] : f;
    return f;
@   end
}

/* The row's scale, absmax / QMAX, to *scale; returns the multiplier of its y, QMAX / absmax
 * (0 where absmax is 0 or Inf: a row of zeros, or an infinite y). */
static inline float row_qinv(float absmax, float *scale)
{
    *scale = absmax / QMAX;
    return absmax > 0.0f ? QMAX / absmax : 0.0f;
}

/* qabs=stats: the largest |y| from max |x * gamma| and rstd; 0 where that is NaN, where every y
 * is NaN (rstd NaN, or an Inf x times rstd 0) and none counts. */
__attribute__((unused)) static inline float row_amax(float m, float rstd)
{
    const float t = m * rstd;
    return t == t ? t : 0.0f;
}
@ end
@ -- qabs=stats: RMSNorm's statistics also take max |x * gamma| (max |x| without gamma), the
@ -- row_stats functions' amax (times rstd: the largest |y| to within fp32 rounding).
@ local qstats = p.qabs == "stats"
@ local QSP = qstats and (", const pt *gamma" .. WP .. ", float amax[" .. R .. "]") or ""
@ local function QSA(e) return qstats and (", gamma" .. WA .. ", " .. e) or "" end
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
@ -- Emits the prefetches of one step of a vector loop: bytes of the row at ptr (a C pointer to
@ -- elements of elem bytes) from element index on, one each 64 / pdensity bytes, at least one
@ -- (indent: the loop body's).
@ local function prefetch_lines(indent, ptr, index, bytes, elem)
@   local every = 64 // p.pdensity
@   for o = 0, math.max(bytes, every) - 1, every do
{{indent}}__builtin_prefetch({{ptr}} + {{index}} + {{o // elem}}, 0, 2);
@   end
@ end
@ -- Emits, in a statistics loop over i by STEP, the prefetch of the first half of the next row:
@ -- half a step's bytes per step, so that the pass ends where normalize's prefetches begin.
@ local function prefetch_half()
@   rows(function(r)
@     prefetch_lines("            ", "x[" .. r .. "]", "ahead + i / 2", STEP_BYTES // 2, XB)
@     if rpf then prefetch_lines("            ", "res[" .. r .. "]", "rahead + i / 2", STEP_RBYTES // 2, RB) end
@   end)
@ end
@ -- Emits a function that adds term(r, offset) (an fp32 vector expression) over every element
@ -- of R rows into double sums s[r], flushing the fp32 partial sums every BLOCK elements;
@ -- scalar(r) is the same term for the one element at index i. With squared, the term's square
@ -- is added (square_add: one fused multiply-add).
@ -- With lin (and lin_scalar), the same loop also adds lin(r, offset) into d[r]. With ahead
@ -- (prefetch=2's first pass), it also prefetches the first half of the next row.
@ -- With mx (and mx_scalar), it also takes the largest |mx(r, offset)| into m[r].
@ local function reduction(name, comment, extra, squared, term, scalar, lin, lin_scalar, ahead, mx, mx_scalar)
/* {{comment}} */
static void {{name}}(const xt *const x[{{R}}]{{RP}}, int64_t H{{extra}}, double s[{{R}}]{{lin and (", double d[" .. R .. "]") or ""}}{{mx and (", float m[" .. R .. "]") or ""}}{{ahead and PF or ""}})
{
    const int64_t nstep = H / STEP * STEP;
    int64_t i = 0;
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@   lanes(function(r, u)
        vf a{{r}}_{{u}} = {0}{{lin and (", l" .. r .. "_" .. u .. " = {0}") or ""}}{{mx and (", q" .. r .. "_" .. u .. " = {0}") or ""}};
@   end)
        for (i = b; i < e; i += STEP) {
@   if ahead then prefetch_half() end
@   lanes(function(r, u)
@     for h = 0, S - 1 do
@       if squared then
            a{{r}}_{{u}} = square_add(a{{r}}_{{u}}, {{ term(r, u * V * S, h) }});
@       else
            a{{r}}_{{u}} += {{ term(r, u * V * S, h) }};
@       end
@       if lin then
            l{{r}}_{{u}} += {{ lin(r, u * V * S, h) }};
@       end
@       if mx then
            q{{r}}_{{u}} = max_abs(q{{r}}_{{u}}, {{ mx(r, u * V * S, h) }});
@       end
@     end
@   end)
        }
@   rows(function(r)
@     local sum, lsum = {}, {}
@     for u = 0, A - 1 do sum[#sum + 1] = "a" .. r .. "_" .. u; lsum[#lsum + 1] = "l" .. r .. "_" .. u end
        s[{{r}}] += hsum({{ table.concat(sum, " + ") }});
@     if lin then
        d[{{r}}] += hsum({{ table.concat(lsum, " + ") }});
@     end
@     if mx then
@       for u = 1, A - 1 do
        q{{r}}_0 = max_abs(q{{r}}_0, q{{r}}_{{u}});
@       end
        m[{{r}}] = lanes_max(m[{{r}}], q{{r}}_0);
@     end
@   end)
    }
@   if tail then
    for (i = nstep; i < H; ++i) {
@     rows(function(r)
        s[{{r}}] += {{ scalar(r) }};
@       if lin then
        d[{{r}}] += {{ lin_scalar(r) }};
@       end
@       if mx then
        {
            const float t = __builtin_fabsf({{ mx_scalar(r) }});
            m[{{r}}] = t > m[{{r}}] ? t : m[{{r}}];
        }
@       end
@     end)
    }
@   end
}

@ end
@ -- The row's element(s) at i + o (vector) or i (scalar): x, or the fp32 sum x + residual.
@ -- (h: which of a step's S vectors)
@ local function at(r, o, h)
@   local v = LD("load_x", "x[" .. r .. "] + i + " .. o, h)
@   return fusion and "(" .. v .. " + " .. LD("load_r", "res[" .. r .. "] + i + " .. o, h) .. ")" or v
@ end
@ local function xs(r, i)
@   local v = X("x[" .. r .. "][" .. i .. "]")
@   if not fusion then return v end
@   return "(" .. v .. " + " .. string.format(widen[types.residual], "res[" .. r .. "][" .. i .. "]") .. ")"
@ end
@ if LN and (p.stats == "twopass" or p.stats == "sampled") then
@   if p.stats == "twopass" then
@   reduction("sum_shifted", "s[r] += sum of x[r][i] - k[r].", ", const float k[" .. R .. "]", false,
@             function(r, o, h) return at(r, o, h) .. " - k[" .. r .. "]" end,
@             function(r) return xs(r, "i") .. " - k[" .. r .. "]" end, nil, nil, split)
@   end
@   reduction("sum_squared_deviations",
@             "s[r] += sum of (x[r][i] - m[r])^2, d[r] += sum of x[r][i] - m[r].",
@             ", const float m[" .. R .. "]", true,
@             function(r, o, h) return at(r, o, h) .. " - m[" .. r .. "]" end,
@             function(r) return "(" .. xs(r, "i") .. " - m[" .. r .. "]) * (" .. xs(r, "i") .. " - m[" .. r .. "])" end,
@             function(r, o, h) return at(r, o, h) .. " - m[" .. r .. "]" end,
@             function(r) return xs(r, "i") .. " - m[" .. r .. "]" end, split and p.stats == "sampled")
@   if p.stats == "twopass" then
/*
 * Mean and 1/sqrt(var + eps) of {{R}} row(s): a pass for the mean, one for deviations from it.
 * The first pass's fp32 partial sums of x - k grow with |k - mean| (k is the first element, maybe
 * an outlier); the second pass's sum of deviations corrects the mean (and the variance) by what
 * the first pass lost, with partial sums of the order of the spread only (corrected two-pass).
 */
static void row_stats(const xt *const x[{{R}}]{{RP}}, int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}]{{PF}})
{
    float k[{{R}}], m[{{R}}];
    double s[{{R}}] = {0}, ss[{{R}}] = {0}, d[{{R}}] = {0};
    for (int r = 0; r < {{R}}; ++r) k[r] = {{xs("r", 0)}};
    sum_shifted(x{{RA}}, H, k, s{{PA}});
    for (int r = 0; r < {{R}}; ++r) m[r] = (float)(k[r] + s[r] / (double)H);
    sum_squared_deviations(x{{RA}}, H, m, ss, d);
@   else
/*
 * The same from one pass where it can: the deviations are taken from m, the mean of the first
 * 32 elements, which lies within a fraction of the spread of the row's mean for any row whose
 * start looks like the rest. The variance from that pass, E[(x - m)^2] - c^2 with c the mean
 * deviation, loses to cancellation what c^2 adds to the variance: when c^2 exceeds a quarter
 * of it (a sorted row, an outlier among the first elements), the group's rows take a second
 * pass from their corrected means, as twopass does.
 */
static void row_stats(const xt *const x[{{R}}]{{RP}}, int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}]{{PF}})
{
    enum { SAMPLE = 32 };
    float m[{{R}}];
    double ss[{{R}}] = {0}, d[{{R}}] = {0};
    const int64_t n = H < SAMPLE ? H : SAMPLE;
    for (int r = 0; r < {{R}}; ++r) {
        double t = 0.0;
        for (int64_t i = 0; i < n; ++i) t += {{xs("r", "i")}};
        m[r] = (float)(t / (double)n);
    }
    sum_squared_deviations(x{{RA}}, H, m, ss, d{{PA}});
    /* Only a far row takes the second pass's figures: a row's statistics depend on its own
     * elements, never on the rows that share its group or call (batch invariance). */
    int far[{{R}}], any = 0;
    for (int r = 0; r < {{R}}; ++r) {
        const double c = d[r] / (double)H;
        far[r] = !(c * c <= 0.25 * (ss[r] / (double)H - c * c)); /* NaN too: recomputed alike */
        any |= far[r];
    }
    if (any) {
        float m2[{{R}}];
        double ss2[{{R}}] = {0}, d2[{{R}}] = {0};
        for (int r = 0; r < {{R}}; ++r) m2[r] = far[r] ? (float)((double)m[r] + d[r] / (double)H) : m[r];
        sum_squared_deviations(x{{RA}}, H, m2, ss2, d2{{P0}});
        for (int r = 0; r < {{R}}; ++r)
            if (far[r]) m[r] = m2[r], ss[r] = ss2[r], d[r] = d2[r];
    }
@   end
    for (int r = 0; r < {{R}}; ++r) {
        const double c = d[r] / (double)H, var = ss[r] / (double)H - c * c;
        mean[r] = (float)((double)m[r] + c);
        rstd[r] = (float)(1.0 / __builtin_sqrt((var < 0.0 ? 0.0 : var) + (double)eps));
    }
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
static void row_stats(const xt *const x[{{R}}]{{RP}}, int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}]{{PF}})
{
    const int64_t nstep = H / STEP * STEP;
    double n[{{R}}] = {0}, mu[{{R}}] = {0}, m2[{{R}}] = {0};
    float k[{{R}}];
@   rows(function(r)
    k[{{r}}] = {{xs(r, 0)}};
@   end)
    for (int64_t b = 0; b < nstep; b += BLOCK) {
        const int64_t e = b + BLOCK < nstep ? b + BLOCK : nstep;
@   lanes(function(r, u)
        vf m{{r}}_{{u}} = {0}, q{{r}}_{{u}} = {0};
@   end)
        float count = 0.0f;
        for (int64_t i = b; i < e; i += STEP) {
@   if split then prefetch_half() end
            count += 1.0f;
            const float inv_n = 1.0f / count;
@   lanes(function(r, u)
            welford({{at(r, u * V)}} - k[{{r}}], inv_n, &m{{r}}_{{u}}, &q{{r}}_{{u}});
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
            const double v = (double)({{xs(r, "i")}} - k[{{r}}]), d = v - mu[{{r}}];
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
static void row_stats(const xt *const x[{{R}}]{{RP}}, int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}]{{PF}})
{
    const int64_t nstep = H / STEP * STEP;
@   if LN then
    double k[{{R}}];
@     rows(function(r)
    k[{{r}}] = (double){{xs(r, 0)}};
@     end)
@   end
@   lanes(function(r, u)
    vd s{{r}}_{{u}} = {0}{{LN and (", q" .. r .. "_" .. u .. " = {0}") or ""}};
@   end)
    int64_t i = 0;
    for (; i < nstep; i += STEP) {
@   if split then prefetch_half() end
@   lanes(function(r, u) for h = 0, S - 1 do
@     if V > 1 then
        {
            const vd v = __builtin_convertvector({{at(r, u * V * S, h)}}, vd){{LN and (" - k[" .. r .. "]") or ""}};
@     else
        {
            const vd v = (double){{xs(r, "i + " .. u)}}{{LN and (" - k[" .. r .. "]") or ""}};
@     end
@     if LN then
            s{{r}}_{{u}} += v;
            q{{r}}_{{u}} += v * v;
@     else
            s{{r}}_{{u}} += v * v;
@     end
        }
@   end end)
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
            const double v = (double){{xs(r, "i")}} - k[{{r}}];
            s{{r}} += v;
            q{{r}} += v * v;
        }
@     else
        s{{r}} += (double){{xs(r, "i")}} * (double){{xs(r, "i")}};
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
@   local g = qstats and p.affine ~= "none"
@   reduction("sum_squares", "s[r] += sum of x[r][i]^2" .. (qstats and ("; m[r]: the largest |x[r][i]" .. (g and " * gamma[i]" or "") .. "|.") or "."),
@             g and (", const pt *gamma" .. WP) or "", true,
@             function(r, o, h) return at(r, o, h) end,
@             function(r) return xs(r, "i") .. " * " .. xs(r, "i") end, nil, nil, split,
@             qstats and function(r, o, h) return at(r, o, h) .. (g and (" * " .. GW(LD("load_p", "gamma + i + " .. o, h))) or "") end,
@             qstats and function(r) return xs(r, "i") .. (g and (" * " .. GW(P("gamma[i]"))) or "") end)
/* 1/sqrt(mean square + eps) of {{R}} row(s); mean is 0 for RMSNorm{{qstats and "; amax: the largest |y|" or ""}}. */
static void row_stats(const xt *const x[{{R}}]{{RP}}, int64_t H, float eps, float mean[{{R}}],
                      float rstd[{{R}}]{{PF}}{{QSP}})
{
    double s[{{R}}] = {0};
@   if qstats then
    float m[{{R}}] = {0};
    (void)gamma;
    sum_squares(x{{RA}}, H{{g and (", gamma" .. WA) or ""}}, s, m{{PA}});
@   else
    sum_squares(x{{RA}}, H, s{{PA}});
@   end
    for (int r = 0; r < {{R}}; ++r) {
        mean[r] = 0.0f;
        rstd[r] = (float)(1.0 / __builtin_sqrt(s[r] / (double)H + (double)eps));
@   if qstats then
        amax[r] = row_amax(m[r], rstd[r]);
@   end
    }
}
@ end
@
@ -- Emits a function writing one output row: expr(v, o) is the output vector for input vector
@ -- v at offset o, scalar the output for element i. next is the row to prefetch (prefetch=2:
@ -- the second half of it, at half the pace of the loop), rnext the residual's (rprefetch=1).
@ -- With with_next (overlap=1), the function is name .. "_next" and also accumulates the statistics
@ -- of nx (and nres), the next row, into *nmean and *nrstd: next is then the row after that one.
@ local function normalize(name, comment, expr, scalar, with_next)
@   local NX = with_next and (", const xt *nx" .. (fusion and ", const rt *nres" or "")
@     .. ", float eps, float *nmean, float *nrstd" .. (qstats and ", float *namax" or "")) or ""
@   -- qabs=stats: the next row's max |x * gamma| too (gamma's vector at o: gv(o, h))
@   local gq = qstats and p.affine ~= "none"
@   local function nq(o, h) return gq and (" * " .. GW(LD("load_p", "gamma + i + " .. o, h))) or "" end
@   if with_next then name = name .. "_next" end
@   -- The next row's element(s) at i + o (h: which of a step's S vectors), and its element k.
@   local function at_next(o, h)
@     local v = LD("load_x", "nx + i + " .. o, h)
@     return fusion and "(" .. v .. " + " .. LD("load_r", "nres + i + " .. o, h) .. ")" or v
@   end
@   local function xs_next(k)
@     local v = X("nx[" .. k .. "]")
@     return fusion and "(" .. v .. " + " .. string.format(widen[types.residual], "nres[" .. k .. "]") .. ")" or v
@   end
@   -- One output element i; with a residual, s = x + residual first (and residual_out = s).
@   local function step()
@     if not fusion then return "y[i] = " .. Y(QX(scalar)) .. ";" end
@     local sum = "const float s = " .. X("x[i]") .. " + " .. string.format(widen[types.residual], "res[i]") .. ";"
@     local keep = res_out and (" res_out[i] = " .. string.format(narrow[types.residual], "s") .. ";") or ""
@     return "{ " .. sum .. keep .. " y[i] = " .. Y(QX(scalar)) .. "; }"
@   end
@   -- The same with the next row's statistics of element i (with_next).
@   local function element()
@     if not with_next then return step() end
@     if LN then return "{ " .. step() .. " const float v = " .. xs_next("i") .. " - m; ss += v * v; d += v; }" end
@     if qstats then
@       return "{ " .. step() .. " const float v = " .. xs_next("i") .. "; ss += v * v; const float t = __builtin_fabsf(v" .. (gq and (" * " .. GW(P("gamma[i]"))) or "") .. "); qm = t > qm ? t : qm; }"
@     end
@     return "{ " .. step() .. " const float v = " .. xs_next("i") .. "; ss += v * v; }"
@   end
@   -- One output vector at offset o, written by store (store_y or stream_y).
@   local function vstep(store, u)
@     local o = u * V * S
@     if S == 2 and not fusion then
        {{store}}2(y + i + {{o}}, {{ QX(expr(LD("load_x", "x + i + " .. o, 0), "i + " .. o, 0)) }},
            {{ QX(expr(LD("load_x", "x + i + " .. o, 1), "i + " .. o, 1)) }});
@     elseif S == 2 then
        {
            const vf s0 = bf16_even(x + i + {{o}}) + bf16_even(res + i + {{o}});
            const vf s1 = bf16_odd(x + i + {{o}}) + bf16_odd(res + i + {{o}});
@       if res_out and nt_r then
            if (r_nt)
                stream_r2(res_out + i + {{o}}, s0, s1);
            else
                store_r2(res_out + i + {{o}}, s0, s1);
@       elseif res_out then
            store_r2(res_out + i + {{o}}, s0, s1);
@       end
            {{store}}2(y + i + {{o}}, {{ QX(expr("s0", "i + " .. o, 0)) }}, {{ QX(expr("s1", "i + " .. o, 1)) }});
        }
@     elseif not fusion then
        {{store}}(y + i + {{o}}, {{ QX(expr("load_x(x + i + " .. o .. ")", "i + " .. o)) }});
@     else
        {
            const vf s = load_x(x + i + {{o}}) + load_r(res + i + {{o}});
@       if res_out and nt_r then
            if (r_nt)
                stream_r(res_out + i + {{o}}, s);
            else
                store_r(res_out + i + {{o}}, s);
@       elseif res_out then
            store_r(res_out + i + {{o}}, s);
@       end
            {{store}}(y + i + {{o}}, {{ QX(expr("s", "i + " .. o)) }});
        }
@     end
@   end
@   -- The prefetches of one vector step (indent: the loop body's).
@   local function prefetches(indent)
@     if p.prefetch == 0 then return end
@     -- split: next is the second half of the next row, half a step's bytes per step
@     local index, share = split and "i / 2" or "i", split and 2 or 1
@     prefetch_lines(indent, "next", index, STEP_BYTES // share, XB)
@     if rpf then prefetch_lines(indent, "rnext", index, STEP_RBYTES // share, RB) end
@   end
/* {{comment}}{{with_next and (";\n * also the statistics of nx" .. (fusion and " + nres" or "") .. ", the next row") or ""}} */
static void {{name}}(const xt *x, {{NP}}yt *y, const pt *gamma, const pt *beta, float mean,
{{string.rep(" ", #name + 13)}}float rstd, int64_t H, const xt *next{{rpf and ", const rt *rnext" or ""}}{{NX}}{{QP}})
{
    (void)gamma, (void)beta, (void)mean, (void)next;
@   if quant and not LN then
    rstd *= qinv; /* the codes of y * qinv (see QX) */
@   end
@   if fold then
    const float shift = -mean * rstd;
@   end
@   if with_next and LN then
    /* squared deviations from the mean of the first 32 elements, as row_stats takes them */
    enum { SAMPLE = 32 };
    const int64_t ns = H < SAMPLE ? H : SAMPLE;
    double t = 0.0, ss = 0.0, d = 0.0;
    for (int64_t i = 0; i < ns; ++i) t += {{xs_next("i")}};
    float m = (float)(t / (double)ns);
@   elseif with_next then
    double ss = 0.0;
@     if qstats then
    float qm = 0.0f; /* the next row's largest |x * gamma| */
@     end
@   end
    int64_t i = 0;
@   if nt then
    /* Non-temporal stores need aligned addresses: peel scalars until y is aligned. */
    for (; i < H && ((uintptr_t)(y + i) & {{V * YB * S - 1}}) != 0; ++i) {{ element() }}
@   end
@   if res_out and nt_r then
    /* residual_out's elements have y's size: aligned too unless the two are offset differently */
    const int r_nt = ((uintptr_t)(res_out + i) & {{V * YB * S - 1}}) == 0;
@   end
@   if not with_next then
    for (; i + STEP <= H; i += STEP) {
@     prefetches("        ")
@     for u = 0, A - 1 do
@       vstep(nt and "stream_y" or "store_y", u)
@     end
    }
@   else
    /* fp32 partial sums flushed into double every BLOCK elements, as in the statistics pass */
    const int64_t nstep = i + (H - i) / STEP * STEP;
    while (i < nstep) {
        const int64_t e = nstep - i > BLOCK ? i + BLOCK : nstep;
@     local sum, lsum = {}, {}
@     for u = 0, A - 1 do
        vf a{{u}} = {0}{{LN and (", l" .. u .. " = {0}") or ""}}{{qstats and (", q" .. u .. " = {0}") or ""}};
@       sum[#sum + 1] = "a" .. u; lsum[#lsum + 1] = "l" .. u
@     end
        for (; i < e; i += STEP) {
@     prefetches("            ")
@     for u = 0, A - 1 do
@       for h = 0, S - 1 do
@         if LN then
            {
                const vf v = {{at_next(u * V * S, h)}} - m;
                a{{u}} = square_add(a{{u}}, v);
                l{{u}} += v;
            }
@         elseif qstats then
            {
                const vf v = {{at_next(u * V * S, h)}};
                a{{u}} = square_add(a{{u}}, v);
                q{{u}} = max_abs(q{{u}}, v{{nq(u * V * S, h)}});
            }
@         else
            a{{u}} = square_add(a{{u}}, {{at_next(u * V * S, h)}});
@         end
@       end
@     end
@     for u = 0, A - 1 do
@       vstep(nt and "stream_y" or "store_y", u)
@     end
        }
        ss += hsum({{table.concat(sum, " + ")}});
@     if qstats then
@       for u = 1, A - 1 do
        q0 = max_abs(q0, q{{u}});
@       end
        qm = lanes_max(qm, q0);
@     end
@     if LN then
        d += hsum({{table.concat(lsum, " + ")}});
@     end
    }
@   end
@   if tail or nt then
    for (; i < H; ++i) {{ element() }}
@   end
@   if with_next and LN then
    /* far from the row's mean (see row_stats): a second pass, over a row now in cache */
    double c = d / (double)H;
    if (!(c * c <= 0.25 * (ss / (double)H - c * c))) {
        const xt *const rows[1] = {nx};
@     if fusion then
        const rt *const rres[1] = {nres};
@     end
        const float m1[1] = {(float)((double)m + c)};
        double ss1[1] = {0}, d1[1] = {0};
        sum_squared_deviations(rows{{fusion and ", rres" or ""}}, H, m1, ss1, d1);
        m = m1[0], ss = ss1[0], d = d1[0], c = d / (double)H;
    }
    const double var = ss / (double)H - c * c;
    *nmean = (float)((double)m + c);
    *nrstd = (float)(1.0 / __builtin_sqrt((var < 0.0 ? 0.0 : var) + (double)eps));
@   elseif with_next then
    *nmean = 0.0f;
    *nrstd = (float)(1.0 / __builtin_sqrt(ss / (double)H + (double)eps));
@     if qstats then
    *namax = row_amax(qm, *nrstd);
@     end
@   end
}

@ end
@ local center = LN and "(%s - mean)" or "%s"
@ -- x normalized (before gamma and beta): C for the vector or scalar v.
@ local function scaled(v) return fold and ("(" .. v .. " * rstd + shift)") or (string.format(center, v) .. " * rstd") end
@ local function out(v, g, b)
@   local e = scaled(v)
@   if g then e = e .. " * " .. g end
@   if b then e = e .. " + " .. b end
@   return e
@ end
@ -- The same in the normalize functions' comments.
@ local scaled_x = fold and "(x * rstd - mean * rstd)" or (string.format(center, "x") .. " * rstd")
@ local function vec(name) return function(o, h) return LD("load_p", name .. " + " .. o, h) end end
@ local xi, gi, bi = fusion and "s" or X("x[i]"), GW(P("gamma[i]")), P("beta[i]")
@ local G, B = function(o, h) return GW(vec("gamma")(o, h)) end, vec("beta")
@ local overlap = p.overlap == 1
@ for _, with_next in ipairs(overlap and { false, true } or { false }) do
@   if p.affine ~= "none" then
@     if LN then
@       normalize("normalize_gamma_beta", "y = " .. scaled_x .. " * gamma + beta",
@                 function(v, o, h) return out(v, G(o, h), B(o, h)) end, out(xi, gi, bi), with_next)
@     end
@     normalize("normalize_gamma", "y = " .. scaled_x .. " * gamma",
@               function(v, o, h) return out(v, G(o, h)) end, out(xi, gi), with_next)
@   else
@     normalize("normalize_plain", "y = " .. scaled_x,
@               function(v) return out(v) end, out(xi), with_next)
@   end
@ end
@ local normalize_row = p.affine == "none" and "normalize_plain"
@   or LN and "beta ? normalize_gamma_beta : normalize_gamma" or "normalize_gamma"
@ if quant and quant.row and p.qabs == "pass" then
@   -- A scale per row: the largest |y| of the row first, from the same expressions as
@   -- normalize's (so the same fp32 y), then the codes of y * QMAX / absmax.
@   local RES = fusion and "const rt *res, " or ""
@   -- Emits name(...): the largest |y| of a row, y by expr (vector) and scalar as normalize's.
@   local function absmax(name, comment, expr, scalar)

/* The largest |{{comment}}| of a row, NaN left out (0 for none). */
static float {{name}}(const xt *x, {{RES}}const pt *gamma, const pt *beta, float mean, float rstd,
{{string.rep(" ", #name + 14)}}int64_t H{{WP}})
{
    (void)gamma, (void)beta, (void)mean;
@     for u = 0, A - 1 do
    vf m{{u}} = {0};
@     end
    int64_t i = 0;
    for (; i + STEP <= H; i += STEP) {
@     for u = 0, A - 1 do
@       local o = u * V * S
@       for h = 0, S - 1 do
@         if fusion then
        {
            const vf s = {{LD("load_x", "x + i + " .. o, h)}} + {{LD("load_r", "res + i + " .. o, h)}};
            m{{u}} = max_abs(m{{u}}, {{ expr("s", "i + " .. o, h) }});
        }
@         else
        m{{u}} = max_abs(m{{u}}, {{ expr(LD("load_x", "x + i + " .. o, h), "i + " .. o, h) }});
@         end
@       end
@     end
    }
@     for u = 1, A - 1 do
    m0 = max_abs(m0, m{{u}});
@     end
    float m = lanes_max(0.0f, m0);
@     if tail then
    for (; i < H; ++i) {
@       if fusion then
        const float s = {{X("x[i]")}} + {{string.format(widen[types.residual], "res[i]")}};
@       end
        const float v = __builtin_fabsf({{scalar}});
        m = v > m ? v : m;
    }
@     end
    return m;
}
@   end
@   if p.affine ~= "none" then
@     if LN then
@       absmax("absmax_gamma_beta", scaled_x .. " * gamma + beta",
@              function(v, o, h) return out(v, G(o, h), B(o, h)) end, out(xi, gi, bi))
@     end
@     absmax("absmax_gamma", scaled_x .. " * gamma", function(v, o, h) return out(v, G(o, h)) end, out(xi, gi))
@   else
@     absmax("absmax_plain", scaled_x, function(v) return out(v) end, out(xi))
@   end
typedef float absmax_fn(const xt *x, {{RES}}const pt *gamma, const pt *beta, float mean, float rstd,
                        int64_t H{{WP}});
@ end
typedef void normalize_fn(const xt *x, {{NP}}yt *y, const pt *gamma, const pt *beta, float mean,
                          float rstd, int64_t H, const xt *next{{rpf and ", const rt *rnext" or ""}}{{QP}});
@ if overlap then
typedef void normalize_next_fn(const xt *x, {{NP}}yt *y, const pt *gamma, const pt *beta,
                               float mean, float rstd, int64_t H, const xt *next{{rpf and ", const rt *rnext" or ""}},
                               const xt *nx{{fusion and ", const rt *nres" or ""}}, float eps, float *nmean, float *nrstd{{qstats and ", float *namax" or ""}}{{QP}});
@ end
@ if R > 1 then
enum { CHUNK = 1024 }; /* elements of a row group's normalize step */
@ end
int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
@ if fixed_H then
    const int64_t H = {{fixed_H}};
    if (a->H != H)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ else
    const int64_t H = a->H;
@ end
@ if not fusion then
    if (a->residual || a->residual_out)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ else
    if (!a->residual || {{res_out and "!" or ""}}a->residual_out)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ end
@ if p.affine ~= "none" then
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
    const xt *x = (const xt *)a->x;
    yt *y = (yt *)a->y;
    const pt *gamma = (const pt *)a->gamma, *beta = (const pt *)a->beta;
@ if ofs then
    const float wofs = a->weight_offset;
@ end
@ if quant and not quant.row then
    /* the codes of y / y_scale, as y times its fp32 reciprocal (core/quant.h) */
    if (!(a->y_scale >= 0x1p-126f && a->y_scale <= 0x1.fffffep127f))
        return LNTUNE_KERNEL_EUNSUPPORTED;
    const float qinv = 1.0f / a->y_scale;
@ elseif quant then
    if (!a->y_scales)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@   if not qstats then
    absmax_fn *const absmax = {{(normalize_row:gsub("normalize_", "absmax_"))}};
@   end
@ end
@ -- A scale per row: the C statement that computes row r's qinv (and writes its scale) from
@ -- its rows and statistics; "" else.
@ -- (qabs=stats: amax, the statistics' largest |y|, instead of a pass)
@ local function row_scale(xrow, rrow, mean, rstd, r, amax)
@   if not (quant and quant.row) then return "" end
@   if qstats then return "const float qinv = row_qinv(" .. amax .. ", a->y_scales + " .. r .. ");" end
@   return "const float qinv = row_qinv(absmax(" .. xrow .. ", " .. (fusion and (rrow .. ", ") or "")
@     .. "gamma, beta, " .. mean .. ", " .. rstd .. ", H" .. WA .. "), a->y_scales + " .. r .. ");"
@ end
@ -- The residual rows passed along with x's: to the statistics (GA/SA) and to normalize (GN/SN).
@ local GA, SA, GN, SN = "", "", "", ""
@ if fusion then
    const rt *res = (const rt *)a->residual;
@   GA, SA, GN, SN = ", rrows", ", &rrow", "rrows[j] + c, ", "rrow, "
@   if res_out then
    rt *res_out = (rt *)a->residual_out;
@     GN = GN .. "res_out + (r + j) * a->residual_out_stride + c, "
@     SN = SN .. "res_out + r * a->residual_out_stride, "
@   end
@ end
    normalize_fn *const normalize = {{normalize_row}};
@ if overlap then
    normalize_next_fn *const normalize_next = {{(normalize_row:gsub("(normalize_[%a_]+)", "%1_next"))}};
@ end
@ -- Each row its statistics pass, then its normalize (prefetch=2: the next row's halves in each),
@ -- while the C condition guard holds (nil: always).
@ local function rows_one_by_one(guard)
    for (; {{guard and (guard .. " && ") or ""}}r < row_end; ++r) {
        const xt *row = x + r * a->x_stride;
        const xt *next = r + 1 < row_end ? row + a->x_stride : row;
        float mean, rstd{{qstats and ", amax" or ""}};
@   if fusion then
        const rt *rrow = res + r * a->residual_stride;
@   end
@   if rpf then
        const rt *rnext = r + 1 < row_end ? rrow + a->residual_stride : rrow;
@   end
        row_stats(&row{{SA}}, H, a->eps, &mean, &rstd{{split and (", next - row" .. (rpf and ", rnext - rrow" or "")) or ""}}{{QSA("&amax")}});
@   if quant and quant.row then
        {{row_scale("row", "rrow", "mean", "rstd", "r", "amax")}}
@   end
        normalize(row, {{SN}}y + r * a->y_stride, gamma, beta, mean, rstd, H, {{split and "next + H / 2" or "next"}}{{rpf and (split and ", rnext + H / 2" or ", rnext") or ""}}{{QA("qinv")}});
        if (a->mean) a->mean[r] = mean;
        if (a->rstd) a->rstd[r] = rstd;
    }
@ end
    int64_t r = row_begin;
@ if R > 1 then
    for (; r + {{R}} <= row_end; r += {{R}}) {
        const xt *rows[{{R}}];
        float mean[{{R}}], rstd[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rows[j] = x + (r + j) * a->x_stride;
@ if fusion then
        const rt *rrows[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rrows[j] = res + (r + j) * a->residual_stride;
@ end
@ if qstats then
        float amax[{{R}}];
@ end
        row_stats(rows{{GA}}, H, a->eps, mean, rstd{{QSA("amax")}});
@ if quant and quant.row then
        float qs[{{R}}];
        for (int j = 0; j < {{R}}; ++j) {
            {{row_scale("rows[j]", "rrows[j]", "mean[j]", "rstd[j]", "r + j", "amax[j]")}}
            qs[j] = qinv;
        }
@ end
        /* Chunk by chunk across the group, so that each chunk of gamma and beta is read from
         * L1 by every row of the group (whole rows of x, gamma and beta overflow L1). */
        for (int64_t c = 0; c < H; c += CHUNK) {
            const int64_t n = H - c < CHUNK ? H - c : CHUNK;
            const pt *g = gamma ? gamma + c : (const pt *)0, *b = beta ? beta + c : (const pt *)0;
            for (int j = 0; j < {{R}}; ++j) {
                /* the same row of the next group: its reads overlap this group's stores */
                const xt *next = r + j + {{R}} < row_end ? rows[j] + {{R}} * a->x_stride : rows[j];
@ if rpf then
                const rt *rnext = r + j + {{R}} < row_end ? rrows[j] + {{R}} * a->residual_stride : rrows[j];
@ end
                normalize(rows[j] + c, {{GN}}y + (r + j) * a->y_stride + c, g, b, mean[j], rstd[j], n,
                          next + c{{rpf and ", rnext + c" or ""}}{{QA(quant and quant.row and "qs[j]" or "qinv")}});
            }
        }
        for (int j = 0; j < {{R}}; ++j) {
            if (a->mean) a->mean[r + j] = mean[j];
            if (a->rstd) a->rstd[r + j] = rstd[j];
        }
    }
    /* Rows left over go one at a time through a group that repeats the same row. */
    for (; r < row_end; ++r) {
        const xt *row = x + r * a->x_stride;
        const xt *rows[{{R}}];
        float mean[{{R}}], rstd[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rows[j] = row;
@ if fusion then
        const rt *rrow = res + r * a->residual_stride, *rrows[{{R}}];
        for (int j = 0; j < {{R}}; ++j) rrows[j] = rrow;
@ end
@ if qstats then
        float amax[{{R}}];
@ end
        row_stats(rows{{GA}}, H, a->eps, mean, rstd{{QSA("amax")}});
@ if quant and quant.row then
        {{row_scale("row", "rrow", "mean[0]", "rstd[0]", "r", "amax[0]")}}
@ end
        normalize(row, {{SN}}y + r * a->y_stride, gamma, beta, mean[0], rstd[0], H, row{{rpf and ", rrow" or ""}}{{QA("qinv")}});
        if (a->mean) a->mean[r] = mean[0];
        if (a->rstd) a->rstd[r] = rstd[0];
    }
@ elseif overlap then
@   if nt then
    /* The next row's statistics follow this row's loop, which starts where y is aligned for the
     * non-temporal stores: the order of row_stats (a row alone) only where no row peels. Else
     * each row takes its own pass, so that a row's bits never depend on the rows before it in
     * the call (batch invariance: the verifier runs rows alone and split). */
    const int peels = (((uintptr_t)y | (uintptr_t)(a->y_stride * (int64_t)sizeof(yt))) & {{V * YB * S - 1}}) != 0;
@     rows_one_by_one("peels")
@   end
    /* Each row's statistics come from the previous row's normalize loop (the first's from a pass). */
    float mean = 0.0f, rstd = 0.0f{{qstats and ", amax = 0.0f" or ""}};
    if (r < row_end) {
        const xt *row = x + r * a->x_stride;
@   if fusion then
        const rt *rrow = res + r * a->residual_stride;
@   end
        row_stats(&row{{SA}}, H, a->eps, &mean, &rstd{{QSA("&amax")}});
    }
    for (; r < row_end; ++r) {
        const xt *row = x + r * a->x_stride;
@   if fusion then
        const rt *rrow = res + r * a->residual_stride;
@   end
        const float m = mean, s = rstd;
@   if quant and quant.row then
        {{row_scale("row", "rrow", "m", "s", "r", "amax")}}
@   end
        if (r + 1 < row_end) {
            const xt *nrow = row + a->x_stride;
            const xt *after = r + 2 < row_end ? nrow + a->x_stride : nrow;
@   if fusion then
            const rt *nrrow = rrow + a->residual_stride;
@   end
@   if rpf then
            const rt *rafter = r + 2 < row_end ? nrrow + a->residual_stride : nrrow;
@   end
            normalize_next(row, {{SN}}y + r * a->y_stride, gamma, beta, m, s, H, after{{rpf and ", rafter" or ""}},
                           nrow{{fusion and ", nrrow" or ""}}, a->eps, &mean, &rstd{{qstats and ", &amax" or ""}}{{QA("qinv")}});
        } else {
            normalize(row, {{SN}}y + r * a->y_stride, gamma, beta, m, s, H, row{{rpf and ", rrow" or ""}}{{QA("qinv")}});
        }
        if (a->mean) a->mean[r] = m;
        if (a->rstd) a->rstd[r] = s;
    }
@ else
@   rows_one_by_one()
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
