#include "layers/deconvolution/deconvolution_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void DeconvolutionLayer::ComputeOutputShape() {
  output_shape_.clear();
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int input_dim = input_shape(i);
    const int kernel_extent = dilation_[i] * (kernel_shape_[i] - 1) + 1;
    const int output_dim = stride_[i] * (input_dim - 1) + kernel_extent - 2 * pad_[i];
    CREMA_CHECK_SHAPE(output_dim > 0, "the output on spatial axis ", i, " would be empty: stride ",
                      stride_[i], " * (input ", input_dim, " - 1) + kernel extent ", kernel_extent,
                      " - 2 * pad ", pad_[i], " = ", output_dim);
    output_shape_.push_back(output_dim);
  }
}

template <typename T>
void DeconvolutionLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* weight = blobs_[0]->cpu_data<T>();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const T* bottom_data = bottom[i]->cpu_data<T>();
    T* top_data = top[i]->mutable_cpu_data<T>();
    for (int64_t n = 0; n < num_; ++n) {
      BackwardGemm<T>(bottom_data + n * bottom_dim_, weight, top_data + n * top_dim_);
      if (bias_term_) ForwardBias<T>(top_data + n * top_dim_, blobs_[1]->cpu_data<T>());
    }
  }
}

template <typename T>
void DeconvolutionLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  const T* weight = blobs_[0]->cpu_data<T>();
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  for (size_t i = 0; i < top.size(); ++i) {
    const T* top_diff = top[i]->cpu_diff<T>();
    if (bias_down) {
      T* bias_diff = blobs_[1]->mutable_cpu_diff<T>();
      for (int64_t n = 0; n < num_; ++n) BackwardBias<T>(bias_diff, top_diff + n * top_dim_);
    }
    if (!weight_down && !propagate_down[i]) continue;
    const T* bottom_data = bottom[i]->cpu_data<T>();
    T* weight_diff = weight_down ? blobs_[0]->mutable_cpu_diff<T>() : nullptr;
    T* bottom_diff = propagate_down[i] ? bottom[i]->mutable_cpu_diff<T>() : nullptr;
    for (int64_t n = 0; n < num_; ++n) {
      // The im2col side is the top: the weight gradient reads im2col(d top) against the bottom.
      if (weight_down)
        WeightGemm<T>(top_diff + n * top_dim_, bottom_data + n * bottom_dim_, weight_diff);
      if (propagate_down[i])
        ForwardGemm<T>(top_diff + n * top_dim_, weight, bottom_diff + n * bottom_dim_);
    }
  }
}

void DeconvolutionLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
}

void DeconvolutionLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Deconvolution, DeconvolutionLayer);

}  // namespace crema
