-- templates/cpu/rmsnorm_backward.lua - dx and dgamma of RMSNorm on the CPU.
-- The parameter space and source live in cpu/norm_backward.lua, shared with LayerNorm.
return lntune.import("cpu/norm_backward.lua").family("rmsnorm_backward")
