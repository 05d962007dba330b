/*
 * builtin_residual_avx2.c - the AVX2 copies of the residual built-ins (builtin_residual_body.h):
 * compiled with AVX2, FMA and F16C (CMakeLists.txt), run only where the CPU has them
 * (builtin_isa.c). The second copy stores residual_out non-temporally and normalizes with the
 * non-temporal built-ins, for calls larger than the cache.
 */
#define RESIDUAL_VECTOR 1
#include "builtin_residual_body.h"

RESIDUAL_COPY(AVX2, lntune_builtin_residual_avx2)
RESIDUAL_COPY(AVX2_NT, lntune_builtin_residual_avx2_nt)
