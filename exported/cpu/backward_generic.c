/*
 * exported/cpu/backward_generic.c - the generic backward kernels of lntune_kernels.c, by op and
 * type tuple, for the shapes no tuned backward serves. Copied after the typed kernels.
 */
/* ---- backward fallback: every (op, fused, x, params) no winner covers ---- */
TYPED_INLINE const void *backward_row(const void *base, int64_t r, int64_t stride, int type) {
    return (const unsigned char *)base + (size_t)(r * stride) * typed_size(type);
}

TYPED_INLINE int typed_backward(const lntune_backward_kernel_args *a, int64_t begin, int64_t end,
                                float *dgp, float *dbp, int centered, int fused, int xt, int pt) {
    if (fused != (a->dresidual_out != NULL) || (!centered && dbp))
        return LNTUNE_KERNEL_EUNSUPPORTED;
    const int64_t H = a->H;
    const int saved = a->rstd && (!centered || a->mean);
    for (int64_t r = begin; r < end; ++r) {
        const void *x = backward_row(a->x, r, a->x_stride, xt);
        const void *dy = backward_row(a->dy, r, a->dy_stride, xt);
        void *dx = (void *)backward_row(a->dx, r, a->dx_stride, xt);
        float mean = 0.0f, rstd;
        if (saved)
            mean = centered ? a->mean[r] : 0.0f, rstd = a->rstd[r];
        else
            typed_stats(xt, centered, x, H, a->eps, &mean, &rstd);
        double sg = 0.0, sq = 0.0; /* sum g, sum g * xhat; g = dy * gamma */
        for (int64_t i = 0; i < H; ++i) {
            const float g = typed_load(xt, dy, i) * (a->gamma ? typed_load(pt, a->gamma, i) : 1.0f);
            sg += g;
            sq += (double)g * ((typed_load(xt, x, i) - mean) * rstd);
        }
        const float mg = centered ? (float)(sg / (double)H) : 0.0f, mq = (float)(sq / (double)H);
        const void *dres =
            fused ? backward_row(a->dresidual_out, r, a->dresidual_out_stride, xt) : NULL;
        for (int64_t i = 0; i < H; ++i) {
            const float d = typed_load(xt, dy, i), xh = (typed_load(xt, x, i) - mean) * rstd;
            const float g = d * (a->gamma ? typed_load(pt, a->gamma, i) : 1.0f);
            float v = rstd * (g - mg - xh * mq);
            if (dres) v += typed_load(xt, dres, i);
            typed_store(xt, dx, i, v);
            if (dgp) dgp[i] += d * xh;
            if (dbp) dbp[i] += d;
        }
    }
    return LNTUNE_KERNEL_OK;
}
