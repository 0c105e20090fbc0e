#include "layers/eltwise/eltwise_layer.hpp"
#include "math/math_gpu.hpp"

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
      case EltwiseParameter::SUM:
        gpu::Set<T>(count, T(0), top_data);
        for (size_t i = 0; i < bottom.size(); ++i)
          gpu::Axpy<T>(count, static_cast<T>(coeffs_[i]), bottom[i]->gpu_data<T>(), top_data);
        break;
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
