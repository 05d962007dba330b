/*
 * builtin_quant_avx512.c - the AVX-512 copy of a quantized y's row pass (builtin_quant_wide.h):
 * compiled with AVX-512 F/BW/VL (CMakeLists.txt), run only where the CPU has them (builtin_quant.c
 * asks builtin_isa.c).
 */
#define QUANT_WIDE_PASS lntune_builtin_quant_pass_avx512
#include "builtin_quant_wide.h"
