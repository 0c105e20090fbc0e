#include "layers/inner_product/inner_product_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

using gpu::Trans;

// The same products as the CPU code, by cuBLAS; the bias (and a fused ReLU) in one pass after.
template <typename T>
void IpForward(const T* bottom, const T* weight, const T* bias, T* top, int m, int n, int k,
               bool transpose, bool relu, T slope) {
  gpu::Gemm<T>(Trans::kNo, transpose ? Trans::kNo : Trans::kYes, m, n, k, T(1), bottom, weight,
               T(0), top);
  gpu::AddChannelBias<T>(m, n, 1, bias, relu, slope, top);
}

}  // namespace

void InnerProductLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(
      dtype(), T,
      IpForward<T>(bottom[0]->gpu_data<T>(), blobs_[0]->gpu_data<T>(),
                   bias_term_ ? blobs_[1]->gpu_data<T>() : nullptr, top[0]->mutable_gpu_data<T>(),
                   M_, N_, K_, transpose_, fused_relu(), static_cast<T>(fused_relu_slope())));
}

void InnerProductLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    if (param_propagate_down(0)) {
      const T* bottom_data = bottom[0]->gpu_data<T>();
      T* weight_diff = blobs_[0]->mutable_gpu_diff<T>();
      if (transpose_)
        gpu::Gemm<T>(Trans::kYes, Trans::kNo, K_, N_, M_, T(1), bottom_data, top_diff, T(1),
                     weight_diff);
      else
        gpu::Gemm<T>(Trans::kYes, Trans::kNo, N_, K_, M_, T(1), top_diff, bottom_data, T(1),
                     weight_diff);
    }
    if (bias_term_ && param_propagate_down(1))
      gpu::Gemv<T>(Trans::kYes, M_, N_, T(1), top_diff, bias_multiplier_.gpu_data<T>(), T(1),
                   blobs_[1]->mutable_gpu_diff<T>());
    if (propagate_down[0])
      gpu::Gemm<T>(Trans::kNo, transpose_ ? Trans::kYes : Trans::kNo, M_, K_, N_, T(1), top_diff,
                   blobs_[0]->gpu_data<T>(), T(0), bottom[0]->mutable_gpu_diff<T>());
  });
}

}  // namespace crema
