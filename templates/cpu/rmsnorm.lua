-- templates/cpu/rmsnorm.lua - y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps), fp32, CPU.
-- The parameter space and source live in cpu/norm.lua, shared with LayerNorm.
return lntune.import("cpu/norm.lua").family("rmsnorm")
