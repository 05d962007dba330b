-- An RMSNorm family of 256 correct variants that differ only in a salt (so each is its own
-- source, compiled on its own), for test_interrupt.sh: four exhaustive chunks of 64, long
-- enough to interrupt a tuning run between its measurements.
local salts = {}
for i = 1, 64 do salts[i] = i end
return lntune.family {
    op = "rmsnorm",
    target = "cpu",
    params = {
        { name = "salt", values = salts },
        { name = "form", values = { "a", "b", "c", "d" } },
        { name = "threads", values = { 1 }, launch = true },
    },
    properties = function(p) return { threads = p.threads, affine = "fused" } end,
    source = lntune.template [==[
{{ lntune.abi_header() }}
/* salt {{p.salt}}, form {{p.form}} */

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    const float *g = a->gamma;
    if (!g)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
        double ss = 0.0;
        for (int64_t i = 0; i < a->H; ++i) ss += (double)x[i] * x[i];
        const double rstd = 1.0 / __builtin_sqrt(ss / (double)a->H + (double)a->eps);
        for (int64_t i = 0; i < a->H; ++i) y[i] = (float)(x[i] * rstd * g[i]);
    }
    return LNTUNE_KERNEL_OK;
}
]==],
}
