-- templates/cuda/layernorm_backward.lua - dx, dgamma, dbeta of LayerNorm on CUDA GPUs.
-- The parameter space and source live in cuda/norm_backward.lua, shared with RMSNorm.
return lntune.import("cuda/norm_backward.lua").family("layernorm_backward")
