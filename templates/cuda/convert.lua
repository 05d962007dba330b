-- templates/cuda/convert.lua - fp16/bf16 <-> fp32 device functions and packed accesses: the one
-- copy for the CUDA templates (cuda/norm.lua, cuda/norm_backward.lua).
--
-- Widening is exact (fp16 subnormals included); narrowing rounds to nearest even, a NaN stays a
-- quiet NaN and overflow gives Inf, bit for bit as the CPU templates round. 16-bit values travel
-- as unsigned short: no CUDA header is needed. A change here changes the hash of every CUDA
-- template that imports this file, as any template edit does.

local M = {}

-- C element type of each tensor type; 16-bit types are carried as their bits, and so are the
-- codes of a quantized y (one byte: int8 or fp8 e4m3, core/quant.h).
M.CTYPE = { f32 = "float", f16 = "unsigned short", bf16 = "unsigned short" }
M.SIZE = { f32 = 4, f16 = 2, bf16 = 2 }
-- A float expression of an element of each type (format with the element's expression).
M.widen = { f32 = "%s", f16 = "f16_to_f32(%s)", bf16 = "bf16_to_f32(%s)" }
M.narrow = { f32 = "%s", f16 = "f32_to_f16(%s)", bf16 = "f32_to_bf16(%s)" }

-- A quantized y (y only): the code of v = y / scale, the kernel's v being y times the fp32
-- reciprocal of the scale. row: a scale per row (absmax / max, written to y_scales); max: the
-- largest code's value. The same table as cpu/convert.lua's.
M.QUANT = {
    i8 = { code = "i8", row = false, max = "127.0f" },
    i8row = { code = "i8", row = true, max = "127.0f" },
    e4m3 = { code = "e4m3", row = false, max = "448.0f" },
    e4m3row = { code = "e4m3", row = true, max = "448.0f" },
}
for t, q in pairs(M.QUANT) do
    M.CTYPE[t] = "unsigned char"
    M.SIZE[t] = 1
    M.narrow[t] = "f32_to_" .. q.code .. "(%s)"
end

-- Types chosen when the source is compiled rather than generated (the runtime's built-ins for
-- fp16/bf16 calls: one source serves every type tuple). Each tensor's type is a macro set on the
-- compiler's command line (-DLNTUNE_X_T=lntune_bf16; float, lntune_f16 or lntune_bf16): below,
-- the pseudo-types x_t, y_t, p_t and r_t stand for them.
M.GENERIC = { x = "x_t", y = "y_t", params = "p_t", residual = "r_t" }
M.MACRO = { x_t = "LNTUNE_X_T", y_t = "LNTUNE_Y_T", p_t = "LNTUNE_P_T", r_t = "LNTUNE_R_T" }
-- The C type moved in packs of V elements: packf<V> for fp32, packh<V> for the 16-bit types,
-- packq<V> for the codes.
M.PACK = { f32 = "packf<V>", f16 = "packh<V>", bf16 = "packh<V>" }
for t in pairs(M.QUANT) do M.PACK[t] = "packq<V>" end
for t in pairs(M.MACRO) do
    M.CTYPE[t] = "lntune_" .. t
    M.SIZE[t] = "sizeof(lntune_" .. t .. ")"
    M.widen[t] = "to_f32(%s)"
    M.narrow[t] = "from_f32<lntune_" .. t .. ">(%s)"
    M.PACK[t] = "packt<lntune_" .. t .. ", V>"
end

local PACKF = [[
/* V floats moved as one access: 8 or 16 bytes when the address is aligned to that. */
template <int V> struct alignas(4 * V) packf {
    float v[V];
};

template <int V> LN_INLINE packf<V> load(const float *p)
{
    return *reinterpret_cast<const packf<V> *>(p);
}

template <int V> LN_INLINE void store(float *p, const packf<V> &q)
{
    *reinterpret_cast<packf<V> *>(p) = q;
}
]]

local PACKH = [[

/* V 16-bit elements moved as one access: 4 or 8 bytes when the address is aligned to that. */
template <int V> struct alignas(2 * V) packh {
    unsigned short v[V];
};
]]

local BF16 = [[

LN_INLINE float bf16_to_f32(unsigned short h)
{
    return __uint_as_float((unsigned)h << 16);
}

/* Round to nearest even; a NaN stays a (quiet) NaN. */
LN_INLINE unsigned short f32_to_bf16(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)(u >> 16 | 0x40u);
    return (unsigned short)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}
]]

local F16 = [[

/* Exact, subnormals included (no .ftz). */
LN_INLINE float f16_to_f32(unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

/* Round to nearest even with fp16's subnormals; 65520 and up round to Inf, NaN to 0x7e00 (the CPU
 * template's bits). Below 2^-14 an fp32 addition of 0.5 does the rounding (fp32 subnormals give 0
 * whether flushed or not); above, the bias change and the rounding increment go to the bits. */
LN_INLINE unsigned short f32_to_f16(float f)
{
    unsigned u = __float_as_uint(f);
    const unsigned sign = u & 0x80000000u;
    u ^= sign;
    unsigned o;
    if (u >= 0x47800000u)
        o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    else if (u < 0x38800000u)
        o = __float_as_uint(__fadd_rn(__uint_as_float(u), 0.5f)) - 0x3f000000u;
    else
        o = (u + 0xc8000fffu + (u >> 13 & 1u)) >> 13;
    return (unsigned short)(o | sign >> 16);
}
]]

local PACKQ = [[

/* V one-byte codes moved as one access: 2, 4 or 8 bytes when the address is aligned to that. */
template <int V> struct alignas(V) packq {
    unsigned char v[V];
};
]]

-- The codes, bit for bit core/quant.h's (and the CPU template's f32_to_i8 and f32_to_e4m3):
-- __float2int_rn rounds to nearest even whatever the compiler's flags.
local I8 = [[

/* v clamped to [-128, 127] and rounded to nearest, ties to even; NaN gives 0. */
LN_INLINE unsigned char f32_to_i8(float v)
{
    if (v != v) return 0;
    v = v > 127.0f ? 127.0f : v < -128.0f ? -128.0f : v;
    return (unsigned char)__float2int_rn(v);
}
]]

