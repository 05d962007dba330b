-- templates/cpu/convert.lua - C text of the fp16/bf16 <-> fp32 conversions, of V-lane loads and
-- stores of any element type and of the sum of a vector's lanes, for CPU templates (cpu/norm.lua,
-- cpu/norm_backward.lua): each function's C text is here once.
--
-- native: fp16 vectors of 4, 8 or 16 lanes convert with F16C / AVX-512 (vcvtph2ps, vcvtps2ph)
-- rather than lane by lane in portable C, and bf16 vectors narrow with AVX512-BF16; the
-- template's knob decides and checks the ISA.
local M = {}

-- C element type of each tensor type; 16-bit types are carried as their bits. The quantized
-- types (y only; core/quant.h has their semantics) are int8 and e4m3 codes, each with a static
-- scale or one per row ("row"): the scale is the template's business, the codes this file's.
M.CTYPE = { f32 = "float", f16 = "uint16_t", bf16 = "uint16_t",
    i8 = "int8_t", i8row = "int8_t", e4m3 = "uint8_t", e4m3row = "uint8_t" }

-- Format strings of one element's widening to float and narrowing from it (quantized: of a
-- value already divided by the scale).
M.widen = { f32 = "%s", f16 = "f16_to_f32(%s)", bf16 = "bf16_to_f32(%s)" }
M.narrow = { f32 = "%s", f16 = "f32_to_f16(%s)", bf16 = "f32_to_bf16(%s)",
    i8 = "f32_to_i8(%s)", i8row = "f32_to_i8(%s)", e4m3 = "f32_to_e4m3(%s)", e4m3row = "f32_to_e4m3(%s)" }

-- The quantized types: the code's kind ("i8" or "e4m3"), whether the scale is per row, and
-- the largest code's value (QMAX of core/quant.h).
M.QUANT = {
    i8 = { code = "i8", row = false, max = "127.0f" },
    i8row = { code = "i8", row = true, max = "127.0f" },
    e4m3 = { code = "e4m3", row = false, max = "448.0f" },
    e4m3row = { code = "e4m3", row = true, max = "448.0f" },
}

-- The file-scope names the functions below declare.
M.names = { "bf16_to_f32", "f32_to_bf16", "f16_to_f32", "f32_to_f16", "vh", "vu", "vs", "hsum",
    "f32_to_i8", "f32_to_e4m3", "vq", "vi" }

local BF16 = [[

__attribute__((unused)) static inline float bf16_to_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; a NaN stays a (quiet) NaN. */
__attribute__((unused)) static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}
]]

local F16 = [[

/* The magnitude bits moved to fp32's places and rebiased by 2^112 (exact, subnormals too);
 * exponent 31 (Inf, NaN) maps to 255. */
__attribute__((unused)) static inline float f16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)(h & 0x7fffu) << 13;
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    f *= 0x1p112f;
    __builtin_memcpy(&u, &f, sizeof u);
    if ((h & 0x7c00u) == 0x7c00u)
        u = (uint32_t)(h & 0x3ffu) << 13 | 0x7f800000u;
    u |= (uint32_t)(h & 0x8000u) << 16;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even with fp16's subnormals; 65520 and up round to Inf, NaN to 0x7e00.
 * Below 2^-14 an fp32 addition of 0.5 does the rounding; above, the bias change and the
 * rounding increment are added to the bits. */
__attribute__((unused)) static inline uint16_t f32_to_f16(float f)
{
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint32_t o;
    if (u >= 0x47800000u) {
        o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (u < 0x38800000u) {
        float g;
        __builtin_memcpy(&g, &u, sizeof g);
        g += 0.5f;
        __builtin_memcpy(&o, &g, sizeof o);
        o -= 0x3f000000u;
    } else {
        o = (u + 0xc8000fffu + (u >> 13 & 1u)) >> 13;
    }
    return (uint16_t)(o | sign >> 16);
}
]]

