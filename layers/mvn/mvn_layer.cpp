#include "layers/mvn/mvn_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void MVNLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& in = *bottom[0];
  CREMA_CHECK_SHAPE(in.num_axes() >= 1, "needs a bottom with at least one axis, got ",
                    in.shape_string());
  const int64_t num = in.shape(0);
  const int64_t channels = in.num_axes() > 1 ? in.shape(1) : 1;
  groups_ = layer_param_.mvn_param().across_channels() ? num : num * channels;
  dim_ = groups_ > 0 ? in.count() / groups_ : 0;
  if (top[0] != bottom[0]) top[0]->ReshapeLike(in);
  std_eps_.assign(groups_, 1.0);
  sums_.set_dtype(dtype());
  sums_.Reshape(std::vector<int>{2, static_cast<int>(groups_)});
  inv_std_.set_dtype(dtype());
  inv_std_.Reshape(std::vector<int>{static_cast<int>(groups_)});
}

template <typename T>
void MVNLayer::ForwardT(const Blob& bottom, Blob* top) {
  const MVNParameter& param = layer_param_.mvn_param();
  const double eps = param.eps();
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t g = 0; g < groups_; ++g) {
    const T* x = bottom_data + g * dim_;
    T* y = top_data + g * dim_;
    double sum = 0;
    for (int64_t i = 0; i < dim_; ++i) sum += x[i];
    const T mean = static_cast<T>(sum / dim_);
    for (int64_t i = 0; i < dim_; ++i) y[i] = x[i] - mean;
    if (!param.normalize_variance()) continue;
    double sumsq = 0;
    for (int64_t i = 0; i < dim_; ++i) sumsq += static_cast<double>(y[i]) * y[i];
    std_eps_[g] = std::sqrt(sumsq / dim_) + eps;
    const T inv = static_cast<T>(1 / std_eps_[g]);
    for (int64_t i = 0; i < dim_; ++i) y[i] *= inv;
  }
}

template <typename T>
void MVNLayer::BackwardT(const Blob& top, Blob* bottom) {
  // In place, top and bottom share data and diff: per group, read the sums, then write.
  const bool normalize_variance = layer_param_.mvn_param().normalize_variance();
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  for (int64_t g = 0; g < groups_; ++g) {
    const T* y = top_data + g * dim_;
    const T* dy = top_diff + g * dim_;
    T* dx = bottom_diff + g * dim_;
    double sum_dy = 0, sum_dy_y = 0;
    for (int64_t i = 0; i < dim_; ++i) {
      sum_dy += dy[i];
      sum_dy_y += static_cast<double>(dy[i]) * y[i];
    }
    const T mean_dy = static_cast<T>(sum_dy / dim_);
    if (!normalize_variance) {
      for (int64_t i = 0; i < dim_; ++i) dx[i] = dy[i] - mean_dy;
      continue;
    }
    const T mean_dy_y = static_cast<T>(sum_dy_y / dim_);
    const T inv = static_cast<T>(1 / std_eps_[g]);
    for (int64_t i = 0; i < dim_; ++i) dx[i] = (dy[i] - mean_dy - y[i] * mean_dy_y) * inv;
  }
}

void MVNLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void MVNLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(MVN, MVNLayer);

}  // namespace crema
