-- templates/cuda/layernorm.lua - y = (x - mean) * rstd * gamma + beta, fp32, on CUDA GPUs.
-- The parameter space and source live in cuda/norm.lua, shared with RMSNorm.
return lntune.import("cuda/norm.lua").family("layernorm")
