-- templates/cpu/copy.lua - y = x, row by row: the memory-copy bandwidth every kernel is measured
-- against. It moves the same bytes as a normalization (x read once, y written once), through
-- the same ABI, compiler and thread pool, so the ratio of the two is the kernel's efficiency.

local function widest(host)
    if host.isa.avx512f then return { 16 } end
    if host.isa.avx then return { 8 } end
    return { 4 }
end

local function thread_counts(host)
    local counts, n = {}, 1
    while n < host.cores do
        counts[#counts + 1] = n
        n = n * 2
    end
    counts[#counts + 1] = host.cores
    return counts
end

local stream = { [4] = "__builtin_ia32_movntps", [8] = "__builtin_ia32_movntps256",
                 [16] = "__builtin_ia32_movntps512" }

return lntune.family {
    op = "copy",
    target = "cpu",
    file_scope_names = { "vf", "load", "store" },
    params = {
        { name = "vec", values = widest, doc = "floats per vector: the widest the host has" },
        { name = "store", values = { "plain", "nt" }, doc = "plain or non-temporal stores" },
        { name = "threads", values = thread_counts, launch = true, doc = "threads across rows" },
    },
    valid = function(p, host) return p.store == "plain" or host.arch == "x86_64", "nt needs x86" end,
    properties = function(p) return { threads = p.threads, affine = "none" } end,
    source = lntune.template [==[
{{ lntune.abi_header() }}
typedef float vf __attribute__((vector_size({{p.vec * 4}})));

static inline vf load(const float *p)
{
    vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v)
{
@ if p.store == "nt" then
#if defined(__clang__)
    __builtin_nontemporal_store(v, (vf *)p);
#else
    {{stream[p.vec]}}(p, v);
#endif
@ else
    __builtin_memcpy(p, &v, sizeof v);
@ end
}

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    const int64_t H = a->H;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const float *x = (const float *)a->x + r * a->x_stride;
        float *y = (float *)a->y + r * a->y_stride;
        int64_t i = 0;
@ if p.store == "nt" then
        for (; i < H && ((uintptr_t)(y + i) & {{p.vec * 4 - 1}}) != 0; ++i) y[i] = x[i];
@ end
        for (; i + {{p.vec}} <= H; i += {{p.vec}}) store(y + i, load(x + i));
        for (; i < H; ++i) y[i] = x[i];
    }
@ if p.store == "nt" then
    __builtin_ia32_sfence();
@ end
    return LNTUNE_KERNEL_OK;
}
]==],
}
