-- A LayerNorm family of crashing and hanging variants, for test_sandbox. Only quality=right is
-- a kernel; each other one faults: at verification (segv: a NULL write; farwrite: a write 1 TiB
-- past y, beyond any guard zone; fpe: integer division by zero; trap: __builtin_trap, SIGILL;
-- hang: a loop without end), or only at the tuned shape (rows > 32), so during timing
-- (late_segv, late_hang). The tuner must survive all of them, record each with its signal or
-- timeout, and choose quality=right.
return lntune.family {
    op = "layernorm",
    target = "cpu",
    params = {
        { name = "quality", values = { "right", "segv", "farwrite", "fpe", "trap", "hang",
                                       "late_segv", "late_hang", "overrun" } },
        { name = "threads", values = { 1 }, launch = true },
    },
    properties = function(p) return { threads = p.threads, affine = "fused" } end,
    source = lntune.template [==[
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
@ elseif p.quality == "overrun" then
    if (row_begin == 0)
        ((float *)a->y)[-1] = 0.0f;
@ elseif p.quality == "late_hang" then
    while (a->rows > 32 && spin) {
    }
@ end
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < a->H; ++i) mean += x[i];
        mean /= (double)a->H;
        for (int64_t i = 0; i < a->H; ++i) var += (x[i] - mean) * (x[i] - mean);
        const double rstd = 1.0 / __builtin_sqrt(var / (double)a->H + (double)a->eps);
        for (int64_t i = 0; i < a->H; ++i)
            y[i] = (float)((x[i] - mean) * rstd * g[i] + (b ? b[i] : 0.0f));
    }
    return LNTUNE_KERNEL_OK;
}
]==],
}
