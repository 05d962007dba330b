/*
 * builtin_quant_avx2.c - the AVX2 copy of a quantized y's row pass (builtin_quant_wide.h):
 * compiled with AVX2, FMA and F16C (CMakeLists.txt), run only where the CPU has them
 * (builtin_quant.c asks builtin_isa.c).
 */
#define QUANT_WIDE_PASS lntune_builtin_quant_pass_avx2
#include "builtin_quant_wide.h"
