-- templates/cuda/layout.lua - rules the forward and backward CUDA families share about their
-- thread layouts, so that each rule is written once.
local M = {}

function M.ceil_div(a, b) return (a + b - 1) // b end

-- Dynamic shared memory a block may use, by compute capability: the opt-in maximum less 1 KiB
-- for the kernels' static reduction buffers.
function M.max_smem(sm)
    if sm >= 90 then return 226 * 1024 end
    if sm >= 80 then return 162 * 1024 end
    return 47 * 1024
end

-- Whether layout=warp is valid for p at H (nil: any) and fixed (h=fixed), with the family's
-- limits: max_regs floats a thread may cache (fixed H), max_loop columns it may loop over.
-- Returns true, or false and the reason.
function M.warp_valid(p, H, fixed, max_regs, max_loop)
    if p.block > 256 then return false, "warp layout uses blocks of 128 or 256" end
    if p.cache ~= (fixed and "regs" or "none") then
        return false, "warp layout caches in registers with fixed H, else re-reads"
    end
    if H then
        if fixed and M.ceil_div(H, p.tpr) > max_regs then return false, "row too long for registers" end
        if not fixed and M.ceil_div(H, p.tpr) > max_loop then return false, "too few threads for H" end
        if p.tpr > 1 and p.tpr * p.pack > 2 * H then return false, "more threads than columns" end
    end
    return true
end

return M
