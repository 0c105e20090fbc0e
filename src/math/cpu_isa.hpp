#pragma once
// What vector instructions this CPU (and the OS) gives crema's own kernels, detected once with
// CPUID. crema is built for the baseline x86-64 (SSE2) so that one binary runs anywhere; the hot
// loops that gain from wider vectors are compiled a second and third time with
// __attribute__((target(...))) and picked at run time by CpuIsaLevel() (RunForCpuIsa below: the
// depthwise convolution's 3x3 planes, LRN across channels; the F16C conversions of
// math/convert.cpp).
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
// SetCpuIsaLimit(limit) for a scope; at its end no limit again.
class ScopedCpuIsaLimit {
 public:
  explicit ScopedCpuIsaLimit(CpuIsa limit) { SetCpuIsaLimit(limit); }
  ~ScopedCpuIsaLimit() { SetCpuIsaLimit(CpuIsa::kAvx512); }
  ScopedCpuIsaLimit(const ScopedCpuIsaLimit&) = delete;
  ScopedCpuIsaLimit& operator=(const ScopedCpuIsaLimit&) = delete;
};
const char* CpuIsaName(CpuIsa isa);  // "sse2", "avx2", "avx512"

// F16C (half <-> float conversions, with AVX).
bool CpuHasF16c();

// Runs `body`, a lambda declared `[&]() CREMA_ISA_INLINE { ... }`, compiled for this CPU's
// level: the lambda is inlined into a copy of RunForCpuIsa's callee compiled with AVX-512 or
// AVX2 + FMA, so its loops vectorise for that level. What the body calls must be inline too
// (templates, std:: math) to benefit.
#define CREMA_ISA_INLINE __attribute__((always_inline))

namespace isa_detail {
#if defined(__x86_64__)
template <typename Body>
__attribute__((target("avx512f"))) void RunAvx512(const Body& body) {
  body();
}
template <typename Body>
__attribute__((target("avx2,fma"))) void RunAvx2(const Body& body) {
  body();
}
#endif
template <typename Body>
void RunBaseline(const Body& body) {
  body();
}
}  // namespace isa_detail

template <typename Body>
void RunForCpuIsa(const Body& body) {
#if defined(__x86_64__)
  switch (CpuIsaLevel()) {
    case CpuIsa::kAvx512:
      return isa_detail::RunAvx512(body);
    case CpuIsa::kAvx2Fma:
      return isa_detail::RunAvx2(body);
    default:
      break;
  }
#endif
  isa_detail::RunBaseline(body);
}

}  // namespace crema
