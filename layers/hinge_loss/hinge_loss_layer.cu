#include "layers/hinge_loss/hinge_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// m = max(0, 1 + s x), s = -1 at the label and +1 elsewhere; an item whose label is outside
// [0, dim) raises *bad.
template <typename T>
__global__ void HingeMargins(int64_t count, int64_t dim, const T* x, const T* label, T* margin,
                             T* bad) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    const int64_t k = i % dim;
    const int l = LabelIndex(label[i / dim]);
    if (l < 0 || l >= dim) *bad = T(1);
    const T v = k == l ? -x[i] : x[i];
    margin[i] = max(T(0), T(1) + v);
  }
}

// L1: scale * s * [m > 0]; L2: 2 * scale * s * m (two_scale = 2 * scale, as the CPU rounds it).
template <typename T>
__global__ void HingeBackward(int64_t count, int64_t dim, const T* label, const T* margin, bool l2,
                              T scale, T two_scale, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    const T d = l2 ? two_scale * margin[i] : (margin[i] > 0 ? scale : T(0));
    dx[i] = i % dim == LabelIndex(label[i / dim]) ? -d : d;
  }
}

}  // namespace

void HingeLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t count = bottom[0]->count();
  const int64_t dim = count / num;
  const bool l2 = layer_param_.hinge_loss_param().norm() == HingeLossParameter::L2;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* scalars = scalars_.mutable_gpu_data<T>();
    gpu::Set<T>(1, T(0), scalars + 1);
    T* margin = margins_.mutable_gpu_data<T>();
    HingeMargins<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, dim, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), margin, scalars + 1);
    gpu::CheckLaunch("HingeLoss forward");
    gpu::ReduceByAxis<T>(1, 1, count, margin, l2 ? margin : nullptr, false, scalars);
    const T* host = scalars_.cpu_data<T>();
    // A bad label: the CPU path reports the first one, with the CPU's message.
    if (host[1] != T(0)) {
      ForwardCpu(bottom, top);
      return;
    }
    top[0]->mutable_cpu_data<T>()[0] = host[0] / static_cast<T>(num);
  });
}

void HingeLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  const int64_t num = bottom[0]->shape(0);
  const int64_t count = bottom[0]->count();
  const bool l2 = layer_param_.hinge_loss_param().norm() == HingeLossParameter::L2;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T loss_weight = top[0]->cpu_diff<T>()[0];
    HingeBackward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, count / num, bottom[1]->gpu_data<T>(), margins_.gpu_data<T>(), l2,
        loss_weight / static_cast<T>(num), loss_weight * 2 / static_cast<T>(num),
        bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("HingeLoss backward");
  });
}

}  // namespace crema
