-- templates/cuda/rmsnorm.lua - y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps), CUDA, any type.
-- The parameter space and source live in cuda/norm.lua, shared with LayerNorm.
return lntune.import("cuda/norm.lua").family("rmsnorm")
