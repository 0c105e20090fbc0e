#include "layers/contrastive_loss/contrastive_loss_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void ContrastiveLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  // As Caffe: (N, C, 1, 1) pairs and (N, 1, 1, 1) similarities, in any number of axes <= 4.
  auto is_nc11 = [](const Blob& b) {
    return b.num_axes() >= 1 && b.num_axes() <= 4 && b.height() == 1 && b.width() == 1;
  };
  CREMA_CHECK_SHAPE(
      is_nc11(*bottom[0]) && is_nc11(*bottom[1]) && bottom[0]->count(1) == bottom[1]->count(1),
      "bottom[0] and bottom[1] must both be N x C (or N x C x 1 x 1), got ",
      bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(is_nc11(*bottom[2]) && bottom[2]->channels() == 1 &&
                        bottom[2]->shape(0) == bottom[0]->shape(0),
                    "bottom[2] (similarity) must hold one value per pair (N = ",
                    bottom[0]->shape(0), "), got ", bottom[2]->shape_string());
  for (int i = 1; i < 3; ++i)
    CREMA_CHECK_SHAPE(bottom[i]->dtype() == bottom[0]->dtype(), "bottom[", i, "] (",
                      DataTypeName(bottom[i]->dtype()),
                      ") must have the element type of bottom[0] (",
                      DataTypeName(bottom[0]->dtype()), ")");
  diff_.set_dtype(bottom[0]->dtype());
  diff_.ReshapeLike(*bottom[0]);
  dist_sq_.set_dtype(bottom[0]->dtype());
  dist_sq_.Reshape(std::vector<int>{bottom[0]->shape(0)});
  terms_.set_dtype(bottom[0]->dtype());
  terms_.Reshape(std::vector<int>{bottom[0]->shape(0) + 1});
}

template <typename T>
void ContrastiveLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int num = bottom[0]->shape(0);
  const int channels = static_cast<int>(bottom[0]->count(1));
  const T margin = static_cast<T>(layer_param_.contrastive_loss_param().margin());
  const bool legacy = layer_param_.contrastive_loss_param().legacy_version();
  T* diff = diff_.mutable_cpu_data<T>();
  cpu::Sub<T>(bottom[0]->count(), bottom[0]->cpu_data<T>(), bottom[1]->cpu_data<T>(), diff);
  const T* similar = bottom[2]->cpu_data<T>();
  T* dist_sq = dist_sq_.mutable_cpu_data<T>();
  T loss = 0;
  for (int i = 0; i < num; ++i) {
    dist_sq[i] = cpu::Dot<T>(channels, diff + i * channels, diff + i * channels);
    if (LabelIndex(similar[i]) != 0) {
      loss += dist_sq[i];
    } else if (legacy) {
      loss += std::max(margin - dist_sq[i], T(0));
    } else {
      const T gap = std::max(margin - std::sqrt(dist_sq[i]), T(0));
      loss += gap * gap;
    }
  }
  top[0]->mutable_cpu_data<T>()[0] = loss / static_cast<T>(num) / T(2);
}

template <typename T>
void ContrastiveLossLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const int num = bottom[0]->shape(0);
  const int channels = static_cast<int>(bottom[0]->count(1));
  const T margin = static_cast<T>(layer_param_.contrastive_loss_param().margin());
  const bool legacy = layer_param_.contrastive_loss_param().legacy_version();
  const T* diff = diff_.cpu_data<T>();
  const T* dist_sq = dist_sq_.cpu_data<T>();
  const T* similar = bottom[2]->cpu_data<T>();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const T sign = i == 0 ? T(1) : T(-1);
    const T alpha = sign * top[0]->cpu_diff<T>()[0] / static_cast<T>(num);
    T* bottom_diff = bottom[i]->mutable_cpu_diff<T>();
    for (int j = 0; j < num; ++j) {
      T* out = bottom_diff + j * channels;
      const T* d = diff + j * channels;
      if (LabelIndex(similar[j]) != 0) {
        cpu::Scale<T>(channels, alpha, d, out);
        continue;
      }
      const T beta = DissimilarFactor(alpha, margin, dist_sq[j], std::sqrt(dist_sq[j]), legacy);
      if (beta != T(0))
        cpu::Scale<T>(channels, beta, d, out);
      else
        cpu::Set<T>(channels, T(0), out);
    }
  }
}

void ContrastiveLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void ContrastiveLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, propagate_down, bottom));
}

void ContrastiveLossLayer::CheckPropagateDown(const std::vector<bool>& propagate_down) const {
  if (propagate_down.size() > 2 && propagate_down[2])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the similarity input (bottom[2])");
}

CREMA_REGISTER_LAYER(ContrastiveLoss, ContrastiveLossLayer);

}  // namespace crema
