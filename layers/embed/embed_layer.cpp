#include "layers/embed/embed_layer.hpp"

#include <cmath>
#include <memory>
#include <string>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void EmbedLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EmbedParameter& param = layer_param_.embed_param();
  CREMA_CHECK_PARAM(param.num_output() > 0 && param.num_output() <= INT32_MAX,
                    "embed_param.num_output", "must be > 0, got ", param.num_output());
  CREMA_CHECK_PARAM(param.input_dim() > 0 && param.input_dim() <= INT32_MAX,
                    "embed_param.input_dim", "must be > 0, got ", param.input_dim());
  num_output_ = static_cast<int>(param.num_output());
  input_dim_ = static_cast<int>(param.input_dim());
  bias_term_ = param.bias_term();
  const std::vector<int> weight_shape = {input_dim_, num_output_};
  const std::vector<int> bias_shape = {num_output_};
  // Weights that came with the parameter (a .caffemodel): Caffe checks only their counts.
  SetUpLearnableBlobs(WeightAndBias("embed_param", weight_shape, param.weight_filler(), bias_term_,
                                    bias_shape, param.bias_filler(),
                                    /*any_shape_of_its_count=*/true));
  param_propagate_down_.assign(blobs_.size(), true);
}

void EmbedLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Embed does not allow in-place computation");
  std::vector<int> shape = bottom[0]->shape();
  shape.push_back(num_output_);
  top[0]->Reshape(shape);
}

void EmbedLayer::ReadIndices(const Blob& bottom) {
  indices_.resize(bottom.count());
  for (int64_t n = 0; n < bottom.count(); ++n) {
    const double value = bottom.data_at(n);
    if (!(value >= 0 && value < input_dim_ && value == std::floor(value)))
      CREMA_THROW_RUNTIME(ErrorPrefix(), "bottom element ", n, " is ", value,
                          ", not an integer index in [0, ", input_dim_, ") (embed_param.input_dim ",
                          input_dim_, ")");
    indices_[n] = static_cast<int>(value);
  }
}

template <typename T>
void EmbedLayer::Forward(const Blob& bottom, Blob* top) {
  ReadIndices(bottom);
  const T* weight = blobs_[0]->cpu_data<T>();
  const T* bias = bias_term_ ? blobs_[1]->cpu_data<T>() : nullptr;
  T* top_data = top->mutable_cpu_data<T>();
  for (size_t n = 0; n < indices_.size(); ++n) {
    T* row = top_data + n * num_output_;
    cpu::Copy<T>(num_output_, weight + static_cast<int64_t>(indices_[n]) * num_output_, row);
    if (bias) cpu::Axpy<T>(num_output_, T(1), bias, row);
  }
}

template <typename T>
void EmbedLayer::Backward(const Blob& top, const Blob& bottom) {
  const T* top_diff = top.cpu_diff<T>();
  if (param_propagate_down(0)) {
    ReadIndices(bottom);
    T* weight_diff = blobs_[0]->mutable_cpu_diff<T>();
    for (size_t n = 0; n < indices_.size(); ++n)
      cpu::Axpy<T>(num_output_, T(1), top_diff + n * num_output_,
                   weight_diff + static_cast<int64_t>(indices_[n]) * num_output_);
  }
  if (bias_term_ && param_propagate_down(1)) {
    T* bias_diff = blobs_[1]->mutable_cpu_diff<T>();
    for (int64_t n = 0; n < bottom.count(); ++n)
      cpu::Axpy<T>(num_output_, T(1), top_diff + n * num_output_, bias_diff);
  }
}

void EmbedLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void EmbedLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[0], "cannot backpropagate to the indices (bottom 0)");
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T>(*top[0], *bottom[0]));
}

CREMA_REGISTER_LAYER(Embed, EmbedLayer);

}  // namespace crema
