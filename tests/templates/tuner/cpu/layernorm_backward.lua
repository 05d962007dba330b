-- A LayerNorm backward family with planted faults, for test_tuner: quality=wrong drops the
-- two row means from dx (the fastest variant, and wrong), quality=broken does not compile. The
-- tuner must record both and choose the right one. fp32 only.
return lntune.family {
    op = "layernorm_backward",
    target = "cpu",
    params = {
        { name = "quality", values = { "right", "wrong", "broken" } },
        { name = "threads", values = { 1 }, launch = true },
    },
    derive = function()
        return { backward_abi = (lntune_backward_abi_header:gsub('#include "lntune_kernel.h"\n', "")) }
    end,
    properties = function(p) return { threads = p.threads, affine = "fused" } end,
    source = lntune.template [==[
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
        double mean = 0.0, rstd;
        if (a->rstd) {
            mean = a->mean[r];
            rstd = a->rstd[r];
        } else {
            double var = 0.0;
            for (int64_t i = 0; i < H; ++i) mean += x[i];
            mean /= (double)H;
            for (int64_t i = 0; i < H; ++i) var += (x[i] - mean) * (x[i] - mean);
            rstd = 1.0 / __builtin_sqrt(var / (double)H + (double)a->eps);
        }
@ if p.quality == "wrong" then
        for (int64_t i = 0; i < H; ++i) {
            const double xh = (x[i] - mean) * rstd;
            dx[i] = (float)(rstd * dy[i] * (gm ? gm[i] : 1.0f));
            if (dgamma) dgamma[i] += (float)(dy[i] * xh);
            if (dbeta) dbeta[i] += dy[i];
        }
@ else
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = 0; i < H; ++i) {
            const double xh = (x[i] - mean) * rstd, g = (double)dy[i] * (gm ? gm[i] : 1.0f);
            sg += g;
            sgx += g * xh;
            if (dgamma) dgamma[i] += (float)(dy[i] * xh);
            if (dbeta) dbeta[i] += dy[i];
        }
        for (int64_t i = 0; i < H; ++i) {
            const double xh = (x[i] - mean) * rstd, g = (double)dy[i] * (gm ? gm[i] : 1.0f);
            dx[i] = (float)(rstd * (g - sg / (double)H - xh * sgx / (double)H));
        }
@ end
    }
    return LNTUNE_KERNEL_OK;
}
]==],
}
