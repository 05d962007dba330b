-- A LayerNorm backward family with planted faults, for test_tuner: quality=wrong drops the
-- two row means from dx (the fastest variant, and wrong), quality=broken does not compile. The
-- tuner must record both and choose the right one. fp32 only.
local qualities = { "right", "wrong", "broken" }
return lntune.import("test_family.lua").family("layernorm_backward", qualities, lntune.template [==[
{{ lntune.abi_header() }}
{{ backward_abi }}
@ if p.quality == "broken" then
this is not C;
@ end

int {{symbol}}(const lntune_backward_kernel_args *a, int64_t row_begin, int64_t row_end,
               float *dgamma, float *dbeta)
{
    const float *gm = a->gamma;
    const int64_t H = a->H;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        const float *dy = (const float *)a->dy + r * a->dy_stride;
        float *dx = (float *)a->dx + r * a->dx_stride;
{{backward_stats}}
@ if p.quality == "wrong" then
        for (int64_t i = 0; i < H; ++i) {
            const double xh = (x[i] - mean) * rstd;
            dx[i] = (float)(rstd * dy[i] * (gm ? gm[i] : 1.0f));
            if (dgamma) dgamma[i] += (float)(dy[i] * xh);
            if (dbeta) dbeta[i] += dy[i];
        }
@ else
{{backward_row}}
@ end
    }
    return LNTUNE_KERNEL_OK;
}
]==])
