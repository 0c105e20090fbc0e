// The pieces crema's AVX-512 blocked kernels share (math/blocked_avx512.hpp): here the ReLU on 16
// lanes, bit for bit crema's scalar one (math/activation.hpp) on the values where a shortcut
// would differ (NaN, infinities, signed zeros, denormals).
#include "math/blocked_avx512.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "math/activation.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {
namespace {

#if defined(__x86_64__)
CREMA_AVX512 void Relu16Of(const float* in, float slope, float* out) {
  _mm512_storeu_ps(out, Relu16(_mm512_loadu_ps(in), _mm512_set1_ps(slope)));
}

TEST(Relu16, EqualsTheScalarReLUBitForBit) {
  if (CpuIsaLevel() != CpuIsa::kAvx512) GTEST_SKIP() << "needs AVX-512";
  const float inf = std::numeric_limits<float>::infinity();
  const float in[16] = {-inf, -1.5f, -0.f, 0.f,      1e-40f,  -1e-40f, 3.f,   inf,
                        NAN,  -NAN,  2.5f, -3.4e38f, 3.4e38f, -1e-3f,  1e-3f, -7.f};
  for (const float slope : {0.f, 0.1f, -2.f, 1.f}) {
    float out[16];
    Relu16Of(in, slope, out);
    for (int i = 0; i < 16; ++i) {
      const float want = ReLUValue(in[i], slope);
      EXPECT_EQ(0, std::memcmp(&want, &out[i], sizeof(float)))
          << "x " << in[i] << " slope " << slope << ": " << want << " vs " << out[i];
    }
  }
}
#endif

}  // namespace
}  // namespace crema::cpu
