-- templates/cpu/host.lua - what every CPU family needs to know about the host: its vector
-- widths, the thread counts worth trying, and GCC's non-temporal store builtins.
local host = {}

-- SIMD widths the host runs natively, in floats (1 is scalar code).
function host.vector_widths(h)
    local widths = { 1, 4 }
    if h.isa.avx then widths[#widths + 1] = 8 end
    if h.isa.avx512f then widths[#widths + 1] = 16 end
    return widths
end

-- Thread counts worth trying: powers of two up to the core count, and the core count.
function host.thread_counts(h)
    local counts, n = {}, 1
    while n < h.cores do
        counts[#counts + 1] = n
        n = n * 2
    end
    counts[#counts + 1] = h.cores
    return counts
end

-- GCC's non-temporal store builtin for a vector of that many floats, and the ISA it needs
-- (clang has __builtin_nontemporal_store; <immintrin.h> would triple a kernel's compile time).
host.stream = {
    [4] = { gcc = "__builtin_ia32_movntps", isa = "sse" },
    [8] = { gcc = "__builtin_ia32_movntps256", isa = "avx" },
    [16] = { gcc = "__builtin_ia32_movntps512", isa = "avx512f" },
}

return host
