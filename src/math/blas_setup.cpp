#include "math/blas_setup.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
char* openblas_get_corename(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace crema {

std::string OpenBlasCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

std::string BetterOpenBlasCoreType() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  std::string core = OpenBlasCoreName();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Kernel families OpenBLAS falls back to when it does not know the CPU model.
  static const std::vector<std::string> kGeneric = {
      "prescott", "core2",     "penryn", "dunnington",  "nehalem",   "generic",
      "katmai",   "northwood", "atom",   "sandybridge", "barcelona", "bulldozer"};
  const bool generic = std::find(kGeneric.begin(), kGeneric.end(), core) != kGeneric.end();
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    const bool avx512_core = core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
    if (avx512_core) return "";
    // Zen 4 has AVX-512 and OpenBLAS 0.3.21 runs it with its Zen (AVX2) kernels: keep those.
    if (!generic && core != "haswell") return "";
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && generic) return "Haswell";
  return "";
}

void SetBlasThreads(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

void SetCpuThreads(int threads) {
  if (threads <= 0) return;
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  SetBlasThreads(threads);
}

int CpuThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int BlasThreads() { return openblas_get_num_threads(); }

}  // namespace crema
