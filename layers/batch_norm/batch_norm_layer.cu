#include "layers/batch_norm/batch_norm_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Rows of the per-channel statistics blob (double, (kStatRows, C)).
constexpr int kMean = 0, kInvStd = 1, kMeanDy = 2, kMeanDyY = 3, kStatRows = 4;

// Sums `value` over a block of gpu::kThreads threads in a fixed tree order (deterministic); the
// result is valid in thread 0. `shared` holds gpu::kThreads doubles.
__device__ double BlockSum(double value, double* shared) {
  __syncthreads();  // a previous BlockSum's readers are done with `shared`
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = gpu::kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

// One block per channel c over the m = num * spatial values x[(n * C + c) * spatial + i]: the
// batch mean and biased variance in double (two passes, as the CPU), 1 / sqrt(var + eps), and
// the moving averages updated as the CPU does, in T.
template <typename T>
__global__ void BatchStats(const T* x, int num, int channels, int64_t spatial, double eps, T f,
                           double* stats, T* moving_mean, T* moving_var, T* factor) {
  __shared__ double shared[gpu::kThreads];
  __shared__ double mean_shared;
  const int c = blockIdx.x;
  const int64_t m = static_cast<int64_t>(num) * spatial;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x)
    sum += x[((j / spatial) * channels + c) * spatial + j % spatial];
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) mean_shared = m > 0 ? sum / m : 0;
  __syncthreads();
  const double mean = mean_shared;
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const double d = x[((j / spatial) * channels + c) * spatial + j % spatial] - mean;
    sq += d * d;
  }
  sq = BlockSum(sq, shared);
  if (threadIdx.x != 0) return;
  const double var = m > 0 ? sq / m : 0;
  stats[kMean * channels + c] = mean;
  stats[kInvStd * channels + c] = 1 / sqrt(var + eps);
  const double correction = m > 1 ? static_cast<double>(m) / (m - 1) : 1.0;
  moving_mean[c] = static_cast<T>(mean) + f * moving_mean[c];
  moving_var[c] = static_cast<T>(correction * var) + f * moving_var[c];
  if (c == 0) factor[0] = factor[0] * f + T(1);
}

// mean = blobs[0] / blobs[2], var = blobs[1] / blobs[2] (0 when blobs[2] is 0), per channel.
template <typename T>
__global__ void GlobalStats(int channels, const T* moving_mean, const T* moving_var,
                            const T* factor, double eps, double* stats) {
  CREMA_CUDA_KERNEL_LOOP(c, channels) {
    const double stored = factor[0];
    const double scale = stored == 0 ? 0 : 1 / stored;
    const double var = scale * moving_var[c];
    stats[kMean * channels + c] = scale * moving_mean[c];
    stats[kInvStd * channels + c] = 1 / sqrt(var + eps);
  }
}

// y = (x - mean) * inv_std, written to the top and kept in x_norm (when not null); in place safe.
template <typename T>
__global__ void Normalize(int64_t n, int channels, int64_t spatial, const double* stats, const T* x,
                          T* y, T* x_norm) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int c = static_cast<int>((index / spatial) % channels);
    const T mu = static_cast<T>(stats[kMean * channels + c]);
    const T inv_std = static_cast<T>(stats[kInvStd * channels + c]);
    const T value = (x[index] - mu) * inv_std;
    y[index] = value;
    if (x_norm != nullptr) x_norm[index] = value;
  }
}

// One block per channel: mean(dy) and mean(dy * y) in double.
template <typename T>
__global__ void GradStats(const T* dy, const T* y, int num, int channels, int64_t spatial,
                          double* stats) {
  __shared__ double shared[gpu::kThreads];
  const int c = blockIdx.x;
  const int64_t m = static_cast<int64_t>(num) * spatial;
  double sum_dy = 0, sum_dy_y = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t k = ((j / spatial) * channels + c) * spatial + j % spatial;
    sum_dy += dy[k];
    sum_dy_y += static_cast<double>(dy[k]) * y[k];
  }
  sum_dy = BlockSum(sum_dy, shared);
  if (threadIdx.x == 0) stats[kMeanDy * channels + c] = sum_dy / m;
  sum_dy_y = BlockSum(sum_dy_y, shared);
  if (threadIdx.x == 0) stats[kMeanDyY * channels + c] = sum_dy_y / m;
}

// dx = (dy - mean(dy) - y * mean(dy * y)) * inv_std (batch statistics) or dy * inv_std (global);
// in place safe.
template <typename T>
__global__ void NormalizeBackward(int64_t n, int channels, int64_t spatial, bool global,
                                  const double* stats, const T* dy, const T* y, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int c = static_cast<int>((index / spatial) % channels);
    const T inv_std = static_cast<T>(stats[kInvStd * channels + c]);
    if (global) {
      dx[index] = dy[index] * inv_std;
    } else {
      const T mean_dy = static_cast<T>(stats[kMeanDy * channels + c]);
      const T mean_dy_y = static_cast<T>(stats[kMeanDyY * channels + c]);
      dx[index] = (dy[index] - mean_dy - y[index] * mean_dy_y) * inv_std;
    }
  }
}

}  // namespace

void BatchNormLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (channels_ == 0) return;
  stats_gpu_.Reshape({kStatRows, channels_});
  double* stats = stats_gpu_.mutable_gpu_data<double>();
  const int64_t n = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* bottom_data = bottom[0]->gpu_data<T>();
    if (use_global_stats_) {
      GlobalStats<T><<<gpu::Blocks(channels_), gpu::kThreads, 0, gpu::Stream()>>>(
          channels_, blobs_[0]->gpu_data<T>(), blobs_[1]->gpu_data<T>(), blobs_[2]->gpu_data<T>(),
          eps_, stats);
    } else {
      BatchStats<T><<<channels_, gpu::kThreads, 0, gpu::Stream()>>>(
          bottom_data, num_, channels_, spatial_dim_, eps_,
          static_cast<T>(moving_average_fraction_), stats, blobs_[0]->mutable_gpu_data<T>(),
          blobs_[1]->mutable_gpu_data<T>(), blobs_[2]->mutable_gpu_data<T>());
    }
    gpu::CheckLaunch("BatchNorm statistics");
    if (n > 0) {
      Normalize<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, channels_, spatial_dim_, stats, bottom_data, top[0]->mutable_gpu_data<T>(),
          use_global_stats_ ? nullptr : x_norm_.mutable_gpu_data<T>());
      gpu::CheckLaunch("BatchNorm forward");
    }
  });
}

void BatchNormLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  // The statistics get no gradient, whatever param_propagate_down says.
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  double* stats = stats_gpu_.mutable_gpu_data<double>();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    // In place, top diff and bottom diff are one buffer: the sums are taken in a kernel of their
    // own before any diff is written.
    const T* top_diff = top[0]->gpu_diff<T>();
    const T* y = use_global_stats_ ? nullptr : x_norm_.gpu_data<T>();
    if (!use_global_stats_) {
      GradStats<T><<<channels_, gpu::kThreads, 0, gpu::Stream()>>>(top_diff, y, num_, channels_,
                                                                   spatial_dim_, stats);
      gpu::CheckLaunch("BatchNorm gradient statistics");
    }
    NormalizeBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, channels_, spatial_dim_, use_global_stats_, stats, top_diff, y,
        bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("BatchNorm backward");
  });
}

}  // namespace crema
