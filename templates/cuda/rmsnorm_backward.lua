-- templates/cuda/rmsnorm_backward.lua - dx and dgamma of RMSNorm on CUDA GPUs.
-- The parameter space and source live in cuda/norm_backward.lua, shared with LayerNorm.
return lntune.import("cuda/norm_backward.lua").family("rmsnorm_backward")
