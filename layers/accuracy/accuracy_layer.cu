#include "layers/accuracy/accuracy_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

struct AccuracyGeometry {
  int64_t items;  // outer * inner
  int64_t inner;
  int num_labels;
  int top_k;
  bool has_ignore;
  int ignore;
};

// One thread per item (n, inner): correct when fewer than top_k classes score >= the true
// class; ignored items do not count; a label outside [0, C) that is not ignored raises *bad.
template <typename T>
__global__ void ItemAccuracy(AccuracyGeometry g, const T* data, const T* label, double* correct,
                             double* counted, double* bad) {
  CREMA_CUDA_KERNEL_LOOP(index, g.items) {
    const int l = LabelIndex(label[index]);
    correct[index] = 0;
    counted[index] = 0;
    if (g.has_ignore && l == g.ignore) continue;
    if (l < 0 || l >= g.num_labels) {
      *bad = 1;
      continue;
    }
    const T* scores = data + (index / g.inner) * g.num_labels * g.inner + index % g.inner;
    const T true_score = scores[static_cast<int64_t>(l) * g.inner];
    int num_better = -1;  // the true class counts itself
    for (int k = 0; k < g.num_labels && num_better < g.top_k; ++k)
      num_better += scores[k * g.inner] >= true_score;
    correct[index] = num_better < g.top_k ? 1 : 0;
    counted[index] = 1;
  }
}

// One thread per class: the accuracy over the counted items of that true class (0 if none).
template <typename T>
__global__ void ClassAccuracy(AccuracyGeometry g, const T* label, const double* correct,
                              const double* counted, T* per_class) {
  CREMA_CUDA_KERNEL_LOOP(c, g.num_labels) {
    int64_t items = 0;
    double hits = 0;
    for (int64_t i = 0; i < g.items; ++i) {
      if (counted[i] == 0 || LabelIndex(label[i]) != c) continue;
      ++items;
      hits += correct[i];
    }
    per_class[c] = items == 0 ? T(0) : static_cast<T>(hits) / static_cast<T>(items);
  }
}

}  // namespace

void AccuracyLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const AccuracyGeometry g{outer_num_ * inner_num_, inner_num_,   bottom[0]->shape(axis_), top_k_,
                           has_ignore_label_,       ignore_label_};
  double* correct = correct_.mutable_gpu_data<double>();
  double* counted = counted_.mutable_gpu_data<double>();
  double* sums = sums_.mutable_gpu_data<double>();
  gpu::Set<double>(1, 0.0, sums + 2);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    ItemAccuracy<T><<<gpu::Blocks(g.items), gpu::kThreads, 0, gpu::Stream()>>>(
        g, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), correct, counted, sums + 2);
    gpu::CheckLaunch("Accuracy forward");
  });
  gpu::ReduceByAxis<double>(1, 1, g.items, correct, nullptr, false, sums);
  gpu::ReduceByAxis<double>(1, 1, g.items, counted, nullptr, false, sums + 1);
  const double* host = sums_.cpu_data<double>();
  if (host[2] != 0) {
    ForwardCpu(bottom, top);  // reports the first bad label, as the CPU path does
    return;
  }
  const double count = host[1];
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    top[0]->mutable_cpu_data<T>()[0] = count == 0 ? T(0) : static_cast<T>(host[0] / count);
    if (top.size() > 1) {
      ClassAccuracy<T><<<gpu::Blocks(g.num_labels), gpu::kThreads, 0, gpu::Stream()>>>(
          g, bottom[1]->gpu_data<T>(), correct, counted, top[1]->mutable_gpu_data<T>());
      gpu::CheckLaunch("Accuracy per class");
    }
  });
}

// No gradient: the CPU code only checks that none was asked for.
void AccuracyLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  BackwardCpu(top, propagate_down, bottom);
}

}  // namespace crema
