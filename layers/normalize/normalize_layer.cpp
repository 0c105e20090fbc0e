#include "layers/normalize/normalize_layer.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "crema/layer_registry.hpp"

namespace crema {

void NormalizeLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 2,
                    "Normalize needs a bottom with at least 2 axes, got ",
                    bottom[0]->shape_string());
  const NormalizeParameter& param = layer_param_.norm_param();
  across_spatial_ = param.across_spatial();
  channel_shared_ = param.channel_shared();
  eps_ = param.eps();
  CREMA_CHECK_PARAM(eps_ >= 0, "norm_param.eps", "must be >= 0, got ", eps_);
  const int channels = bottom[0]->shape(1);
  const std::vector<int> shape = channel_shared_ ? std::vector<int>{} : std::vector<int>{channels};
  FillerParameter filler = param.scale_filler();
  if (!param.has_scale_filler()) {
    filler.set_type("constant");
    filler.set_value(1.0f);
  }
  // A scale that came with the parameter (a .caffemodel): Caffe checks only its count.
  SetUpLearnableBlobs(
      {{"scale", shape, true, &filler, "norm_param.scale_filler"}},
      channel_shared_ ? "one, norm_param.channel_shared is true" : "one per channel of the bottom");
  param_propagate_down_.assign(1, true);
}

void NormalizeLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Normalize does not allow in-place computation");
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 2,
                    "Normalize needs a bottom with at least 2 axes, got ",
                    bottom[0]->shape_string());
  const int64_t expected = channel_shared_ ? 1 : bottom[0]->shape(1);
  CREMA_CHECK_SHAPE(blobs_[0]->count() == expected, "bottom ", bottom[0]->shape_string(), " has ",
                    bottom[0]->shape(1), " channels, but the layer has ", blobs_[0]->count(),
                    " scales");
  top[0]->ReshapeLike(*bottom[0]);
  if (norm_.dtype() != bottom[0]->dtype()) norm_.set_dtype(bottom[0]->dtype());
  const int num = bottom[0]->shape(0);
  const int spatial = static_cast<int>(bottom[0]->count(2));
  if (across_spatial_)
    norm_.Reshape({num});
  else
    norm_.Reshape({num, spatial});
  buffer_.set_dtype(bottom[0]->dtype());
  buffer_.ReshapeLike(*bottom[0]);
  dot_.set_dtype(bottom[0]->dtype());
  dot_.ReshapeLike(norm_);
}

template <typename T>
void NormalizeLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int num = bottom.shape(0);
  const int channels = bottom.shape(1);
  const int64_t spatial = bottom.count(2);
  const int64_t dim = channels * spatial;
  const T* bottom_data = bottom.cpu_data<T>();
  const T* scale = blobs_[0]->cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  T* norm_data = norm_.mutable_cpu_data<T>();
  for (int n = 0; n < num; ++n) {
    const T* x = bottom_data + n * dim;
    T* y = top_data + n * dim;
    if (across_spatial_) {
      T sum = 0;
      for (int64_t i = 0; i < dim; ++i) sum += x[i] * x[i];
      const T norm = std::sqrt(sum + static_cast<T>(eps_));
      norm_data[n] = norm;
      for (int64_t i = 0; i < dim; ++i) y[i] = x[i] / norm;
    } else {
      T* norm = norm_data + n * spatial;
      for (int64_t s = 0; s < spatial; ++s) norm[s] = static_cast<T>(eps_);
      for (int c = 0; c < channels; ++c)
        for (int64_t s = 0; s < spatial; ++s) norm[s] += x[c * spatial + s] * x[c * spatial + s];
      for (int64_t s = 0; s < spatial; ++s) norm[s] = std::sqrt(norm[s]);
      for (int c = 0; c < channels; ++c)
        for (int64_t s = 0; s < spatial; ++s) y[c * spatial + s] = x[c * spatial + s] / norm[s];
    }
    for (int c = 0; c < channels; ++c) {
      const T a = scale[channel_shared_ ? 0 : c];
      for (int64_t s = 0; s < spatial; ++s) y[c * spatial + s] *= a;
    }
  }
}

template <typename T>
void NormalizeLayer::BackwardT(const Blob& top, bool propagate_down, Blob* bottom) {
  const int num = bottom->shape(0);
  const int channels = bottom->shape(1);
  const int64_t spatial = bottom->count(2);
  const int64_t dim = channels * spatial;
  const T* bottom_data = bottom->cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  const T* scale = blobs_[0]->cpu_data<T>();
  const T* norm_data = norm_.cpu_data<T>();
  // The norm that divides element (n, c, s).
  auto norm_of = [&](int n, int64_t s) {
    return across_spatial_ ? norm_data[n] : norm_data[n * spatial + s];
  };
  if (param_propagate_down(0)) {
    // SSD divides top * dtop by the scale; x / norm is the same without a zero-scale hazard.
    T* scale_diff = blobs_[0]->mutable_cpu_diff<T>();
    for (int n = 0; n < num; ++n) {
      const T* x = bottom_data + n * dim;
      const T* dy = top_diff + n * dim;
      for (int c = 0; c < channels; ++c) {
        T sum = 0;
        for (int64_t s = 0; s < spatial; ++s)
          sum += dy[c * spatial + s] * x[c * spatial + s] / norm_of(n, s);
        scale_diff[channel_shared_ ? 0 : c] += sum;
      }
    }
  }
  if (!propagate_down) return;
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  std::vector<T> dot(across_spatial_ ? 1 : spatial);
  for (int n = 0; n < num; ++n) {
    const T* x = bottom_data + n * dim;
    const T* dy = top_diff + n * dim;
    T* dx = bottom_diff + n * dim;
    // g = dtop * scale; dot = sum of x * g over the values that share a norm.
    std::fill(dot.begin(), dot.end(), T(0));
    for (int c = 0; c < channels; ++c) {
      const T a = scale[channel_shared_ ? 0 : c];
      for (int64_t s = 0; s < spatial; ++s)
        dot[across_spatial_ ? 0 : s] += x[c * spatial + s] * dy[c * spatial + s] * a;
    }
    for (int c = 0; c < channels; ++c) {
      const T a = scale[channel_shared_ ? 0 : c];
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = c * spatial + s;
        const T norm = norm_of(n, s);
        dx[i] = (a * dy[i] - x[i] * dot[across_spatial_ ? 0 : s] / (norm * norm)) / norm;
      }
    }
  }
}

void NormalizeLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void NormalizeLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], propagate_down[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Normalize, NormalizeLayer);

}  // namespace crema
