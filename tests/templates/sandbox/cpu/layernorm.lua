-- A LayerNorm family of crashing and hanging variants, for test_sandbox. Only quality=right is
-- a kernel; each other one faults: at verification (segv: a NULL write; farwrite: a write 1 TiB
-- past y, beyond any guard zone; fpe: integer division by zero; trap: __builtin_trap, SIGILL;
-- hang: a loop without end), or only at the tuned shape (rows > 32), so during timing
-- (late_segv, late_hang). The tuner must survive all of them, record each with its signal or
-- timeout, and choose quality=right.
local qualities = { "right", "segv", "farwrite", "fpe", "trap", "hang", "late_segv", "late_hang",
                    "overrun" }
return lntune.import("test_family.lua").family("layernorm", qualities, lntune.template [==[
{{ lntune.abi_header() }}

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    const float *g = a->gamma, *b = a->beta;
    volatile int64_t zero = 0;
    volatile int spin = 1;
    (void)zero;
    (void)spin;
    if (!g)
        return LNTUNE_KERNEL_EUNSUPPORTED;
@ if p.quality == "segv" then
    *(volatile float *)(uintptr_t)zero = 1.0f;
@ elseif p.quality == "farwrite" then
    ((volatile float *)a->y)[(int64_t)1 << 38] = 1.0f;
@ elseif p.quality == "fpe" then
    ((float *)a->y)[0] = (float)(a->H / zero);
@ elseif p.quality == "trap" then
    __builtin_trap();
@ elseif p.quality == "hang" then
    while (spin) {
    }
@ elseif p.quality == "late_segv" then
    if (a->rows > 32)
        *(volatile float *)(uintptr_t)zero = 1.0f;
@ elseif p.quality == "late_hang" then
    while (a->rows > 32 && spin) {
    }
@ elseif p.quality == "overrun" then
    if (row_begin == 0)
        ((float *)a->y)[-1] = 0.0f;
@ end
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
{{forward_row}}
    }
    return LNTUNE_KERNEL_OK;
}
]==])
