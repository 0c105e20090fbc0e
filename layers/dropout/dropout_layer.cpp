#include "layers/dropout/dropout_layer.hpp"

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {
void DropoutLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DropoutParameter& param = layer_param_.dropout_param();
  threshold_ = param.dropout_ratio();
  CREMA_CHECK_PARAM(threshold_ >= 0 && threshold_ < 1, "dropout_param.dropout_ratio",
                    "must be in [0, 1), got ", threshold_);
  scale_ = 1.0 / (1.0 - threshold_);
  scale_train_ = param.scale_train();
}

void DropoutLayer::NewMask(int64_t count) {
  const uint64_t high = NextSeed();
  mask_seed_ = (high << 32) | NextSeed();
  mask_count_ = count;
}

std::vector<unsigned int> DropoutLayer::mask() const {
  std::vector<unsigned int> mask(mask_count_);
  for (int64_t i = 0; i < mask_count_; ++i) mask[i] = Keep(mask_seed_, i, 1.0 - threshold_);
  return mask;
}

// y = x * mask * scale in TRAIN, x (or x * (1 - p)) in TEST; used for data and diff alike.
template <typename T>
void DropoutLayer::Apply(int64_t count, const T* x, T* y) const {
  if (phase_ == TRAIN) {
    const T scale = static_cast<T>(scale_train_ ? scale_ : 1.0);
    const double keep_prob = 1.0 - threshold_;
#pragma omp parallel for if (count > 262144)
    for (int64_t i = 0; i < count; ++i)
      y[i] = x[i] * static_cast<T>(Keep(mask_seed_, i, keep_prob)) * scale;
  } else if (scale_train_) {
    if (x != y) cpu::Copy<T>(count, x, y);
  } else {
    cpu::Scale<T>(count, static_cast<T>(1.0 - threshold_), x, y);
  }
}

void DropoutLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  if (phase_ == TRAIN) NewMask(count);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       Apply<T>(count, bottom[0]->cpu_data<T>(), top[0]->mutable_cpu_data<T>()));
}

void DropoutLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      Apply<T>(bottom[0]->count(), top[0]->cpu_diff<T>(), bottom[0]->mutable_cpu_diff<T>()));
}

CREMA_REGISTER_LAYER(Dropout, DropoutLayer);

}  // namespace crema
