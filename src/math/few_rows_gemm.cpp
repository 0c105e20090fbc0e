#include "math/few_rows_gemm.hpp"

#include <algorithm>
#include <cstdint>

#include "crema/error.hpp"
#include "math/blas_setup.hpp"
#include "math/cpu_isa.hpp"
#include "math/math.hpp"
#include "math/sgd_step.hpp"

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
// k % V last values. This call adds columns [k0, k1) (whole vectors): its accumulators start
// from zero (k0 = 0) or from `saved`, and go back there unless k1 is the last whole vector, when
// the sums are reduced into y. With `prefetch` it asks for w's rows that many floats ahead (V
// floats, a cache line, per row and step). Always inlined into the AVX2 and AVX-512 entry points
// below, where the vector type compiles to ymm/zmm registers.
template <int V, int MT, int NT>
__attribute__((always_inline)) inline void Tile(const float* x, const float* w, float* y, int k,
                                                int ldy, int k0, int k1,
                                                typename Vec<V>::type* saved, int prefetch) {
  using V_t = typename Vec<V>::type;
  V_t acc[MT][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MT; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) acc[i][j] = k0 == 0 ? V_t{} : saved[i * NT + j];
  }
  for (int kk = k0; kk < k1; kk += V) {
    V_t wv[NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const float* row = w + int64_t{j} * k + kk;
      wv[j] = *reinterpret_cast<const V_t*>(row);
      if (prefetch) __builtin_prefetch(row + prefetch);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      const V_t xv = *reinterpret_cast<const V_t*>(x + int64_t{i} * k + kk);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) acc[i][j] += xv * wv[j];
    }
  }
  if (k1 < k - k % V) {
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) saved[i * NT + j] = acc[i][j];
    }
    return;
  }
  for (int i = 0; i < MT; ++i) {
    for (int j = 0; j < NT; ++j) {
      float sum = 0;
      for (int l = 0; l < V; ++l) sum += acc[i][j][l];
      for (int t = k1; t < k; ++t) sum += x[int64_t{i} * k + t] * w[int64_t{j} * k + t];
      y[int64_t{i} * ldy + j] = sum;
    }
  }
}

// All m rows of x against NT rows of w, 256 columns at a time so that those of w's rows and of
// x's stay in L1 while groups of 4 rows of x (then 3, 2 or 1) pass over them; the accumulators
// wait in `saved` (m x NT vectors) between the column blocks. The sums do not change. The first
// group prefetches w's next block: the hardware's prefetcher alone left the loads of w waiting on
// memory (fc6's forward 19 ms, twice its FMA time).
template <int V, int NT>
__attribute__((always_inline)) inline void RowsOfX(int m, int k, const float* x, const float* w,
                                                   float* y, int ldy,
                                                   typename Vec<V>::type* saved) {
  constexpr int kColumns = 256;
  const int kv = k - k % V;
  int k0 = 0;
  do {
    const int k1 = std::min(kv, k0 + kColumns);
    int i = 0;
    for (; i + 4 <= m; i += 4) {
      Tile<V, 4, NT>(x + int64_t{i} * k, w, y + int64_t{i} * ldy, k, ldy, k0, k1, saved + i * NT,
                     i == 0 ? kColumns : 0);
    }
    const float* xi = x + int64_t{i} * k;
    float* yi = y + int64_t{i} * ldy;
    switch (m - i) {
      case 3:
        Tile<V, 3, NT>(xi, w, yi, k, ldy, k0, k1, saved + i * NT, i == 0 ? kColumns : 0);
        break;
      case 2:
        Tile<V, 2, NT>(xi, w, yi, k, ldy, k0, k1, saved + i * NT, i == 0 ? kColumns : 0);
        break;
      case 1:
        Tile<V, 1, NT>(xi, w, yi, k, ldy, k0, k1, saved + i * NT, i == 0 ? kColumns : 0);
        break;
      default:
        break;
    }
    k0 = k1;
  } while (k0 < kv);
}

// Rows [n0, n1) of w: NT at a time, then one at a time.
template <int V, int NT>
__attribute__((always_inline)) inline void Block(int m, int k, const float* x, const float* w,
                                                 float* y, int n, int n0, int n1) {
  typename Vec<V>::type saved[kFewRowsGemmMaxRows * NT];
  int j = n0;
  for (; j + NT <= n1; j += NT) RowsOfX<V, NT>(m, k, x, w + int64_t{j} * k, y + j, n, saved);
  for (; j < n1; ++j) RowsOfX<V, 1>(m, k, x, w + int64_t{j} * k, y + j, n, saved);
}

