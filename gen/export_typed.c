/*
 * export_typed.c - the exported file's fallback for fp16/bf16 type tuples: what serves a call of
 * a tuple (x, y, gamma/beta) no exported winner covers, as runtime/builtin_typed.c does for
 * liblntune.
 *
 * Why fixed text rather than the templates' generic variants (as fp32 has): those are one kernel
 * per (op, tuple, affine kind), 104 kernels and 0.9 MB of C that take gcc 17 s at -O3 for every
 * app, even one calling fp32 only; and none of them takes beta without gamma. This is one small
 * portable body, instantiated per (op, tuple) with the types as constants, serving every affine
 * kind. Numerics are builtin_typed.c's: inputs widen exactly to fp32, statistics are summed in
 * double, y = (x - mean) * rstd * gamma + beta is computed in fp32 and rounded once to y's type
 * (to nearest even, overflow to Inf, NaN stays a quiet NaN).
 */
#include "export_internal.h"

#include "dtypes.h"

static const char typed_body[] =
    "/* ---- fp16/bf16 fallback: portable kernels for every type tuple no winner covers ---- */\n"
    "enum { TYPED_F32 = 0, TYPED_F16 = 1, TYPED_BF16 = 2 };\n"
    "#define TYPED_INLINE static inline __attribute__((always_inline))\n"
    "\n"
    "TYPED_INLINE float typed_bits_to_f32(uint32_t u)\n"
    "{\n"
    "    float f;\n"
    "    memcpy(&f, &u, sizeof f);\n"
    "    return f;\n"
    "}\n"
    "\n"
    "TYPED_INLINE uint32_t typed_f32_to_bits(float f)\n"
    "{\n"
    "    uint32_t u;\n"
    "    memcpy(&u, &f, sizeof u);\n"
    "    return u;\n"
    "}\n"
    "\n"
    "TYPED_INLINE float typed_f16_to_f32(uint16_t h)\n"
    "{\n"
    "    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = h >> 10 & 0x1fu, man = h & "
    "0x3ffu;\n"
    "    if (exp == 0x1f) return typed_bits_to_f32(sign | 0x7f800000u | man << 13);\n"
    "    if (exp == 0) /* zero or subnormal: man * 2^-24, exact in float */\n"
    "        return typed_bits_to_f32(sign | typed_f32_to_bits((float)man * 0x1p-24f));\n"
    "    return typed_bits_to_f32(sign | (exp + 112) << 23 | man << 13);\n"
    "}\n"
    "\n"
    "/* Round to nearest even; >= 65520 is Inf; a NaN stays a quiet NaN of its sign. */\n"
    "TYPED_INLINE uint16_t typed_f32_to_f16(float f)\n"
    "{\n"
    "    const uint32_t u = typed_f32_to_bits(f), a = u & 0x7fffffffu;\n"
    "    const uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);\n"
    "    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu));\n"
    "    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);\n"
    "    if (a >= 0x38800000u) { /* normal in fp16: rebias, round off 13 bits */\n"
    "        const uint32_t r = a + 0xfffu + (a >> 13 & 1u);\n"
    "        return (uint16_t)(sign | (r - (112u << 23)) >> 13);\n"
    "    }\n"
    "    if (a <= 0x33000000u) return sign; /* <= 2^-25: the tie goes to the even zero */\n"
    "    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - (a >> 23);\n"
    "    const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);\n"
    "    uint32_t h = m >> shift;\n"
    "    if (rest > half || (rest == half && (h & 1u))) ++h; /* 0x400 is the smallest normal */\n"
    "    return (uint16_t)(sign | h);\n"
    "}\n"
    "\n"
    "TYPED_INLINE float typed_bf16_to_f32(uint16_t h)\n"
    "{\n"
    "    return typed_bits_to_f32((uint32_t)h << 16);\n"
    "}\n"
    "\n"
    "TYPED_INLINE uint16_t typed_f32_to_bf16(float f)\n"
    "{\n"
    "    uint32_t u = typed_f32_to_bits(f);\n"
    "    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u);\n"
    "    u += 0x7fffu + (u >> 16 & 1u); /* a carry into the exponent is the correct rounding */\n"
    "    return (uint16_t)(u >> 16);\n"
    "}\n"
    "\n"
    "TYPED_INLINE size_t typed_size(int type)\n"
    "{\n"
    "    return type == TYPED_F32 ? sizeof(float) : sizeof(uint16_t);\n"
    "}\n"
    "\n"
    "TYPED_INLINE float typed_load(int type, const void *p, int64_t i)\n"
    "{\n"
    "    if (type == TYPED_F16) return typed_f16_to_f32(((const uint16_t *)p)[i]);\n"
    "    if (type == TYPED_BF16) return typed_bf16_to_f32(((const uint16_t *)p)[i]);\n"
    "    return ((const float *)p)[i];\n"
    "}\n"
    "\n"
    "TYPED_INLINE void typed_store(int type, void *p, int64_t i, float v)\n"
    "{\n"
    "    if (type == TYPED_F16)\n"
    "        ((uint16_t *)p)[i] = typed_f32_to_f16(v);\n"
    "    else if (type == TYPED_BF16)\n"
    "        ((uint16_t *)p)[i] = typed_f32_to_bf16(v);\n"
    "    else\n"
    "        ((float *)p)[i] = v;\n"
    "}\n"
    "\n"
    "/* centered (LayerNorm): sums of x shifted by its first element, then of squared deviations\n"
    " * from the fp32 mean; else (RMSNorm) the sum of squares. Four partial sums in double. */\n"
    "TYPED_INLINE void typed_stats(int xt, int centered, const void *x, int64_t H, float eps,\n"
    "                              float *mean, float *rstd)\n"
    "{\n"
    "    float m = 0.0f;\n"
    "    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;\n"
    "    int64_t i = 0;\n"
    "    if (centered) {\n"
    "        const float k = typed_load(xt, x, 0);\n"
    "        for (; i + 4 <= H; i += 4) {\n"
    "            s0 += (double)typed_load(xt, x, i) - k;\n"
    "            s1 += (double)typed_load(xt, x, i + 1) - k;\n"
    "            s2 += (double)typed_load(xt, x, i + 2) - k;\n"
    "            s3 += (double)typed_load(xt, x, i + 3) - k;\n"
    "        }\n"
    "        for (; i < H; ++i) s0 += (double)typed_load(xt, x, i) - k;\n"
    "        m = (float)(k + (s0 + s1 + s2 + s3) / (double)H);\n"
    "        s0 = s1 = s2 = s3 = 0.0;\n"
    "    }\n"
    "    for (i = 0; i + 4 <= H; i += 4) {\n"
    "        const double d0 = (double)typed_load(xt, x, i) - m;\n"
    "        const double d1 = (double)typed_load(xt, x, i + 1) - m;\n"
    "        const double d2 = (double)typed_load(xt, x, i + 2) - m;\n"
    "        const double d3 = (double)typed_load(xt, x, i + 3) - m;\n"
    "        s0 += d0 * d0;\n"
    "        s1 += d1 * d1;\n"
    "        s2 += d2 * d2;\n"
    "        s3 += d3 * d3;\n"
    "    }\n"
    "    for (; i < H; ++i) {\n"
    "        const double d = (double)typed_load(xt, x, i) - m;\n"
    "        s0 += d * d;\n"
    "    }\n"
    "    *mean = m;\n"
    "    *rstd = (float)(1.0 / sqrt((s0 + s1 + s2 + s3) / (double)H + (double)eps));\n"
    "}\n"
    "\n"
    "/* y = (x - mean) * rstd [* gamma] [+ beta], each row rounded once to y's type. */\n"
    "TYPED_INLINE int typed_norm(const lntune_kernel_args *a, int64_t row_begin, int64_t "
    "row_end,\n"
    "                            int centered, int xt, int yt, int pt)\n"
    "{\n"
    "    const int64_t H = a->H;\n"
    "    const void *gamma = a->gamma, *beta = a->beta;\n"
    "    for (int64_t r = row_begin; r < row_end; ++r) {\n"
    "        const void *x = (const unsigned char *)a->x + (size_t)(r * a->x_stride) * "
    "typed_size(xt);\n"
    "        void *y = (unsigned char *)a->y + (size_t)(r * a->y_stride) * typed_size(yt);\n"
    "        float mean, rstd;\n"
    "        typed_stats(xt, centered, x, H, a->eps, &mean, &rstd);\n"
    "        for (int64_t i = 0; i < H; ++i) {\n"
    "            float v = (typed_load(xt, x, i) - mean) * rstd;\n"
    "            if (gamma) v *= typed_load(pt, gamma, i);\n"
    "            if (beta) v += typed_load(pt, beta, i);\n"
    "            typed_store(yt, y, i, v);\n"
    "        }\n"
    "        if (a->mean) a->mean[r] = mean;\n"
    "        if (a->rstd) a->rstd[r] = rstd;\n"
    "    }\n"
    "    return LNTUNE_KERNEL_OK;\n"
    "}\n\n";

