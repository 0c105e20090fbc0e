#include "math/cpu_isa.hpp"

#include <algorithm>
#include <atomic>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace crema {
namespace {

struct Features {
  bool f16c = false;
  CpuIsa isa = CpuIsa::kBaseline;
};

#if defined(__x86_64__)
// CPUID leaves 1 and 7 and the register state the OS saves (XCR0): AVX needs the SSE and AVX
// state (bits 1, 2), AVX-512 the opmask and upper ZMM state too (bits 5-7). (clang's
// __builtin_cpu_supports does not know every feature, e.g. "f16c".)
Features Detect() {
  Features f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return f;
  const bool osxsave_avx = (ecx & (1u << 27)) != 0 && (ecx & (1u << 28)) != 0;
  if (!osxsave_avx) return f;
  const bool fma = (ecx & (1u << 12)) != 0;
  const bool f16c = (ecx & (1u << 29)) != 0;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 6u) != 6u) return f;
  f.f16c = f16c;
  unsigned leaf7_ebx = 0;
  if (__get_cpuid_count(7, 0, &eax, &leaf7_ebx, &ecx, &edx) == 0) return f;
  const bool avx2 = (leaf7_ebx & (1u << 5)) != 0;
  const bool avx512f = (leaf7_ebx & (1u << 16)) != 0 && (xcr0_low & 0xE0u) == 0xE0u;
  if (avx2 && fma) f.isa = avx512f ? CpuIsa::kAvx512 : CpuIsa::kAvx2Fma;
  return f;
}
#else
Features Detect() { return {}; }
#endif

const Features& Detected() {
  static const Features features = Detect();
  return features;
}

std::atomic<int> g_limit{static_cast<int>(CpuIsa::kAvx512)};

}  // namespace

CpuIsa CpuIsaLevel() {
  return static_cast<CpuIsa>(std::min(static_cast<int>(Detected().isa), g_limit.load()));
}

void SetCpuIsaLimit(CpuIsa limit) { g_limit.store(static_cast<int>(limit)); }

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2Fma:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    default:
      return "sse2";
  }
}

bool CpuHasF16c() { return Detected().f16c; }

}  // namespace crema