-- Quantized codes, exactly as core/quant.h has them. Rounding to nearest even by adding and
-- subtracting 1.5 * 2^23 (exact for |v| < 2^22, which the clamps ensure), in the default
-- rounding mode; the compilers keep the two operations without -ffast-math.
local I8 = [[

/* v clamped to [-128, 127] and rounded to nearest, ties to even; NaN gives 0. */
__attribute__((unused)) static inline int8_t f32_to_i8(float v)
{
    if (v != v)
        return 0;
    v = v > 127.0f ? 127.0f : v < -128.0f ? -128.0f : v;
    return (int8_t)(int)((v + 0x1.8p23f) - 0x1.8p23f);
}
]]

local E4M3 = [[

/* OCP fp8 e4m3, saturating: |v| clamped to 448 (Inf too), rounded to nearest even, subnormals
 * (multiples of 2^-9) below 2^-6; NaN gives 0x7f with v's sign. */
__attribute__((unused)) static inline uint8_t f32_to_e4m3(float v)
{
    uint32_t u;
    __builtin_memcpy(&u, &v, sizeof u);
    const uint32_t sign = u >> 24 & 0x80u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint8_t)(sign | 0x7fu);
    if (a > 0x43e00000u) /* 448.0f */
        a = 0x43e00000u;
    if (a < 0x3c800000u) { /* 2^-6 */
        float f;
        __builtin_memcpy(&f, &a, sizeof f);
        return (uint8_t)(sign | (uint32_t)(int)((f * 512.0f + 0x1.8p23f) - 0x1.8p23f));
    }
    return (uint8_t)(sign | (((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3)));
}
]]

-- Every function is marked unused: which of them a variant calls depends on its knobs and tails.