static const char *const type_enum[LNTUNE_TYPE_COUNT] = {"TYPED_F32", "TYPED_F16", "TYPED_BF16"};

void lntune_export_put_typed_fallback(lntune_export_buf *b) {
    lntune_export_put(b, "%s", typed_body);
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 1; t < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT; ++t) {
            const int x = t / 9, y = t / 3 % 3, p = t % 3;
            lntune_export_put(
                b,
                "static int typed_%s_%s_%s_%s(const lntune_kernel_args *a, int64_t "
                "b, int64_t e)\n{\n    return typed_norm(a, b, e, %d, %s, %s, %s);\n}\n",
                lntune_export_ops[op].name, lntune_type_name(x), lntune_type_name(y),
                lntune_type_name(p), lntune_export_ops[op].centered, type_enum[x], type_enum[y],
                type_enum[p]);
        }
    lntune_export_put(b, "\n/* [op][x][y][params]; all-fp32 is served by the fp32 generics. */\n"
                         "static const lntune_kernel_fn typed_generic[][3][3][3] = {\n");
    for (size_t op = 0; op < lntune_export_op_count; ++op)
        for (int t = 1; t < LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT * LNTUNE_TYPE_COUNT; ++t) {
            const int x = t / 9, y = t / 3 % 3, p = t % 3;
            lntune_export_put(b, "    [%zu][%d][%d][%d] = typed_%s_%s_%s_%s,\n", op, x, y, p,
                              lntune_export_ops[op].name, lntune_type_name(x), lntune_type_name(y),
                              lntune_type_name(p));
        }
    lntune_export_put(b, "};\n\n");
}
