#include "layers/spp/spp_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Element (n, i) of a level's pooled output (dim values per image) is element
// n * row + offset + i of the top, in Forward (to_top) and Backward (from the top diff).
template <typename T>
__global__ void LevelToTop(int64_t count, int64_t dim, int64_t row, int64_t offset, const T* level,
                           T* top) {
  CREMA_CUDA_KERNEL_LOOP(index, count) {
    top[index / dim * row + offset + index % dim] = level[index];
  }
}

template <typename T>
__global__ void TopToLevel(int64_t count, int64_t dim, int64_t row, int64_t offset, const T* top,
                           T* level) {
  CREMA_CUDA_KERNEL_LOOP(index, count) {
    level[index] = top[index / dim * row + offset + index % dim];
  }
}

}  // namespace

// The Pooling levels were built on this layer's device, so they run their own GPU kernels.
void SPPLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    T* top_data = top[0]->mutable_gpu_data<T>();
    for (int level = 0; level < pyramid_height_; ++level) {
      pooling_layers_[level]->Forward({bottom[0]}, {pooled_[level].get()});
      const int64_t count = pooled_[level]->count();
      if (count == 0) continue;
      LevelToTop<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
          count, pooled_[level]->count(1), row_, offsets_[level], pooled_[level]->gpu_data<T>(),
          top_data);
      gpu::CheckLaunch("SPP forward");
    }
  });
}

void SPPLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  if (count == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    gpu::Set<T>(count, T(0), bottom[0]->mutable_gpu_diff<T>());
    level_bottom_.ShareData(*bottom[0]);
    for (int level = 0; level < pyramid_height_; ++level) {
      const int64_t level_count = pooled_[level]->count();
      if (level_count > 0) {
        TopToLevel<T><<<gpu::Blocks(level_count), gpu::kThreads, 0, gpu::Stream()>>>(
            level_count, pooled_[level]->count(1), row_, offsets_[level], top_diff,
            pooled_[level]->mutable_gpu_diff<T>());
        gpu::CheckLaunch("SPP backward");
      }
      pooling_layers_[level]->Backward({pooled_[level].get()}, {true}, {&level_bottom_});
      T* bottom_diff = bottom[0]->mutable_gpu_diff<T>();
      gpu::Add<T>(count, bottom_diff, level_bottom_.gpu_diff<T>(), bottom_diff);
    }
  });
}

}  // namespace crema
