#include "layers/spp/spp_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void SPPLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SPPParameter& param = layer_param_.spp_param();
  pyramid_height_ = static_cast<int>(param.pyramid_height());
  CREMA_CHECK_PARAM(pyramid_height_ >= 1, "spp_param.pyramid_height", "must be >= 1, got ",
                    param.pyramid_height());
  CREMA_CHECK_PARAM(pyramid_height_ <= 16, "spp_param.pyramid_height",
                    "must be <= 16 (2^15 bins per side at the top level), got ", pyramid_height_);
  level_bottom_.set_dtype(dtype());
}

void SPPLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() == 4,
                    "needs a bottom of 4 axes (num, channels, height, width), got ",
                    bottom[0]->shape_string());
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "does not support in-place computation");
  const int height = bottom[0]->shape(2), width = bottom[0]->shape(3);
  CREMA_CHECK_SHAPE(height > 0 && width > 0, "needs a bottom with non-empty planes, got ",
                    bottom[0]->shape_string());
  if (bottom[0]->shape() != bottom_shape_) {
    // The kernels follow the image size: rebuild the levels.
    bottom_shape_ = bottom[0]->shape();
    pooling_layers_.clear();
    pooled_.clear();
    for (int level = 0; level < pyramid_height_; ++level) {
      const int bins = 1 << level;
      const int kernel_h = (height + bins - 1) / bins, kernel_w = (width + bins - 1) / bins;
      const int pad_h = (kernel_h * bins - height + 1) / 2;
      const int pad_w = (kernel_w * bins - width + 1) / 2;
      CREMA_CHECK_SHAPE(pad_h < kernel_h && pad_w < kernel_w, "bottom ", bottom[0]->shape_string(),
                        " is too small for spp_param.pyramid_height ", pyramid_height_, ": level ",
                        level, " needs ", bins, " x ", bins, " bins (kernel ", kernel_h, " x ",
                        kernel_w, ", pad ", pad_h, " x ", pad_w, ")");
      LayerParameter param;
      param.set_name(StrCat(name(), "_pool", level));
      param.set_type("Pooling");
      param.set_phase(phase_);
      PoolingParameter* pooling = param.mutable_pooling_param();
      pooling->set_pool(static_cast<PoolingParameter::PoolMethod>(layer_param_.spp_param().pool()));
      pooling->set_kernel_h(kernel_h);
      pooling->set_kernel_w(kernel_w);
      pooling->set_stride_h(kernel_h);
      pooling->set_stride_w(kernel_w);
      pooling->set_pad_h(pad_h);
      pooling->set_pad_w(pad_w);
      pooling_layers_.push_back(LayerRegistry::Create(param));
      pooling_layers_.back()->set_dtype(dtype());
      pooling_layers_.back()->set_device(device());
      pooled_.push_back(std::make_unique<Blob>(dtype()));
      pooling_layers_.back()->SetUp({bottom[0]}, {pooled_.back().get()});
    }
  } else {
    for (int level = 0; level < pyramid_height_; ++level)
      pooling_layers_[level]->Reshape({bottom[0]}, {pooled_[level].get()});
  }
  offsets_.clear();
  row_ = 0;
  for (const auto& pooled : pooled_) {
    offsets_.push_back(row_);
    row_ += pooled->count(1);
  }
  if (pyramid_height_ == 1)
    top[0]->ReshapeLike(*pooled_[0]);
  else
    top[0]->Reshape({bottom[0]->shape(0), static_cast<int>(row_)});
  level_bottom_.ReshapeLike(*bottom[0]);
}

template <typename T>
void SPPLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const int num = bottom[0]->shape(0);
  T* top_data = top[0]->mutable_cpu_data<T>();
  for (int level = 0; level < pyramid_height_; ++level) {
    pooling_layers_[level]->Forward({bottom[0]}, {pooled_[level].get()});
    const T* pooled = pooled_[level]->cpu_data<T>();
    const int64_t dim = pooled_[level]->count(1);
    for (int n = 0; n < num; ++n)
      for (int64_t i = 0; i < dim; ++i)
        top_data[n * row_ + offsets_[level] + i] = pooled[n * dim + i];
  }
}

template <typename T>
void SPPLayer::BackwardT(const BlobVec& top, const BlobVec& bottom) {
  const int num = bottom[0]->shape(0);
  const T* top_diff = top[0]->cpu_diff<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  const int64_t count = bottom[0]->count();
  for (int64_t i = 0; i < count; ++i) bottom_diff[i] = 0;
  level_bottom_.ShareData(*bottom[0]);
  for (int level = 0; level < pyramid_height_; ++level) {
    T* pooled_diff = pooled_[level]->mutable_cpu_diff<T>();
    const int64_t dim = pooled_[level]->count(1);
    for (int n = 0; n < num; ++n)
      for (int64_t i = 0; i < dim; ++i)
        pooled_diff[n * dim + i] = top_diff[n * row_ + offsets_[level] + i];
    pooling_layers_[level]->Backward({pooled_[level].get()}, {true}, {&level_bottom_});
    const T* level_diff = level_bottom_.cpu_diff<T>();
    bottom_diff = bottom[0]->mutable_cpu_diff<T>();
    for (int64_t i = 0; i < count; ++i) bottom_diff[i] += level_diff[i];
  }
}

void SPPLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
}

void SPPLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, bottom));
}

CREMA_REGISTER_LAYER(SPP, SPPLayer);

}  // namespace crema
