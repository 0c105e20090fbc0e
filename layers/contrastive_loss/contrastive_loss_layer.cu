#include <vector>

#include "layers/contrastive_loss/contrastive_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// One thread per pair: y d^2, or the dissimilar term (legacy: max(margin - d^2, 0), else
// max(margin - d, 0)^2).
template <typename T>
__global__ void PairTerms(int num, const T* dist_sq, const T* similar, T margin, bool legacy,
                          T* term) {
  CREMA_CUDA_KERNEL_LOOP(i, num) {
    if (LabelIndex(similar[i]) != 0) {
      term[i] = dist_sq[i];
    } else if (legacy) {
      term[i] = max(margin - dist_sq[i], T(0));
    } else {
      const T gap = max(margin - sqrt(dist_sq[i]), T(0));
      term[i] = gap * gap;
    }
  }
}

// One thread per element of a pair's difference, with the CPU's per-pair coefficients.
template <typename T>
__global__ void PairGradients(int64_t count, int channels, const T* diff, const T* dist_sq,
                              const T* similar, T margin, bool legacy, T alpha, T* out) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    const int64_t j = i / channels;
    if (LabelIndex(similar[j]) != 0) {
      out[i] = alpha * diff[i];
      continue;
    }
    const T beta =
        ContrastiveLossLayer::DissimilarFactor(alpha, margin, dist_sq[j], sqrt(dist_sq[j]), legacy);
    out[i] = beta != T(0) ? beta * diff[i] : T(0);
  }
}

}  // namespace

void ContrastiveLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int num = bottom[0]->shape(0);
  const int channels = static_cast<int>(bottom[0]->count(1));
  const bool legacy = layer_param_.contrastive_loss_param().legacy_version();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T margin = static_cast<T>(layer_param_.contrastive_loss_param().margin());
    T* diff = diff_.mutable_gpu_data<T>();
    gpu::Sub<T>(bottom[0]->count(), bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), diff);
    T* dist_sq = dist_sq_.mutable_gpu_data<T>();
    gpu::ReduceByAxis<T>(1, num, channels, diff, diff, false, dist_sq);
    T* term = terms_.mutable_gpu_data<T>();
    PairTerms<T><<<gpu::Blocks(num), gpu::kThreads, 0, gpu::Stream()>>>(
        num, dist_sq, bottom[2]->gpu_data<T>(), margin, legacy, term);
    gpu::CheckLaunch("ContrastiveLoss forward");
    gpu::ReduceByAxis<T>(1, 1, num, term, nullptr, false, term + num);
    const T loss = terms_.cpu_data<T>()[num];
    top[0]->mutable_cpu_data<T>()[0] = loss / static_cast<T>(num) / T(2);
  });
}

void ContrastiveLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  const int num = bottom[0]->shape(0);
  const int channels = static_cast<int>(bottom[0]->count(1));
  const bool legacy = layer_param_.contrastive_loss_param().legacy_version();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T margin = static_cast<T>(layer_param_.contrastive_loss_param().margin());
    for (int i = 0; i < 2; ++i) {
      if (!propagate_down[i]) continue;
      const T sign = i == 0 ? T(1) : T(-1);
      const T alpha = sign * top[0]->cpu_diff<T>()[0] / static_cast<T>(num);
      const int64_t count = bottom[i]->count();
      PairGradients<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
          count, channels, diff_.gpu_data<T>(), dist_sq_.gpu_data<T>(), bottom[2]->gpu_data<T>(),
          margin, legacy, alpha, bottom[i]->mutable_gpu_diff<T>());
      gpu::CheckLaunch("ContrastiveLoss backward");
    }
  });
}

}  // namespace crema
