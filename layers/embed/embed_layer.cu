#include <algorithm>

#include "layers/embed/embed_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// The host has checked the indices (ReadIndices); the kernels read them from the bottom on the
// device. top row n = weight row index[n] (+ bias), as the CPU's copy-then-Axpy.
template <typename T, typename I>
__global__ void EmbedForward(int64_t n, int num_output, const I* index, const T* weight,
                             const T* bias, T* top) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const int64_t row = static_cast<int64_t>(index[i / num_output]);
    const int j = static_cast<int>(i % num_output);
    const T value = weight[row * num_output + j];
    top[i] = bias ? value + bias[j] : value;
  }
}

// One thread per (used row, column): adds that row's top diffs in bottom order, as the CPU's
// Axpy loop does, so the sums (and their order) are the CPU's and no atomics are needed.
// table = [rows (U), begins (U + 1), positions (M)], the positions sorted by (row, position).
template <typename T>
__global__ void EmbedWeightBackward(int64_t n, int num_output, int64_t num_rows,
                                    const double* table, const T* top_diff, T* weight_diff) {
  const double* begins = table + num_rows;
  const double* positions = begins + num_rows + 1;
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const int64_t u = i / num_output;
    const int j = static_cast<int>(i % num_output);
    T* out = weight_diff + static_cast<int64_t>(table[u]) * num_output + j;
    T sum = *out;
    const int64_t end = static_cast<int64_t>(begins[u + 1]);
    for (int64_t p = static_cast<int64_t>(begins[u]); p < end; ++p)
      sum += top_diff[static_cast<int64_t>(positions[p]) * num_output + j];
    *out = sum;
  }
}

// Fills `table` (see EmbedWeightBackward) from the indices; returns the number of rows used.
int64_t RowTable(const std::vector<int>& indices, int input_dim, Blob* table) {
  std::vector<int64_t> counts(input_dim + 1, 0);
  for (int row : indices) ++counts[row + 1];
  for (int r = 0; r < input_dim; ++r) counts[r + 1] += counts[r];  // counts[r]: first slot of r
  std::vector<double> positions(indices.size());
  std::vector<int64_t> next(counts.begin(), counts.end() - 1);
  for (size_t n = 0; n < indices.size(); ++n) positions[next[indices[n]]++] = double(n);
  std::vector<double> rows, begins;
  for (int r = 0; r < input_dim; ++r)
    if (counts[r + 1] > counts[r]) {
      rows.push_back(r);
      begins.push_back(double(counts[r]));
    }
  begins.push_back(double(indices.size()));
  table->Reshape({static_cast<int>(rows.size() + begins.size() + positions.size())});
  double* out = table->mutable_cpu_data<double>();
  for (const auto* part : {&rows, &begins, &positions})
    out = std::copy(part->begin(), part->end(), out);
  return static_cast<int64_t>(rows.size());
}

}  // namespace

void EmbedLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  ReadIndices(*bottom[0]);
  const int64_t n = top[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), I, {
      EmbedForward<T, I><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, num_output_, bottom[0]->gpu_data<I>(), blobs_[0]->gpu_data<T>(),
          bias_term_ ? blobs_[1]->gpu_data<T>() : nullptr, top[0]->mutable_gpu_data<T>());
    });
  });
  gpu::CheckLaunch("Embed forward");
}

void EmbedLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[0], "cannot backpropagate to the indices (bottom 0)");
  const int64_t count = bottom[0]->count();
  if (count == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    if (param_propagate_down(0)) {
      ReadIndices(*bottom[0]);
      const int64_t rows = RowTable(indices_, input_dim_, &gpu_rows_);
      const int64_t n = rows * num_output_;
      EmbedWeightBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, num_output_, rows, gpu_rows_.gpu_data<double>(), top_diff,
          blobs_[0]->mutable_gpu_diff<T>());
      gpu::CheckLaunch("Embed weight backward");
    }
    if (bias_term_ && param_propagate_down(1))
      gpu::ReduceByAxis<T>(count, num_output_, 1, top_diff, nullptr, true,
                           blobs_[1]->mutable_gpu_diff<T>());
  });
}

}  // namespace crema
