#pragma once
// What vector instructions this CPU (and the OS) gives crema's own kernels, detected once with
// CPUID. crema is built for the baseline x86-64 (SSE2) so that one binary runs anywhere; the hot
// loops that gain from wider vectors are compiled a second and third time with
// __attribute__((target(...))) and picked at run time by CpuIsaLevel() (the depthwise
// convolution's 3x3 planes, the F16C conversions of math/convert.cpp).
namespace crema {

enum class CpuIsa {
  kBaseline = 0,  // SSE2 (any x86-64, or another architecture)
  kAvx2Fma = 1,   // AVX2 + FMA (x86-64-v3: Haswell, Zen and later)
  kAvx512 = 2,    // AVX-512 F (Skylake-X, Zen 4 and later)
};

// The best level of this CPU, at most the limit below.
CpuIsa CpuIsaLevel();
// Tests run each level's kernels on a machine that has the higher ones: the level CpuIsaLevel
// returns is min(detected, limit) (default: no limit).
void SetCpuIsaLimit(CpuIsa limit);
const char* CpuIsaName(CpuIsa isa);  // "sse2", "avx2", "avx512"

// F16C (half <-> float conversions, with AVX).
bool CpuHasF16c();

}  // namespace crema