// ---- backward: dw = dy^T x (+ dw), dx = dy w ----

// v = V copies of s (an output argument: returning a vector type from a function compiled for
// the baseline changes the ABI).
template <int V>
__attribute__((always_inline)) inline void Broadcast(float s, typename Vec<V>::type* v) {
#pragma GCC unroll 16
  for (int l = 0; l < V; ++l) (*v)[l] = s;
}

// Columns [c0, c1) (whole vectors) of rows [j, j + JB) of w and dw against all m rows of dy, x
// and dx: dw's vectors start from dw (accumulate) or zero and add x's rows in order, in
// registers; dx's (holding the sum over w's rows before j) add the JB rows in order. Then the
// SGD step, if any, on those rows' columns, whose dw is in cache.
template <int V, int JB, bool kDw, bool kDx>
__attribute__((always_inline)) inline void BackwardRows(int m, int n, int k, int j, int c0, int c1,
                                                        const float* dy, const float* x,
                                                        const float* w, float* dw, bool accumulate,
                                                        float* dx, const FewRowsSgdStep* step) {
  using V_t = typename Vec<V>::type;
  const float* wr[JB];
  float* dwr[JB];
#pragma GCC unroll 8
  for (int jj = 0; jj < JB; ++jj) {
    wr[jj] = w + int64_t{j + jj} * k;
    dwr[jj] = kDw ? dw + int64_t{j + jj} * k : nullptr;
  }
  for (int c = c0; c < c1; c += V) {
    V_t wv[JB], dwv[JB];
#pragma GCC unroll 8
    for (int jj = 0; jj < JB; ++jj) {
      if constexpr (kDx) wv[jj] = *reinterpret_cast<const V_t*>(wr[jj] + c);
      if constexpr (kDw) dwv[jj] = accumulate ? *reinterpret_cast<const V_t*>(dwr[jj] + c) : V_t{};
    }
    for (int i = 0; i < m; ++i) {
      const float* dyi = dy + int64_t{i} * n + j;
      V_t b[JB];
#pragma GCC unroll 8
      for (int jj = 0; jj < JB; ++jj) Broadcast<V>(dyi[jj], &b[jj]);
      if constexpr (kDx) {
        V_t* out = reinterpret_cast<V_t*>(dx + int64_t{i} * k + c);
        V_t sum = *out;
#pragma GCC unroll 8
        for (int jj = 0; jj < JB; ++jj) sum += wv[jj] * b[jj];
        *out = sum;
      }
      if constexpr (kDw) {
        const V_t xv = *reinterpret_cast<const V_t*>(x + int64_t{i} * k + c);
#pragma GCC unroll 8
        for (int jj = 0; jj < JB; ++jj) dwv[jj] += xv * b[jj];
      }
    }
    if constexpr (kDw) {
#pragma GCC unroll 8
      for (int jj = 0; jj < JB; ++jj) *reinterpret_cast<V_t*>(dwr[jj] + c) = dwv[jj];
    }
  }
  if (step) {  // every use of these rows' columns by dx is behind
    for (int jj = 0; jj < JB; ++jj) {
      const int64_t row = int64_t{j + jj} * k;
      SgdL2StepSerial<float>(c1 - c0, step->rate, step->momentum, step->decay,
                             step->weights + row + c0, dw + row + c0, step->history + row + c0);
    }
  }
}

// Columns [c0, c1) of every output: dx's block zeroed, then w's rows JB at a time and one at a
// time (dx adds them in row order either way).
template <int V, int JB, bool kDw, bool kDx>
__attribute__((always_inline)) inline void BackwardColumns(int m, int n, int k, int c0, int c1,
                                                           const float* dy, const float* x,
                                                           const float* w, float* dw,
                                                           bool accumulate, float* dx,
                                                           const FewRowsSgdStep* step) {
  if constexpr (kDx) {
    for (int i = 0; i < m; ++i) std::fill(dx + int64_t{i} * k + c0, dx + int64_t{i} * k + c1, 0.f);
  }
  int j = 0;
  for (; j + JB <= n; j += JB)
    BackwardRows<V, JB, kDw, kDx>(m, n, k, j, c0, c1, dy, x, w, dw, accumulate, dx, step);
  for (; j < n; ++j)
    BackwardRows<V, 1, kDw, kDx>(m, n, k, j, c0, c1, dy, x, w, dw, accumulate, dx, step);
}

