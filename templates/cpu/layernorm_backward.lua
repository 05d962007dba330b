-- templates/cpu/layernorm_backward.lua - dx, dgamma, dbeta of LayerNorm on the CPU.
-- The parameter space and source live in cpu/norm_backward.lua, shared with RMSNorm.
return lntune.import("cpu/norm_backward.lua").family("layernorm_backward")
