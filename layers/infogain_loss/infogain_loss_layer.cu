#include "layers/infogain_loss/infogain_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

constexpr double kInfogainLogThreshold = 1e-20;  // Caffe's kLOG_THRESHOLD

struct InfogainGeometry {
  int64_t items;  // outer * inner
  int64_t inner;
  int num_labels;
  bool has_ignore;
  int ignore;
};

// One thread per item (n, inner): -sum_k H[l, k] log(max(p_k, 1e-20)) in double, and whether
// it counts; a label outside [0, C) that is not ignored raises *bad.
template <typename T>
__global__ void InfogainItemLosses(InfogainGeometry g, const T* prob, const T* label,
                                   const T* infogain, double* loss, double* counts, double* bad) {
  CREMA_CUDA_KERNEL_LOOP(index, g.items) {
    const int l = LabelIndex(label[index]);
    loss[index] = 0;
    counts[index] = 0;
    if (g.has_ignore && l == g.ignore) continue;
    if (l < 0 || l >= g.num_labels) {
      *bad = 1;
      continue;
    }
    const T* p = prob + (index / g.inner) * g.num_labels * g.inner + index % g.inner;
    const T* h = infogain + static_cast<int64_t>(l) * g.num_labels;
    double sum = 0;
    for (int k = 0; k < g.num_labels; ++k)
      sum -= h[k] * log(max(static_cast<double>(p[k * g.inner]), kInfogainLogThreshold));
    loss[index] = sum;
    counts[index] = 1;
  }
}

// Row l of H summed in T, in the CPU's order.
template <typename T>
__global__ void RowSums(int num_labels, const T* infogain, T* row_sums) {
  CREMA_CUDA_KERNEL_LOOP(l, num_labels) {
    T sum = 0;
    for (int k = 0; k < num_labels; ++k) sum += infogain[l * num_labels + k];
    row_sums[l] = sum;
  }
}

// One thread per item: dx_k = p_k * rowsum(H[l]) - H[l, k] (unscaled), zero for ignored items.
template <typename T>
__global__ void InfogainItemGradients(InfogainGeometry g, const T* prob, const T* label,
                                      const T* infogain, const T* row_sums, T* dx, double* counts) {
  CREMA_CUDA_KERNEL_LOOP(index, g.items) {
    const int l = LabelIndex(label[index]);
    const int64_t first = (index / g.inner) * g.num_labels * g.inner + index % g.inner;
    const bool counted = !(g.has_ignore && l == g.ignore) && l >= 0 && l < g.num_labels;
    counts[index] = counted ? 1 : 0;
    for (int k = 0; k < g.num_labels; ++k) {
      const int64_t at = first + k * g.inner;
      dx[at] = counted ? prob[at] * row_sums[l] - infogain[l * g.num_labels + k] : T(0);
    }
  }
}

}  // namespace

void InfogainLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const InfogainGeometry g{outer_num_ * inner_num_, inner_num_, num_labels_, has_ignore_label_,
                           ignore_label_};
  double* loss = losses_.mutable_gpu_data<double>();
  double* counts = counts_.mutable_gpu_data<double>();
  double* sums = sums_.mutable_gpu_data<double>();
  gpu::Set<double>(1, 0.0, sums + 2);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    InfogainItemLosses<T><<<gpu::Blocks(g.items), gpu::kThreads, 0, gpu::Stream()>>>(
        g, prob_.gpu_data<T>(), bottom[1]->gpu_data<T>(), Infogain(bottom).gpu_data<T>(), loss,
        counts, sums + 2);
    gpu::CheckLaunch("InfogainLoss forward");
  });
  gpu::ReduceByAxis<double>(1, 1, g.items, loss, nullptr, false, sums);
  gpu::ReduceByAxis<double>(1, 1, g.items, counts, nullptr, false, sums + 1);
  const double* host = sums_.cpu_data<double>();
  if (host[2] != 0) {
    ForwardCpu(bottom, top);  // reports the first bad label, as the CPU path does
    return;
  }
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    top[0]->mutable_cpu_data<T>()[0] =
        static_cast<T>(host[0] / Normalizer(static_cast<int64_t>(host[1])));
  });
  if (top.size() == 2) top[1]->ShareData(prob_);
}

void InfogainLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  const InfogainGeometry g{outer_num_ * inner_num_, inner_num_, num_labels_, has_ignore_label_,
                           ignore_label_};
  double* counts = counts_.mutable_gpu_data<double>();
  double* sums = sums_.mutable_gpu_data<double>();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* infogain = Infogain(bottom).gpu_data<T>();
    T* row_sums = row_sums_.mutable_gpu_data<T>();
    RowSums<T><<<gpu::Blocks(num_labels_), gpu::kThreads, 0, gpu::Stream()>>>(num_labels_, infogain,
                                                                              row_sums);
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    InfogainItemGradients<T><<<gpu::Blocks(g.items), gpu::kThreads, 0, gpu::Stream()>>>(
        g, prob_.gpu_data<T>(), bottom[1]->gpu_data<T>(), infogain, row_sums, dx, counts);
    gpu::CheckLaunch("InfogainLoss backward");
    double valid = 0;
    if (normalization_ == LossParameter::VALID) {
      gpu::ReduceByAxis<double>(1, 1, g.items, counts, nullptr, false, sums + 1);
      valid = sums_.cpu_data<double>()[1];
    }
    const T loss_weight =
        static_cast<T>(top[0]->cpu_diff<T>()[0] / Normalizer(static_cast<int64_t>(valid)));
    gpu::Scal<T>(bottom[0]->count(), loss_weight, dx);
  });
}

}  // namespace crema