local E4M3 = [[

/* OCP fp8 e4m3, saturating: |v| clamped to 448 (Inf too), rounded to nearest even, subnormals
 * (multiples of 2^-9) below 2^-6; NaN gives 0x7f with v's sign. Normal values round on the bits:
 * the increment carries into the exponent, and the bias moves from fp32's 127 to e4m3's 7. */
LN_INLINE unsigned char f32_to_e4m3(float v)
{
    const unsigned u = __float_as_uint(v);
    const unsigned sign = u >> 24 & 0x80u;
    unsigned a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
    if (a > 0x43e00000u) a = 0x43e00000u; /* 448.0f */
    if (a < 0x3c800000u)                  /* 2^-6: m * 2^-9, exactly scaled by 512 */
        return (unsigned char)(sign | (unsigned)__float2int_rn(__fmul_rn(__uint_as_float(a), 512.0f)));
    return (unsigned char)(sign | (((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3)));
}
]]

-- The element types of the pseudo-types, and a conversion of each from and to float.
local GENERIC = [[

/* The types of the tensors are chosen when this source is compiled: -DLNTUNE_X_T=lntune_bf16
 * and so on for y, gamma/beta and residual (float, lntune_f16 or lntune_bf16). */
struct lntune_f16 {
    unsigned short bits;
};
struct lntune_bf16 {
    unsigned short bits;
};
LN_INLINE float to_f32(float f) { return f; }
LN_INLINE float to_f32(lntune_f16 h) { return f16_to_f32(h.bits); }
LN_INLINE float to_f32(lntune_bf16 h) { return bf16_to_f32(h.bits); }
template <typename T> LN_INLINE T from_f32(float f);
template <> LN_INLINE float from_f32<float>(float f) { return f; }
template <> LN_INLINE lntune_f16 from_f32<lntune_f16>(float f) { return lntune_f16{f32_to_f16(f)}; }
template <> LN_INLINE lntune_bf16 from_f32<lntune_bf16>(float f) { return lntune_bf16{f32_to_bf16(f)}; }

/* V elements of type T moved as one access when the address is aligned to that. */
template <typename T, int V> struct alignas(sizeof(T) * V) packt {
    T v[V];
};
]]

-- packf with its fp32 load/store, then what the types in the list need: packh and the
-- conversions of each 16-bit type present; with a pseudo-type, all of them and the typedefs of
-- the pseudo-types present from their macros.
function M.device_functions(types)
    local used, generic = {}, {}
    for _, t in ipairs(types) do
        if M.MACRO[t] and not used[t] then generic[#generic + 1] = t end
        used[t] = true
    end
    if #generic > 0 then used.f16, used.bf16 = true, true end
    local out = { PACKF }
    if used.f16 or used.bf16 then out[#out + 1] = PACKH end
    if used.bf16 then out[#out + 1] = BF16 end
    if used.f16 then out[#out + 1] = F16 end
    local codes = {}
    for t, q in pairs(M.QUANT) do
        if used[t] then codes[q.code] = true end
    end
    if codes.i8 or codes.e4m3 then out[#out + 1] = PACKQ end
    if codes.i8 then out[#out + 1] = I8 end
    if codes.e4m3 then out[#out + 1] = E4M3 end
    if #generic > 0 then
        out[#out + 1] = GENERIC
        for _, t in ipairs(generic) do
            local macro = M.MACRO[t]
            out[#out + 1] = string.format(
                "#ifndef %s\n#error \"compile with -D%s=float, lntune_f16 or lntune_bf16\"\n#endif\n"
                .. "typedef %s lntune_%s;\n", macro, macro, macro, t)
        end
    end
    return table.concat(out)
end

-- name<V>(p): V elements of type t at p widened to a packf (fp32: one plain access).
function M.loader(name, t)
    if t == "f32" then
        return string.format([[

template <int V> LN_INLINE packf<V> %s(const float *p)
{
    return load<V>(p);
}
]], name)
    end
    local pack = M.PACK[t]
    return string.format([[

template <int V> LN_INLINE packf<V> %s(const %s *p)
{
    const %s h = *reinterpret_cast<const %s *>(p);
    packf<V> q;
#pragma unroll
    for (int e = 0; e < V; ++e) q.v[e] = %s;
    return q;
}
]], name, M.CTYPE[t], pack, pack, string.format(M.widen[t], "h.v[e]"))
end

-- name<V>(p, q): q rounded to type t (round to nearest even; a quantized t: the codes of q, which
-- the caller has divided by the scale) and stored as one access.
function M.storer(name, t)
    if t == "f32" then
        return string.format([[

template <int V> LN_INLINE void %s(float *p, const packf<V> &q)
{
    store<V>(p, q);
}
]], name)
    end
    local pack = M.PACK[t]
    return string.format([[

template <int V> LN_INLINE void %s(%s *p, const packf<V> &q)
{
    %s h;
#pragma unroll
    for (int e = 0; e < V; ++e) h.v[e] = %s;
    *reinterpret_cast<%s *>(p) = h;
}
]], name, M.CTYPE[t], pack, string.format(M.narrow[t], "q.v[e]"), pack)
end

return M
