#include "layers/tile/tile_layer.hpp"
#include "math/math_gpu.hpp"
#include "math/strided_gpu.hpp"

namespace crema {
namespace {

// One thread per bottom element (o, i): the sum of its tiles' diffs, in tile order as the CPU's
// copy-then-Axpy loop adds them.
template <typename T>
__global__ void TileBackward(int64_t n, int64_t inner, int tiles, const T* top_diff,
                             T* bottom_diff) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int64_t o = index / inner, i = index % inner;
    const T* tile = top_diff + o * tiles * inner + i;
    T sum = tile[0];
    for (int t = 1; t < tiles; ++t) sum += tile[t * inner];
    bottom_diff[index] = sum;
  }
}

}  // namespace

void TileLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  // Top viewed as (outer, tiles, inner) reads bottom (outer, inner); the tile axis repeats.
  const gpu::StridedMap map =
      gpu::MakeStridedMap({outer_dim_, tiles_, inner_dim_}, {inner_dim_, 0, 1});
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu::GatherStrided<T>(top[0]->count(), map, bottom[0]->gpu_data<T>(),
                                             top[0]->mutable_gpu_data<T>()));
}

void TileLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    TileBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, inner_dim_, tiles_, top[0]->gpu_diff<T>(), bottom[0]->mutable_gpu_diff<T>());
  });
  gpu::CheckLaunch("Tile backward");
}

}  // namespace crema