-- The scalar conversions the types in the list use, and (V > 1) the 16-bit vector types (and,
-- native, the 16-bit lanes of the F16C builtins).
function M.scalar_functions(types, V, native)
    local used = {}
    for _, t in ipairs(types) do used[t] = true end
    local out = {}
    if used.bf16 then out[#out + 1] = BF16 end
    if used.f16 then out[#out + 1] = F16 end
    if used.i8 or used.i8row then out[#out + 1] = I8 end
    if used.e4m3 or used.e4m3row then out[#out + 1] = E4M3 end
    local q = M.QUANT
    local quantized = used.i8 or used.i8row or used.e4m3 or used.e4m3row
    if V > 1 and (used.f16 or used.bf16 or quantized) then -- (the codes' conversions use vu)
        out[#out + 1] = string.format("\ntypedef uint16_t vh __attribute__((vector_size(%d)));\n"
            .. "typedef uint32_t vu __attribute__((vector_size(%d)));\n", V * 2, V * 4)
        if native then
            out[#out + 1] = string.format("typedef short vs __attribute__((vector_size(%d)));\n",
                V == 16 and 32 or 16)
        end
    end
    for _, t in ipairs(types) do
        if V > 1 and q[t] then -- V codes, and the 32-bit integer lanes they convert through
            out[#out + 1] = string.format("typedef %s vq __attribute__((vector_size(%d)));\n"
                .. "typedef int32_t vi __attribute__((vector_size(%d)));\n", M.CTYPE[t], V, V * 4)
            break
        end
    end
    return table.concat(out)
end

-- The C type of V elements of type t (C type ct): ct itself, vf, vh or vq.
function M.vector_type(t, ct, V)
    return V == 1 and ct or t == "f32" and "vf" or M.QUANT[t] and "vq" or "vh"
end

-- A function name(const ct *p) returning the V elements of type t at p as a vf.
function M.loader(name, t, ct, V, native)
    local body
    if V == 1 then
        body = "    return " .. string.format(M.widen[t], "*p") .. ";\n"
    elseif t == "f32" then
        body = "    vf v;\n    __builtin_memcpy(&v, p, sizeof v);\n    return v;\n"
    elseif t == "bf16" then
        -- gcc 12 widens 8 lanes in two halves (five instructions); its AVX2 builtin is one.
        local widen = "    const vu u = __builtin_convertvector(h, vu) << 16;\n"
        if V == 8 then
            widen = "#if defined(__AVX2__) && !defined(__clang__)\n"
                .. "    typedef short v8hi __attribute__((vector_size(16)));\n"
                .. "    const vu u = (vu)__builtin_ia32_pmovzxwd256((v8hi)h) << 16;\n"
                .. "#else\n" .. widen .. "#endif\n"
        end
        body = "    vh h;\n    __builtin_memcpy(&h, p, sizeof h);\n" .. widen
            .. "    vf v;\n    __builtin_memcpy(&v, &u, sizeof v);\n    return v;\n"
    elseif native then
        body = "    vs h = {0};\n    __builtin_memcpy(&h, p, " .. V * 2 .. ");\n"
            .. (V == 4 and "    return __builtin_ia32_vcvtph2ps(h);\n"
                or V == 8 and "    return __builtin_ia32_vcvtph2ps256(h);\n"
                or "    return __builtin_ia32_vcvtph2ps512_mask(h, (vf){0}, (unsigned short)0xffff, 4);\n")
    else -- f16_to_f32 on every lane at once, its branch a select: no per-lane loop
        body = "    vh h;\n    __builtin_memcpy(&h, p, sizeof h);\n"
            .. "    const vu w = __builtin_convertvector(h, vu);\n"
            .. "    vu u = (w & 0x7fffu) << 13;\n"
            .. "    vf f;\n    __builtin_memcpy(&f, &u, sizeof f);\n"
            .. "    f *= 0x1p112f;\n"
            .. "    __builtin_memcpy(&u, &f, sizeof u);\n"
            .. "    const vu special = (vu)((w & 0x7c00u) == 0x7c00u); /* Inf, NaN */\n"
            .. "    u = (u & ~special) | (((w & 0x3ffu) << 13 | 0x7f800000u) & special);\n"
            .. "    u |= (w & 0x8000u) << 16;\n"
            .. "    __builtin_memcpy(&f, &u, sizeof f);\n    return f;\n"
    end
    return string.format("/* %d %s at p as floats; p needs only element alignment. */\n"
        .. "__attribute__((unused)) static inline vf %s(const %s *p)\n{\n%s}\n", V, t, name, ct, body)
end

-- native bf16: AVX512-BF16's instructions round to nearest even and keep a NaN a quiet NaN, as the
-- portable code does, but flush fp32 subnormals (below 2^-126) to zero. Inline assembly, since
-- gcc's and clang's builtins differ; where the file is compiled without the ISA, the portable
-- code instead.
M.BF16_NATIVE_IF = "#if defined(__AVX512BF16__) && defined(__AVX512VL__)"

-- The C text, between M.BF16_NATIVE_IF and "#else", that returns from a function
-- (vf even, vf odd) of layout=evenodd the 2V bf16 whose even elements are even and odd ones odd
-- as V words, rounded by AVX512-BF16 (ties to even): vcvtne2ps2bf16 puts even's V results below
-- odd's, and a shuffle interleaves them.
function M.bf16_pack_native(V)
    local lanes = {}
    for i = 0, V - 1 do lanes[#lanes + 1] = i .. ", " .. (V + i) end
    return string.format("    typedef uint16_t vw __attribute__((vector_size(%d)));\n"
        .. "    vw h;\n"
        .. '    __asm__("vcvtne2ps2bf16 %%2, %%1, %%0" : "=v"(h) : "v"(odd), "v"(even));\n'
        .. "    const vw i = __builtin_shufflevector(h, h, %s);\n"
        .. "    vu w;\n    __builtin_memcpy(&w, &i, sizeof w);\n    return w;",
        4 * V, table.concat(lanes, ", "))
end

-- The int8 narrowers' start: u, v's bits with NaN lanes 0, as w; hi, the lanes above 127.
local I8_NAN_AND_ABOVE = "    vu u;\n    __builtin_memcpy(&u, &v, sizeof u);\n"
    .. "    u &= (vu)(v == v); /* NaN lanes to 0 */\n"
    .. "    vf w;\n    __builtin_memcpy(&w, &u, sizeof w);\n"
    .. "    const vu hi = (vu)(w > 127.0f);\n"

-- A function name(vf v) returning v rounded to t (nearest even; a NaN stays a quiet NaN) as
-- V elements of type t: M.vector_type(t, ct, V).
function M.narrower(name, t, ct, V, native)
    local body
    if V == 1 then
        body = "    return " .. string.format(M.narrow[t], "v") .. ";\n"
    elseif t == "f32" then
        body = "    return v;\n"
    elseif M.QUANT[t] and M.QUANT[t].code == "i8" and native and V == 16 then
        -- AVX-512: vcvtps2dq rounds to nearest even (the default MXCSR), vpmovsdb saturates;
        -- all above 127 (+Inf, values past INT_MAX) is clamped first, so that only -128 and
        -- below reach the saturation, and NaN lanes (which would convert to INT_MIN) are
        -- zeroed by the conversion's mask of ordered lanes (one instruction fewer than a
        -- select: 10% at 2048x4096 bf16 -> int8 per row, Zen 4).
        body = "    typedef char vc __attribute__((vector_size(16)));\n"
            .. "    const unsigned short ordered = __builtin_ia32_cmpps512_mask(v, v, 7 /* _CMP_ORD_Q */, (unsigned short)0xffff, 4);\n"
            .. "    vu u;\n    __builtin_memcpy(&u, &v, sizeof u);\n"
            .. "    const vu hi = (vu)(v > 127.0f);\n"
            .. "    u = (u & ~hi) | (0x42fe0000u & hi); /* 127.0f */\n"
            .. "    vf w;\n    __builtin_memcpy(&w, &u, sizeof w);\n"
            .. "    const vi i = __builtin_ia32_cvtps2dq512_mask(w, (vi){0}, ordered, 4);\n"
            .. "    const vc c = __builtin_ia32_pmovsdb512_mask(i, (vc){0}, (unsigned short)0xffff);\n"
            .. "    vq o;\n    __builtin_memcpy(&o, &c, sizeof o);\n    return o;\n"
    elseif M.QUANT[t] and M.QUANT[t].code == "i8" then -- f32_to_i8 on every lane, by selects
        body = I8_NAN_AND_ABOVE .. "    const vu lo = (vu)(w < -128.0f);\n"
            .. "    u = (u & ~(hi | lo)) | (0x42fe0000u & hi) | (0xc3000000u & lo); /* 127.0f, -128.0f */\n"
            .. "    __builtin_memcpy(&w, &u, sizeof w);\n"
            .. "    w = (w + 0x1.8p23f) - 0x1.8p23f;\n"
            .. "    return __builtin_convertvector(__builtin_convertvector(w, vi), vq);\n"
    elseif M.QUANT[t] then -- f32_to_e4m3 on every lane, its cases computed and selected
        body = "    vu u;\n    __builtin_memcpy(&u, &v, sizeof u);\n"
            .. "    const vu sign = u >> 24 & 0x80u;\n"
            .. "    vu a = u & 0x7fffffffu;\n"
            .. "    const vu nan = (vu)(a > 0x7f800000u), big = (vu)(a > 0x43e00000u);\n"
            .. "    a = (a & ~big) | (0x43e00000u & big); /* 448.0f */\n"
            .. "    vf f;\n    __builtin_memcpy(&f, &a, sizeof f);\n"
            .. "    const vu sub = (vu)__builtin_convertvector((f * 512.0f + 0x1.8p23f) - 0x1.8p23f, vi);\n"
            .. "    const vu normal = ((a + 0x7ffffu + (a >> 20 & 1u)) >> 20) - (120u << 3);\n"
            .. "    const vu small = (vu)(a < 0x3c800000u); /* 2^-6 */\n"
            .. "    vu o = (normal & ~small) | (sub & small);\n"
            .. "    o = (o & ~nan) | (0x7fu & nan);\n"
            .. "    return __builtin_convertvector(o | sign, vq);\n"
    elseif t == "bf16" then
        body = "    vu u;\n    __builtin_memcpy(&u, &v, sizeof u);\n"
            .. "    const vu nan = (vu)(v != v); /* the NaN lanes */\n"
            .. "    const vu r = ((u + 0x7fffu + (u >> 16 & 1u)) >> 16 & ~nan) | ((u >> 16 | 0x40u) & nan);\n"
            .. "    return __builtin_convertvector(r, vh);\n"
        if native then
            body = M.BF16_NATIVE_IF .. "\n    vs h;\n"
                .. '    __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(v));\n'
                .. "    vh o;\n    __builtin_memcpy(&o, &h, sizeof o);\n    return o;\n#else\n" .. body .. "#endif\n"
        end
    elseif native then
        body = (V == 4 and "    const vs h = __builtin_ia32_vcvtps2ph(v, 0);\n"
                or V == 8 and "    const vs h = __builtin_ia32_vcvtps2ph256(v, 0);\n"
                or "    const vs h = __builtin_ia32_vcvtps2ph512_mask(v, 0, (vs){0}, (unsigned short)0xffff);\n")
            .. "    vh o;\n    __builtin_memcpy(&o, &h, sizeof o);\n    return o;\n"
    else -- f32_to_f16 on every lane at once: its three cases computed and selected
        body = "    vu u;\n    __builtin_memcpy(&u, &v, sizeof u);\n"
            .. "    const vu sign = u & 0x80000000u, a = u ^ sign;\n"
            .. "    vf g;\n    __builtin_memcpy(&g, &a, sizeof g);\n"
            .. "    g += 0.5f;\n"
            .. "    vu small;\n    __builtin_memcpy(&small, &g, sizeof small);\n"
            .. "    small -= 0x3f000000u;\n"
            .. "    const vu normal = (a + 0xc8000fffu + (a >> 13 & 1u)) >> 13;\n"
            .. "    const vu big = 0x7c00u | ((vu)(a > 0x7f800000u) & 0x200u); /* Inf, NaN */\n"
            .. "    const vu is_small = (vu)(a < 0x38800000u), is_big = (vu)(a >= 0x47800000u);\n"
            .. "    vu o = (normal & ~is_small) | (small & is_small);\n"
            .. "    o = (o & ~is_big) | (big & is_big);\n"
            .. "    return __builtin_convertvector(o | sign >> 16, vh);\n"
    end
    return string.format("/* v rounded to %s, as %d elements. */\n__attribute__((unused)) static inline %s %s(vf v)\n{\n%s}\n",
        t, V, M.vector_type(t, ct, V), name, body)
end

-- A function name(ct *p, vf v) storing v at p (element alignment) as narrow_name (a narrower
-- for t) rounds it.
function M.storer(name, t, ct, V, narrow_name)
    local body
    if V == 1 then
        body = "    *p = " .. narrow_name .. "(v);\n"
    else
        body = "    const " .. M.vector_type(t, ct, V) .. " o = " .. narrow_name .. "(v);\n"
            .. "    __builtin_memcpy(p, &o, sizeof o);\n"
    end
    return string.format("__attribute__((unused)) static inline void %s(%s *p, vf v)\n{\n%s}\n", name, ct, body)
end

-- hsum(v): the sum of v's V lanes in double, lane by lane.
function M.hsum(V)
    local body = V == 1 and "    return v;\n"
        or "    double s = 0.0;\n    for (int j = 0; j < LANES; ++j) s += v[j];\n    return s;\n"
    return "static inline double hsum(vf v)\n{\n" .. body .. "}\n"
end

return M
