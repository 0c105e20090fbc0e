#include "layers/multinomial_logistic_loss/multinomial_logistic_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

constexpr double kLogThreshold = 1e-20;  // Caffe's kLOG_THRESHOLD

// One thread per item: -log(max(p[n, l_n], 1e-20)) in double; a label outside [0, dim) raises
// *bad.
template <typename T>
__global__ void ItemLosses(int64_t num, int64_t dim, const T* prob, const T* label, double* loss,
                           double* bad) {
  CREMA_CUDA_KERNEL_LOOP(n, num) {
    const int l = LabelIndex(label[n]);
    if (l < 0 || l >= dim) {
      *bad = 1;
      loss[n] = 0;
    } else {
      loss[n] = -log(max(static_cast<double>(prob[n * dim + l]), kLogThreshold));
    }
  }
}

template <typename T>
__global__ void ItemGradients(int64_t num, int64_t dim, const T* prob, const T* label, T scale,
                              T* dx) {
  CREMA_CUDA_KERNEL_LOOP(n, num) {
    const int l = LabelIndex(label[n]);
    if (l < 0 || l >= dim) continue;
    const int64_t at = n * dim + l;
    dx[at] = scale / max(prob[at], static_cast<T>(kLogThreshold));
  }
}

}  // namespace

void MultinomialLogisticLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t dim = bottom[0]->count() / num;
  double* scalars = scalars_.mutable_gpu_data<double>();
  gpu::Set<double>(1, 0.0, scalars + 1);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    ItemLosses<T><<<gpu::Blocks(num), gpu::kThreads, 0, gpu::Stream()>>>(
        num, dim, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(),
        losses_.mutable_gpu_data<double>(), scalars + 1);
    gpu::CheckLaunch("MultinomialLogisticLoss forward");
  });
  gpu::ReduceByAxis<double>(1, 1, num, losses_.gpu_data<double>(), nullptr, false, scalars);
  const double* host = scalars_.cpu_data<double>();
  if (host[1] != 0) {
    ForwardCpu(bottom, top);  // reports the first bad label, as the CPU path does
    return;
  }
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(host[0] / static_cast<double>(num));
  });
}

void MultinomialLogisticLossLayer::BackwardGpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  const int64_t num = bottom[0]->shape(0);
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    gpu::Set<T>(count, T(0), dx);
    const T scale = -top[0]->cpu_diff<T>()[0] / static_cast<T>(num);
    ItemGradients<T><<<gpu::Blocks(num), gpu::kThreads, 0, gpu::Stream()>>>(
        num, count / num, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), scale, dx);
    gpu::CheckLaunch("MultinomialLogisticLoss backward");
  });
}

}  // namespace crema
