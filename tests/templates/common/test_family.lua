-- test_family.lua - what the test families of tests/templates/tuner and tests/templates/sandbox
-- share (imported from tests/templates/common, which their tests put on the template path): a
-- CPU family whose one knob is quality, the fault planted ("right" for none), run on one thread,
-- and the plain fp32 LayerNorm as C text for its template.
local M = {}

-- The forward of one row: x, y, g and b (NULL: none) in scope.
local forward_row = [[
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < a->H; ++i) mean += x[i];
        mean /= (double)a->H;
        for (int64_t i = 0; i < a->H; ++i) var += (x[i] - mean) * (x[i] - mean);
        const double rstd = 1.0 / __builtin_sqrt(var / (double)a->H + (double)a->eps);
        for (int64_t i = 0; i < a->H; ++i)
            y[i] = (float)((x[i] - mean) * rstd * g[i] + (b ? b[i] : 0.0f));]]

-- The backward's statistics of row r, the forward's saved ones or recomputed: x and H in scope.
local backward_stats = [[
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
        }]]

-- The backward of one row, right: dx, and dgamma and dbeta (NULL: not asked) summed into.
local backward_row = [[
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
        }]]

-- The names a forward family's template reads: {{forward_row}}.
local function forward() return { forward_row = forward_row } end

-- Those of a backward family's: {{backward_abi}} (the backward ABI without its #include of the
-- forward's), {{backward_stats}} and {{backward_row}}.
local function backward()
    return {
        backward_abi = (lntune_backward_abi_header:gsub('#include "lntune_kernel.h"\n', "")),
        backward_stats = backward_stats,
        backward_row = backward_row,
    }
end

-- The family of op (a backward one when op ends in _backward) on the CPU, with its qualities
-- and its source, lntune.template [==[ ... ]==].
function M.family(op, qualities, source)
    return lntune.family {
        op = op,
        target = "cpu",
        params = {
            { name = "quality", values = qualities },
            { name = "threads", values = { 1 }, launch = true },
        },
        derive = op:match("_backward$") and backward or forward,
        properties = function(p) return { threads = p.threads, affine = "fused" } end,
        source = source,
    }
end

return M
