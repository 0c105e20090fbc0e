#include "layers/softmax/softmax_layer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "crema/layer_registry.hpp"

namespace crema {

void SoftmaxLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = layer_param_.softmax_param().axis();
  CREMA_CHECK_PARAM(axis >= -bottom[0]->num_axes() && axis < bottom[0]->num_axes(),
                    "softmax_param.axis", "must be in [", -bottom[0]->num_axes(), ", ",
                    bottom[0]->num_axes(), ") for a bottom of shape ", bottom[0]->shape_string(),
                    ", got ", axis);
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
  top[0]->ReshapeLike(*bottom[0]);
  outer_num_ = bottom[0]->count(0, axis_);
  channels_ = bottom[0]->shape(axis_);
  inner_num_ = bottom[0]->count(axis_ + 1);
}

template <typename T>
void SoftmaxLayer::Forward(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  std::vector<T> scale(inner_num_);
  const int64_t dim = channels_ * inner_num_;
  for (int64_t i = 0; i < outer_num_; ++i) {
    const T* x = bottom_data + i * dim;
    T* y = top_data + i * dim;
    // Subtract the per-position maximum for stability.
    std::copy(x, x + inner_num_, scale.begin());
    for (int64_t c = 1; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k) scale[k] = std::max(scale[k], x[c * inner_num_ + k]);
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k)
        y[c * inner_num_ + k] = std::exp(x[c * inner_num_ + k] - scale[k]);
    std::fill(scale.begin(), scale.end(), T(0));
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k) scale[k] += y[c * inner_num_ + k];
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k) y[c * inner_num_ + k] /= scale[k];
  }
}

template <typename T>
void SoftmaxLayer::Backward(const Blob& top, Blob* bottom) const {
  const T* top_diff = top.cpu_diff<T>();
  const T* top_data = top.cpu_data<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  std::vector<T> dot(inner_num_);
  const int64_t dim = channels_ * inner_num_;
  for (int64_t i = 0; i < outer_num_; ++i) {
    const T* dy = top_diff + i * dim;
    const T* y = top_data + i * dim;
    T* dx = bottom_diff + i * dim;
    std::fill(dot.begin(), dot.end(), T(0));
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k)
        dot[k] += dy[c * inner_num_ + k] * y[c * inner_num_ + k];
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t k = 0; k < inner_num_; ++k) {
        const int64_t j = c * inner_num_ + k;
        dx[j] = (dy[j] - dot[k]) * y[j];
      }
  }
}

void SoftmaxLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void SoftmaxLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Softmax, SoftmaxLayer);

}  // namespace crema
