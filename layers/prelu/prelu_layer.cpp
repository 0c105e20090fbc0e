#include "layers/prelu/prelu_layer.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "crema/layer_registry.hpp"

namespace crema {

void PReLULayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 2, "PReLU needs a bottom with at least 2 axes, got ",
                    bottom[0]->shape_string());
  const PReLUParameter& param = layer_param_.prelu_param();
  channel_shared_ = param.channel_shared();
  const int channels = bottom[0]->shape(1);
  const std::vector<int> shape = channel_shared_ ? std::vector<int>{} : std::vector<int>{channels};
  FillerParameter filler = param.filler();
  if (!param.has_filler()) {
    filler.set_type("constant");
    filler.set_value(0.25f);
  }
  // Slopes that came with the parameter (a .caffemodel): Caffe checks only their count.
  SetUpLearnableBlobs({{"negative slopes", shape, true, &filler, "prelu_param.filler"}},
                      channel_shared_ ? "one, prelu_param.channel_shared is true"
                                      : "one per channel of the bottom");
  param_propagate_down_.assign(1, true);
}

void PReLULayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 2, "PReLU needs a bottom with at least 2 axes, got ",
                    bottom[0]->shape_string());
  const int64_t expected = channel_shared_ ? 1 : bottom[0]->shape(1);
  CREMA_CHECK_SHAPE(blobs_[0]->count() == expected, "bottom ", bottom[0]->shape_string(), " has ",
                    bottom[0]->shape(1), " channels, but the layer has ", blobs_[0]->count(),
                    " slopes");
  top[0]->ReshapeLike(*bottom[0]);
  input_.Reshape(*bottom[0], *top[0]);
  // Memory is taken on first use, so a CPU net never allocates it.
  if (slope_term_.dtype() != bottom[0]->dtype()) slope_term_.set_dtype(bottom[0]->dtype());
  slope_term_.ReshapeLike(*bottom[0]);
}

template <typename T>
void PReLULayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const int64_t dim = bottom.count(2);
  const int channels = bottom.shape(1);
  const T* bottom_data = input_.Save<T>(bottom, *top);
  const T* slope = blobs_[0]->cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = channel_shared_ ? 0 : (i / dim) % channels;
    const T x = bottom_data[i];
    top_data[i] = std::max(x, T(0)) + slope[c] * std::min(x, T(0));
  }
}

template <typename T>
void PReLULayer::BackwardT(const Blob& top, bool propagate_down, Blob* bottom) {
  const int64_t count = bottom->count();
  const int64_t dim = bottom->count(2);
  const int channels = bottom->shape(1);
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  // In place, top_diff is the bottom diff: the slope gradient must be taken first.
  if (param_propagate_down(0)) {
    // Summed per channel in double, as the GPU code (gpu::ReduceByAxis).
    std::vector<double> sums(channel_shared_ ? 1 : channels, 0.0);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c = channel_shared_ ? 0 : (i / dim) % channels;
      if (bottom_data[i] <= 0) sums[c] += static_cast<double>(top_diff[i]) * bottom_data[i];
    }
    T* slope_diff = blobs_[0]->mutable_cpu_diff<T>();
    for (size_t c = 0; c < sums.size(); ++c) slope_diff[c] += static_cast<T>(sums[c]);
  }
  if (propagate_down) {
    const T* slope = blobs_[0]->cpu_data<T>();
    T* bottom_diff = bottom->mutable_cpu_diff<T>();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c = channel_shared_ ? 0 : (i / dim) % channels;
      bottom_diff[i] = top_diff[i] * (bottom_data[i] > 0 ? T(1) : slope[c]);
    }
  }
}

void PReLULayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void PReLULayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], propagate_down[0], bottom[0]));
}

CREMA_REGISTER_LAYER(PReLU, PReLULayer);

}  // namespace crema
