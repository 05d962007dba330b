-- A LayerNorm backward family of faulty variants, for test_sandbox: the backward is verified and
-- timed in the sandbox's worker as the forward is. Only quality=right is a kernel; segv writes to
-- NULL at verification, late_segv only at the tuned shape (rows > 32), so during timing;
-- dx_overrun writes one element before dx and parts_overrun one float before its dgamma
-- partials (the guard zones must see both: wrong, not a crash). fp32 only.
local qualities = { "right", "segv", "late_segv", "dx_overrun", "parts_overrun" }
return lntune.import("test_family.lua").family("layernorm_backward", qualities, lntune.template [==[
{{ lntune.abi_header() }}
{{ backward_abi }}

int {{symbol}}(const lntune_backward_kernel_args *a, int64_t row_begin, int64_t row_end,
               float *dgamma, float *dbeta)
{
    const float *gm = a->gamma;
    const int64_t H = a->H;
    volatile int64_t zero = 0;
    (void)zero;
@ if p.quality == "segv" then
    *(volatile float *)(uintptr_t)zero = 1.0f;
@ elseif p.quality == "late_segv" then
    if (a->rows > 32)
        *(volatile float *)(uintptr_t)zero = 1.0f;
@ elseif p.quality == "dx_overrun" then
    if (row_begin == 0)
        ((float *)a->dx)[-1] = 0.0f;
@ elseif p.quality == "parts_overrun" then
    if (dgamma)
        dgamma[-1] = 0.0f;
@ end
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        const float *dy = (const float *)a->dy + r * a->dy_stride;
        float *dx = (float *)a->dx + r * a->dx_stride;
{{backward_stats}}
{{backward_row}}
    }
    return LNTUNE_KERNEL_OK;
}
]==])
