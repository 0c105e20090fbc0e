#include "layers/argmax/argmax_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// (value, index) ordered as the CPU's std::greater on pairs: larger value first, ties larger
// index first.
template <typename T>
__device__ inline bool Before(T a, int64_t a_index, T b, int64_t b_index) {
  return a > b || (a == b && a_index > b_index);
}

// One thread per searched row: top_k passes, each picking the first pair (in that order) after
// the previous pick, which gives the CPU's partial_sort result.
template <typename T>
__global__ void ArgMaxKernel(int64_t num, int64_t dim, int64_t axis_dist, int top_k, bool has_axis,
                             bool out_max_val, const T* bottom, T* top) {
  CREMA_CUDA_KERNEL_LOOP(i, num) {
    const int64_t outer = i / axis_dist, inner = i % axis_dist;
    const T* row = bottom + outer * dim * axis_dist + inner;
    T last_value = T(0);
    int64_t last_index = -1;  // none picked yet
    for (int j = 0; j < top_k; ++j) {
      T best_value = T(0);
      int64_t best_index = -1;
      for (int64_t d = 0; d < dim; ++d) {
        const T value = row[d * axis_dist];
        if (last_index >= 0 && !Before(last_value, last_index, value, d)) continue;
        if (best_index < 0 || Before(value, d, best_value, best_index)) {
          best_value = value;
          best_index = d;
        }
      }
      last_value = best_value;
      last_index = best_index;
      if (has_axis) {
        top[(outer * top_k + j) * axis_dist + inner] =
            out_max_val ? best_value : static_cast<T>(best_index);
      } else {
        const int64_t base = (out_max_val ? 2 : 1) * i * top_k;
        top[base + j] = static_cast<T>(best_index);
        if (out_max_val) top[base + top_k + j] = best_value;
      }
    }
  }
}

}  // namespace

void ArgMaxLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t dim = has_axis_ ? bottom[0]->shape(axis_) : bottom[0]->count(1);
  if (dim == 0) return;
  const int64_t axis_dist = has_axis_ ? bottom[0]->count(axis_) / dim : 1;
  const int64_t num = bottom[0]->count() / dim;
  if (num == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    ArgMaxKernel<T><<<gpu::Blocks(num), gpu::kThreads, 0, gpu::Stream()>>>(
        num, dim, axis_dist, top_k_, has_axis_, out_max_val_, bottom[0]->gpu_data<T>(),
        top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("ArgMax forward");
}

void ArgMaxLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  BackwardCpu(top, propagate_down, bottom);  // only checks that no gradient is asked for
}

}  // namespace crema
