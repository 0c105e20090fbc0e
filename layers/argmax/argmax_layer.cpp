#include "layers/argmax/argmax_layer.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "crema/layer_registry.hpp"

namespace crema {

void ArgMaxLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ArgMaxParameter& param = layer_param_.argmax_param();
  out_max_val_ = param.out_max_val();
  CREMA_CHECK_PARAM(param.top_k() >= 1 && param.top_k() <= INT32_MAX, "argmax_param.top_k",
                    "must be >= 1, got ", param.top_k());
  top_k_ = static_cast<int>(param.top_k());
  has_axis_ = param.has_axis();
}

void ArgMaxLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "ArgMax does not allow in-place computation");
  const ArgMaxParameter& param = layer_param_.argmax_param();
  const Blob& in = *bottom[0];
  const int num_axes = in.num_axes();
  std::vector<int> shape(std::max(num_axes, 3), 1);
  if (has_axis_) {
    CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "argmax_param.axis",
                      "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      in.shape_string(), ", got ", param.axis());
    axis_ = in.CanonicalAxisIndex(param.axis());
    CREMA_CHECK_PARAM(top_k_ <= in.shape(axis_), "argmax_param.top_k", "must be at most the size ",
                      in.shape(axis_), " of axis ", axis_, " of the bottom ", in.shape_string(),
                      ", got ", top_k_);
    shape = in.shape();
    shape[axis_] = top_k_;
  } else {
    CREMA_CHECK_SHAPE(num_axes >= 1, "ArgMax without argmax_param.axis needs a bottom with a ",
                      "batch axis, got a scalar");
    CREMA_CHECK_PARAM(top_k_ <= in.count(1), "argmax_param.top_k",
                      "must be at most the number of values per item ", in.count(1),
                      " of the bottom ", in.shape_string(), ", got ", top_k_);
    shape[0] = in.shape(0);
    shape[2] = top_k_;
    if (out_max_val_) shape[1] = 2;
  }
  top[0]->Reshape(shape);
}

template <typename T>
void ArgMaxLayer::Forward(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  int64_t dim, axis_dist;
  if (has_axis_) {
    dim = bottom.shape(axis_);
    axis_dist = bottom.count(axis_) / dim;  // stride of the searched axis
  } else {
    dim = bottom.count(1);
    axis_dist = 1;
  }
  if (dim == 0) return;
  const int64_t num = bottom.count() / dim;
  std::vector<std::pair<T, int64_t>> pairs(dim);
  for (int64_t i = 0; i < num; ++i) {
    const int64_t outer = i / axis_dist, inner = i % axis_dist;
    for (int64_t j = 0; j < dim; ++j)
      pairs[j] = {bottom_data[(outer * dim + j) * axis_dist + inner], j};
    std::partial_sort(pairs.begin(), pairs.begin() + top_k_, pairs.end(),
                      std::greater<std::pair<T, int64_t>>());
    for (int j = 0; j < top_k_; ++j) {
      if (has_axis_) {
        top_data[(outer * top_k_ + j) * axis_dist + inner] =
            out_max_val_ ? pairs[j].first : static_cast<T>(pairs[j].second);
      } else {
        const int64_t base = (out_max_val_ ? 2 : 1) * i * top_k_;
        top_data[base + j] = static_cast<T>(pairs[j].second);
        if (out_max_val_) top_data[base + top_k_ + j] = pairs[j].first;
      }
    }
  }
}

void ArgMaxLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void ArgMaxLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[0], "ArgMax has no gradient; nothing that needs a gradient ",
                    "may depend on its top");
}

CREMA_REGISTER_LAYER(ArgMax, ArgMaxLayer);

}  // namespace crema
