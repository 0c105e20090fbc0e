#include "layers/eltwise/eltwise_layer.hpp"
#include "math/channel_gpu.cuh"

namespace crema {
namespace {

// Folds bottom `index` into the running maximum. The first two bottoms are compared strictly
// (a tie goes to bottom 1, as Caffe); `mask` holds the winning bottom as a small exact integer.
template <typename T>
__global__ void MaxForward(int64_t n, const T* a, const T* b, int index, T* y, T* mask) {
  CREMA_CUDA_KERNEL_LOOP(j, n) {
    if (index == 0) {
      const bool first = a[j] > b[j];
      y[j] = first ? a[j] : b[j];
      mask[j] = first ? T(0) : T(1);
    } else if (b[j] > y[j]) {
      y[j] = b[j];
      mask[j] = static_cast<T>(index);
    }
  }
}

// y = (i == 0 ? 0 : y) + coeff * x, then Caffe's ReLU when relu (the last bottom of a fused SUM).
template <typename T>
__global__ void SumStep(int64_t n, const T* x, T coeff, bool first, bool relu, T slope, T* y) {
  CREMA_CUDA_KERNEL_LOOP(j, n) {
    const T sum = (first ? T(0) : y[j]) + coeff * x[j];
    y[j] = relu ? gpu::ReLUForwardValue(sum, slope) : sum;
  }
}

// Two bottoms with coefficients 1 (ResNet's shortcut) in one pass: (0 + a) + b, as the CPU.
template <typename T>
__global__ void SumOfTwo(int64_t n, const T* a, const T* b, bool relu, T slope, T* y) {
  CREMA_CUDA_KERNEL_LOOP(j, n) {
    const T sum = (T(0) + a[j]) + b[j];
    y[j] = relu ? gpu::ReLUForwardValue(sum, slope) : sum;
  }
}

template <typename T>
__global__ void MaxBackward(int64_t n, const T* dy, const T* mask, int index, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(j, n) { dx[j] = static_cast<int>(mask[j]) == index ? dy[j] : T(0); }
}

}  // namespace

void EltwiseLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = top[0]->count();
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    T* top_data = top[0]->mutable_gpu_data<T>();
    switch (op_) {
      case EltwiseParameter::PROD:
        gpu::Mul<T>(count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), top_data);
        for (size_t i = 2; i < bottom.size(); ++i)
          gpu::Mul<T>(count, top_data, bottom[i]->gpu_data<T>(), top_data);
        break;
      case EltwiseParameter::SUM: {
        if (count == 0) break;
        const T slope = static_cast<T>(fused_relu_slope());
        if (bottom.size() == 2 && coeffs_[0] == 1.0 && coeffs_[1] == 1.0) {
          SumOfTwo<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
              count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), fused_relu(), slope,
              top_data);
        } else {
          for (size_t i = 0; i < bottom.size(); ++i)
            SumStep<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
                count, bottom[i]->gpu_data<T>(), static_cast<T>(coeffs_[i]), i == 0,
                fused_relu() && i + 1 == bottom.size(), slope, top_data);
        }
        gpu::CheckLaunch("Eltwise SUM forward");
        break;
      }
      case EltwiseParameter::MAX: {
        max_idx_gpu_.set_dtype(top[0]->dtype());
        max_idx_gpu_.ReshapeLike(*top[0]);
        if (count == 0) break;
        T* mask = max_idx_gpu_.mutable_gpu_data<T>();
        MaxForward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
            count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), 0, top_data, mask);
        for (size_t i = 2; i < bottom.size(); ++i)
          MaxForward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
              count, nullptr, bottom[i]->gpu_data<T>(), static_cast<int>(i), top_data, mask);
        gpu::CheckLaunch("Eltwise MAX forward");
        break;
      }
    }
    // A fused ReLU: in the SUM pass; after the others.
    if (fused_relu() && op_ != EltwiseParameter::SUM)
      gpu::ReLUInPlace<T>(count, static_cast<T>(fused_relu_slope()), top_data);
  });
}

void EltwiseLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t count = top[0]->count();
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    const T* top_data = top[0]->gpu_data<T>();
    const T* top_diff = top[0]->gpu_diff<T>();
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (!propagate_down[i]) continue;
      T* bottom_diff = bottom[i]->mutable_gpu_diff<T>();
      switch (op_) {
        case EltwiseParameter::PROD:
          if (stable_prod_grad_) {
            bool initialized = false;
            for (size_t j = 0; j < bottom.size(); ++j) {
              if (j == i) continue;
              if (!initialized) {
                gpu::Copy<T>(count, bottom[j]->gpu_data<T>(), bottom_diff);
                initialized = true;
              } else {
                gpu::Mul<T>(count, bottom[j]->gpu_data<T>(), bottom_diff, bottom_diff);
              }
            }
          } else {
            gpu::Div<T>(count, top_data, bottom[i]->gpu_data<T>(), bottom_diff);
          }
          gpu::Mul<T>(count, bottom_diff, top_diff, bottom_diff);
          break;
        case EltwiseParameter::SUM:
          if (coeffs_[i] == 1.0)
            gpu::Copy<T>(count, top_diff, bottom_diff);
          else
            gpu::Scale<T>(count, static_cast<T>(coeffs_[i]), top_diff, bottom_diff);
          break;
        case EltwiseParameter::MAX:
          if (count == 0) break;
          MaxBackward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
              count, top_diff, max_idx_gpu_.gpu_data<T>(), static_cast<int>(i), bottom_diff);
          gpu::CheckLaunch("Eltwise MAX backward");
          break;
      }
    }
  });
}

}  // namespace crema