template <int V, int JB>
__attribute__((always_inline)) inline void BackwardBlock(int m, int n, int k, int c0, int c1,
                                                         const float* dy, const float* x,
                                                         const float* w, float* dw, bool accumulate,
                                                         float* dx, const FewRowsSgdStep* step) {
  if (dw && dx)
    BackwardColumns<V, JB, true, true>(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
  else if (dw)
    BackwardColumns<V, JB, true, false>(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
  else
    BackwardColumns<V, JB, false, true>(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
}

#if defined(__x86_64__)
// 32 zmm registers: 8 rows of w, 8 of dw, 8 broadcasts of dy, a row of x and one of dx.
__attribute__((target("avx512f"))) void BackwardAvx512(int m, int n, int k, int c0, int c1,
                                                       const float* dy, const float* x,
                                                       const float* w, float* dw, bool accumulate,
                                                       float* dx, const FewRowsSgdStep* step) {
  BackwardBlock<16, 8>(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
}
// 16 ymm registers: 4 of each.
__attribute__((target("avx2,fma"))) void BackwardAvx2(int m, int n, int k, int c0, int c1,
                                                      const float* dy, const float* x,
                                                      const float* w, float* dw, bool accumulate,
                                                      float* dx, const FewRowsSgdStep* step) {
  BackwardBlock<8, 4>(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
}

// ---- forward ----
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

void GemmFewRowsBackward(int m, int n, int k, const float* dy, const float* x, const float* w,
                         float* dw, bool accumulate, float* dx, const FewRowsSgdStep* step) {
  CREMA_ASSERT(!step || (dw && !accumulate && step->weights == w), "SGD step on an added gradient");
  if (!dw && !dx) return;
  if (!FewRowsGemmApplies(m) || n <= 0 || k <= 0) {
    if (dw) Gemm<float>(Trans::kYes, Trans::kNo, n, k, m, 1.f, dy, x, accumulate ? 1.f : 0.f, dw);
    if (dx) Gemm<float>(Trans::kNo, Trans::kNo, m, k, n, 1.f, dy, w, 0.f, dx);
    if (step)
      SgdL2Step<float>(int64_t{n} * k, step->rate, step->momentum, step->decay, step->weights, dw,
                       step->history);
    return;
  }
#if defined(__x86_64__)
  const bool avx512 = CpuIsaLevel() == CpuIsa::kAvx512;
  const int v = avx512 ? 16 : 8;
  const int kv = k - k % v;  // whole vectors; the last columns below
  // Column blocks whose x and dx (m rows each) stay in L2 while w's rows stream past, row by
  // row, at least one per thread. Each output's sum has one order in any block, so the split
  // does not change the bits.
  constexpr int64_t kL2Bytes = 512 << 10;
  const int64_t work = int64_t{m} * n * k;
  const int threads = work > (int64_t{1} << 20) ? std::max(1, CpuThreads()) : 1;
  int64_t blocks =
      std::max<int64_t>(1, (int64_t{m} * kv * 2 * sizeof(float) + kL2Bytes - 1) / kL2Bytes);
  blocks = (blocks + threads - 1) / threads * threads;
  const int columns = static_cast<int>((kv / v + blocks - 1) / blocks * v);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t b = 0; b < blocks; ++b) {
    const int c0 = static_cast<int>(std::min<int64_t>(kv, b * columns));
    const int c1 = std::min(kv, c0 + columns);
    if (c0 >= c1) continue;
    if (avx512)
      BackwardAvx512(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
    else
      BackwardAvx2(m, n, k, c0, c1, dy, x, w, dw, accumulate, dx, step);
  }
  for (int c = kv; c < k; ++c) {
    if (dw) {
      for (int j = 0; j < n; ++j) {
        float sum = accumulate ? dw[int64_t{j} * k + c] : 0.f;
        for (int i = 0; i < m; ++i) sum += dy[int64_t{i} * n + j] * x[int64_t{i} * k + c];
        dw[int64_t{j} * k + c] = sum;
      }
    }
    if (dx) {
      for (int i = 0; i < m; ++i) {
        float sum = 0.f;
        for (int j = 0; j < n; ++j) sum += dy[int64_t{i} * n + j] * w[int64_t{j} * k + c];
        dx[int64_t{i} * k + c] = sum;
      }
    }
    if (step) {  // after dx's use of w's column
      for (int j = 0; j < n; ++j) {
        const int64_t at = int64_t{j} * k + c;
        SgdL2StepSerial<float>(1, step->rate, step->momentum, step->decay, step->weights + at,
                               dw + at, step->history + at);
      }
    }
  }
#endif
}

}  // namespace crema::cpu
