-- templates/cpu/layernorm.lua - y = (x - mean) * rstd * gamma + beta, fp32, on the CPU.
-- The parameter space and source live in cpu/norm.lua, shared with RMSNorm.
return lntune.import("cpu/norm.lua").family("layernorm")
