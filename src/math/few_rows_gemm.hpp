#pragma once
// y = x * w^T for a few rows of x: the inner product's forward at the batch sizes of inference and
// small-batch training (x: m x k, w: n x k, both row-major, as Caffe stores InnerProduct weights).
//
// A BLAS sgemm packs w before it multiplies: for m = 16 and CaffeNet's fc6 (k = 9216, n = 4096)
// that is a second pass over 151 MB, and OpenBLAS then runs at a third of the FP32 peak. Here
// w streams from memory once, in tiles of a few rows whose dot products with a few rows of x are
// accumulated in vector registers (one lane per k mod the vector width, reduced in lane order at
// the end), so each output's sum has one order for a given k and instruction set: the result
// does not depend on the thread count or on where the output sits in a tile.
namespace crema::cpu {

// The most rows of x the kernel takes; above it a packed sgemm reuses each block of w enough.
constexpr int kFewRowsGemmMaxRows = 64;

// Whether GemmFewRows runs its own kernel for m rows on this CPU (AVX2 + FMA or AVX-512, and
// 1 <= m <= kFewRowsGemmMaxRows); otherwise it calls the BLAS sgemm.
bool FewRowsGemmApplies(int m);

// y (m x n) = x (m x k) * w^T (w: n x k); y is overwritten. Parallel over n with OpenMP.
void GemmFewRows(int m, int n, int k, const float* x, const float* w, float* y);

// The inner product's backward for the same few rows, in one pass over w and dw:
//   dw (n x k) = dy^T (dy: m x n) * x, added to dw when `accumulate`, else overwriting it;
//   dx (m x k) = dy * w, overwritten.
// Either output may be null (then x, or w, may be too). Two sgemms would read w for dx and write
// dw, each packing its operands first (for CaffeNet's fc6: four passes over 151 MB); here columns
// of w, dw, x and dx are taken a block at a time (x's and dx's blocks stay in L1) and each row of
// w is read once and each of dw written once. dx's outputs sum over w's rows in their order and
// dw's over x's rows in theirs, so the bits do not depend on the thread count (parallel over
// column blocks with OpenMP). Falls back to the BLAS where FewRowsGemmApplies(m) is false.
//
// With `step` (dw set, not accumulating) it also applies plain SGD's step to w (cpu::SgdL2Step on
// each block of dw as it is written, while that is in cache: the solver's bits without its pass
// over w, dw and the history). dx's block of columns reads w before its step.
struct FewRowsSgdStep {
  float rate, momentum, decay;
  float* weights;  // w itself, written
  float* history;  // n x k
};
void GemmFewRowsBackward(int m, int n, int k, const float* dy, const float* x, const float* w,
                         float* dw, bool accumulate, float* dx,
                         const FewRowsSgdStep* step = nullptr);

}  // namespace crema::cpu
