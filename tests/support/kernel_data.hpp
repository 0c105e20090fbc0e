#pragma once
// Inputs for the tests of crema's CPU kernels (tests/math): random floats, and where an element
// of a batch x channels x height x width tensor lies in oneDNN's channel-blocked layout.
#include <cstddef>
#include <random>
#include <vector>

namespace crema::testing {

// n floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> RandomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

// The index of (n, c, h, w) in nChw16c.
inline size_t Blocked16(int n, int c, int h, int w, int channels, int height, int width) {
  return ((static_cast<size_t>(n) * (channels / 16) + c / 16) * height + h) * width * 16 +
         static_cast<size_t>(w) * 16 + c % 16;
}

}  // namespace crema::testing
