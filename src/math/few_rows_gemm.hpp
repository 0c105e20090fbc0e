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

}  // namespace crema::cpu
