#include "math/few_rows_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "math/cpu_isa.hpp"
#include "math/math.hpp"

namespace crema::cpu {
namespace {

// A vector of V floats (GCC's vector extension), loadable from any float address.
// (A typedef in a class: GCC drops vector attributes from alias templates.)
template <int V>
struct Vec {
  typedef float type __attribute__((vector_size(V * sizeof(float)), aligned(sizeof(float))));
};

// y[i][j] = sum_k x[i][k] * w[j][k] for MT rows of x (stride k) and NT rows of w (stride k):
// MT x NT vector accumulators, lane l summing the k = l (mod V); then the lanes in order and the
// k % V last values. Always inlined into the AVX2 and AVX-512 entry points below, where the
// vector type compiles to ymm/zmm registers.
template <int V, int MT, int NT>
__attribute__((always_inline)) inline void Tile(const float* x, const float* w, float* y, int k,
                                                int ldy) {
  using V_t = typename Vec<V>::type;
  V_t acc[MT][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MT; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) acc[i][j] = V_t{};
  }
  int kk = 0;
  for (; kk + V <= k; kk += V) {
    V_t wv[NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) wv[j] = *reinterpret_cast<const V_t*>(w + int64_t{j} * k + kk);
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      const V_t xv = *reinterpret_cast<const V_t*>(x + int64_t{i} * k + kk);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < MT; ++i) {
    for (int j = 0; j < NT; ++j) {
      float sum = 0;
      for (int l = 0; l < V; ++l) sum += acc[i][j][l];
      for (int t = kk; t < k; ++t) sum += x[int64_t{i} * k + t] * w[int64_t{j} * k + t];
      y[int64_t{i} * ldy + j] = sum;
    }
  }
}

// All m rows of x against NT rows of w: groups of 4 rows of x (then 3, 2 or 1) over the same
// rows of w while those are in cache.
template <int V, int NT>
__attribute__((always_inline)) inline void RowsOfX(int m, int k, const float* x, const float* w,
                                                   float* y, int ldy) {
  int i = 0;
  for (; i + 4 <= m; i += 4) Tile<V, 4, NT>(x + int64_t{i} * k, w, y + int64_t{i} * ldy, k, ldy);
  const float* xi = x + int64_t{i} * k;
  float* yi = y + int64_t{i} * ldy;
  switch (m - i) {
    case 3:
      Tile<V, 3, NT>(xi, w, yi, k, ldy);
      break;
    case 2:
      Tile<V, 2, NT>(xi, w, yi, k, ldy);
      break;
    case 1:
      Tile<V, 1, NT>(xi, w, yi, k, ldy);
      break;
    default:
      break;
  }
}

// Rows [n0, n1) of w: NT at a time, then one at a time.
template <int V, int NT>
__attribute__((always_inline)) inline void Block(int m, int k, const float* x, const float* w,
                                                 float* y, int n, int n0, int n1) {
  int j = n0;
  for (; j + NT <= n1; j += NT) RowsOfX<V, NT>(m, k, x, w + int64_t{j} * k, y + j, n);
  for (; j < n1; ++j) RowsOfX<V, 1>(m, k, x, w + int64_t{j} * k, y + j, n);
}

#if defined(__x86_64__)
// 32 zmm registers: 4 x 4 accumulators, 4 rows of w, a row of x.
__attribute__((target("avx512f"))) void BlockAvx512(int m, int k, const float* x, const float* w,
                                                    float* y, int n, int n0, int n1) {
  Block<16, 4>(m, k, x, w, y, n, n0, n1);
}
// 16 ymm registers: 4 x 2 accumulators, 2 rows of w, a row of x.
__attribute__((target("avx2,fma"))) void BlockAvx2(int m, int k, const float* x, const float* w,
                                                   float* y, int n, int n0, int n1) {
  Block<8, 2>(m, k, x, w, y, n, n0, n1);
}
#endif

}  // namespace

bool FewRowsGemmApplies(int m) {
  return m >= 1 && m <= kFewRowsGemmMaxRows && CpuIsaLevel() != CpuIsa::kBaseline;
}

void GemmFewRows(int m, int n, int k, const float* x, const float* w, float* y) {
  if (n <= 0) return;
  if (!FewRowsGemmApplies(m) || k <= 0) {
    Gemm<float>(Trans::kNo, Trans::kYes, m, n, k, 1.f, x, w, 0.f, y);
    return;
  }
#if defined(__x86_64__)
  const bool avx512 = CpuIsaLevel() == CpuIsa::kAvx512;
  // Each output's sum has one order whatever tile computes it, so any split over w's rows gives
  // the same bits; blocks of 16 rows are whole tiles on both levels.
  constexpr int kBlock = 16;
  const int blocks = (n + kBlock - 1) / kBlock;
  const int64_t work = int64_t{m} * n * k;
#pragma omp parallel for schedule(static) if (work > (int64_t{1} << 20))
  for (int b = 0; b < blocks; ++b) {
    const int n0 = b * kBlock, n1 = std::min(n, n0 + kBlock);
    if (avx512)
      BlockAvx512(m, k, x, w, y, n, n0, n1);
    else
      BlockAvx2(m, k, x, w, y, n, n0, n1);
  }
#endif
}

}  // namespace crema::cpu
