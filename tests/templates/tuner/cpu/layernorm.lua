-- A LayerNorm family with planted faults, for test_tuner: quality=wrong skips the normalization
-- (the fastest variant, and wrong), quality=broken does not compile. The tuner must record
-- both and choose a right one.
local qualities = { "right", "wrong", "broken" }
return lntune.import("test_family.lua").family("layernorm", qualities, lntune.template [==[
{{ lntune.abi_header() }}
@ if p.quality == "broken" then
this is not C;
@ end

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    const float *g = a->gamma, *b = a->beta;
    if (!g)
        return LNTUNE_KERNEL_EUNSUPPORTED;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
@ if p.quality == "wrong" then
        for (int64_t i = 0; i < a->H; ++i) y[i] = x[i] * g[i];
@ else
{{forward_row}}
@ end
    }
    return LNTUNE_KERNEL_OK;
}
]==])
