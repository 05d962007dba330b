-- templates/cpu/copy.lua - y = x, row by row: the memory-copy bandwidth every kernel is measured
-- against. It moves the same bytes as a normalization (x read once, y written once), through
-- the same ABI, compiler and thread pool, so the ratio of the two is the kernel's efficiency.
-- The tuner takes the best of every variant here, so the limit is not a weak copy: libc's
-- memcpy, and vector loops over one or four interleaved rows with plain or non-temporal stores.

local cpu = lntune.import("cpu/host.lua")

-- Every native vector width.
local function widths(h)
    local w = cpu.vector_widths(h)
    table.remove(w, 1) -- scalar code is no copy limit
    return w
end

return lntune.family {
    op = "copy",
    target = "cpu",
    file_scope_names = { "vf", "load", "store", "copy_row" },
    params = {
        { name = "method", values = { "vector", "memcpy" }, doc = "a vector loop, or libc's memcpy" },
        { name = "vec", values = widths, doc = "floats per vector" },
        { name = "rows", values = { 1, 4 }, doc = "rows copied together (memory streams)" },
        { name = "store", values = { "plain", "nt" }, doc = "plain or non-temporal stores" },
        { name = "prefetch", values = { 0, 1 }, doc = "prefetch the next row group into L2" },
        { name = "threads", values = cpu.thread_counts, launch = true, doc = "threads across rows" },
    },
    valid = function(p, host)
        if p.method == "memcpy" then
            return p.vec == 4 and p.rows == 1 and p.store == "plain" and p.prefetch == 0,
                "memcpy has no knobs"
        end
        return p.store == "plain" or host.arch == "x86_64", "nt needs x86"
    end,
    derive = function(p) return { nt_builtin = p.store == "nt" and cpu.stream[p.vec].gcc } end,
    properties = function(p) return { threads = p.threads, affine = "none" } end,
    source = lntune.template [==[
{{ lntune.abi_header() }}
@ if p.method == "memcpy" then
#include <string.h>

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    for (int64_t r = row_begin; r < row_end; ++r)
        memcpy((float *)a->y + r * a->y_stride, (const float *)a->x + r * a->x_stride,
               (size_t)a->H * sizeof(float));
    return LNTUNE_KERNEL_OK;
}
@ else
typedef float vf __attribute__((vector_size({{p.vec * 4}})));

static inline vf load(const float *p)
{
    vf v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v)
{
@   if p.store == "nt" then
#if defined(__clang__)
    __builtin_nontemporal_store(v, (vf *)p);
#else
    {{nt_builtin}}(p, v);
#endif
@   else
    __builtin_memcpy(p, &v, sizeof v);
@   end
}

/* Copies {{p.rows}} row(s) of H floats, interleaved; next[r] is prefetched. */
static void copy_row(const float *const x[{{p.rows}}], float *const y[{{p.rows}}], int64_t H,
                     const float *const next[{{p.rows}}])
{
    (void)next;
@   if p.store == "nt" then
    /* Non-temporal stores need aligned addresses: a group with a misaligned row is copied row by
     * row, each from its first aligned float (the floats before it plainly). Copied plainly, such
     * rows (H = 777) made the copy 1.6x slower than a streaming RMSNorm of the same bytes. */
    for (int r = 0; r < {{p.rows}}; ++r)
        if (((uintptr_t)y[r] & {{p.vec * 4 - 1}}) != 0) {
            for (int q = 0; q < {{p.rows}}; ++q) {
                int64_t i = 0;
                for (; i < H && ((uintptr_t)(y[q] + i) & {{p.vec * 4 - 1}}) != 0; ++i) y[q][i] = x[q][i];
                for (; i + {{p.vec}} <= H; i += {{p.vec}}) store(y[q] + i, load(x[q] + i));
                for (; i < H; ++i) y[q][i] = x[q][i];
            }
            return;
        }
@   end
    int64_t i = 0;
    for (; i + {{p.vec}} <= H; i += {{p.vec}})
        for (int r = 0; r < {{p.rows}}; ++r) {
@   if p.prefetch == 1 then
            if (i % 16 == 0) __builtin_prefetch(next[r] + i, 0, 2);
@   end
            store(y[r] + i, load(x[r] + i));
        }
    for (; i < H; ++i)
        for (int r = 0; r < {{p.rows}}; ++r) y[r][i] = x[r][i];
}

int {{symbol}}(const lntune_kernel_args *a, int64_t row_begin, int64_t row_end)
{
    int64_t r = row_begin;
    for (; r < row_end; r += {{p.rows}}) {
        const float *x[{{p.rows}}], *next[{{p.rows}}];
        float *y[{{p.rows}}];
        for (int j = 0; j < {{p.rows}}; ++j) {
            const int64_t row = r + j < row_end ? r + j : row_end - 1;
            const int64_t after = row + {{p.rows}} < row_end ? row + {{p.rows}} : row;
            x[j] = (const float *)a->x + row * a->x_stride;
            next[j] = (const float *)a->x + after * a->x_stride;
            y[j] = (float *)a->y + row * a->y_stride;
        }
        copy_row(x, y, a->H, next);
    }
@   if p.store == "nt" then
    __builtin_ia32_sfence();
@   end
    return LNTUNE_KERNEL_OK;
}
@ end
]==],
}
