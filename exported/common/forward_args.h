/*
 * exported/common/forward_args.h - what the C export's dispatch (cpu/dispatch.c) and the CUDA
 * export's (cuda/dispatch.cu) both ask of a forward call: copied before each. C and C++.
 */

/* The arguments of a forward call as liblntune completes them: a stride of 0 is H, an eps that
 * is not positive 1e-5. Returns 0 when a given tensor's stride is below H. */
static int lntune_complete_args(lntune_kernel_args *a) {
    if (a->x_stride == 0) a->x_stride = a->H;
    if (a->y_stride == 0) a->y_stride = a->H;
    if (a->residual_stride == 0) a->residual_stride = a->H;
    if (a->residual_out_stride == 0) a->residual_out_stride = a->H;
    if (!(a->eps > 0.0f)) a->eps = 1e-5f;
    return a->x_stride >= a->H && a->y_stride >= a->H &&
           (!a->residual || a->residual_stride >= a->H) &&
           (!a->residual_out || a->residual_out_stride >= a->H);
}

/* The internal type (0 fp32, 1 fp16, 2 bf16) of a public one (1 fp32, 2 fp16, 3 bf16), 0
 * meaning dflt; -1 out of range. */
static int lntune_internal_type(int type, int dflt) {
    return type == LNTUNE_KERNELS_DEFAULT                              ? dflt
           : type >= LNTUNE_KERNELS_F32 && type <= LNTUNE_KERNELS_BF16 ? type - 1
                                                                       : -1;
}

/* A quantized y's kind as core/dtypes.h numbers it after LNTUNE_TYPE_I8 (int8, int8 with a
 * scale per row, e4m3, e4m3 per row): a scale per row when y_scales is given; -1 for a float y. */
static int lntune_quant_kind(const lntune_kernel_args *a, int y) {
    if (y != LNTUNE_KERNELS_I8 && y != LNTUNE_KERNELS_FP8_E4M3) return -1;
    return (y == LNTUNE_KERNELS_FP8_E4M3 ? 2 : 0) + (a->y_scales != 0);
}

/* v finite, without <math.h>'s isfinite (a macro in C, std::isfinite in C++). */
static int lntune_finite(float v) {
    return v >= -3.40282347e38f && v <= 3.40282347e38f;
}

/* A quantized y's static scale, as liblntune asks: y_scales given, or a y_scale that is finite
 * and at least FLT_MIN (2^-126); the kernels write nothing without one. 1 when a is fine. */
static int lntune_scale_valid(const lntune_kernel_args *a, int quant_kind) {
    return quant_kind < 0 || a->y_scales || (a->y_scale >= 0x1p-126f && lntune_finite(a->y_scale));
}

/* A weight offset (y = norm(x) * (offset + gamma)): none, or finite and with gamma. */
static int lntune_offset_valid(const lntune_kernel_args *a) {
    return a->weight_offset == 0.0f || (a->gamma && lntune_finite(a->weight_offset));
}

/* A call's types as liblntune packs a tuple (core/dtypes.h): the residual's type only when fused
 * (fusion 1 or 2) and not x's; a quantized y (quant_kind >= 0) as y's field 3 with its kind in
 * bits 8-9. */
static int lntune_pack_types(int xt, int yt, int pt, int rt, int quant_kind, int fusion) {
    return xt | (quant_kind >= 0 ? 3 : yt) << 2 | pt << 4 |
           (fusion && rt != xt ? (rt + 1) << 6 : 0) | (quant_kind >= 0 ? quant_kind << 8 : 0);
}
