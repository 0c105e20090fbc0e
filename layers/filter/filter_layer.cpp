#include "layers/filter/filter_layer.hpp"

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void FilterLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top.size() == bottom.size() - 1, "needs one top per filtered bottom (",
                    bottom.size() - 1, ", the last bottom is the selector), got ", top.size(),
                    " tops");
  first_reshape_ = true;
}

void FilterLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const size_t selector_index = bottom.size() - 1;
  const Blob& selector = *bottom[selector_index];
  CREMA_CHECK_SHAPE(selector.num_axes() >= 1, "the selector (last bottom) must have a batch ",
                    "axis, got a scalar");
  for (int i = 1; i < selector.num_axes(); ++i)
    CREMA_CHECK_SHAPE(selector.shape(i) == 1, "the selector (last bottom) must be (N) or ",
                      "(N, 1, ...), got shape ", selector.shape_string());
  for (size_t i = 0; i < selector_index; ++i) {
    for (Blob* t : top)
      CREMA_CHECK_SHAPE(t != bottom[i] && t != &selector,
                        "Filter does not allow in-place computation");
    CREMA_CHECK_SHAPE(bottom[i]->num_axes() >= 1 && bottom[i]->shape(0) == selector.shape(0),
                      "bottom ", i, " ", bottom[i]->shape_string(),
                      " must have as many items (axis 0) as the selector ",
                      selector.shape_string());
  }
  indices_to_forward_.clear();
  for (int n = 0; n < selector.shape(0); ++n)
    if (selector.data_at(n) != 0) indices_to_forward_.push_back(n);
  int new_num = static_cast<int>(indices_to_forward_.size());
  if (first_reshape_) {
    // At set-up the selector holds no data yet: size the tops for the whole batch.
    new_num = selector.shape(0);
    first_reshape_ = false;
  }
  for (size_t t = 0; t < top.size(); ++t) {
    std::vector<int> shape = bottom[t]->shape();
    shape[0] = new_num;
    top[t]->Reshape(shape);
  }
}

template <typename T>
void FilterLayer::Forward(const BlobVec& bottom, const BlobVec& top) const {
  for (size_t t = 0; t < top.size(); ++t) {
    const int64_t dim = bottom[t]->count(1);
    const T* bottom_data = bottom[t]->cpu_data<T>();
    T* top_data = top[t]->mutable_cpu_data<T>();
    for (size_t n = 0; n < indices_to_forward_.size(); ++n)
      cpu::Copy<T>(dim, bottom_data + indices_to_forward_[n] * dim, top_data + n * dim);
  }
}

template <typename T>
void FilterLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) const {
  for (size_t t = 0; t < top.size(); ++t) {
    if (!propagate_down[t]) continue;
    const int64_t dim = bottom[t]->count(1);
    const T* top_diff = top[t]->cpu_diff<T>();
    T* bottom_diff = bottom[t]->mutable_cpu_diff<T>();
    cpu::Set<T>(bottom[t]->count(), T(0), bottom_diff);
    for (size_t n = 0; n < indices_to_forward_.size(); ++n)
      cpu::Copy<T>(dim, top_diff + n * dim, bottom_diff + indices_to_forward_[n] * dim);
  }
}

void FilterLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, Forward<T>(bottom, top));
}

void FilterLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down.back(), "cannot backpropagate to the selector (last bottom)");
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Filter, FilterLayer);

}  // namespace crema
