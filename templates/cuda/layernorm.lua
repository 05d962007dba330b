-- templates/cuda/layernorm.lua - y = (x - mean) * rstd * gamma + beta on CUDA GPUs, fp32/fp16/bf16.
-- The parameter space and source live in cuda/norm.lua, shared with RMSNorm.
return lntune.import("cuda/norm.lua").family("layernorm")
