#include "layers/prior_box/prior_box_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void PriorBoxLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PriorBoxParameter& param = layer_param_.prior_box_param();
  CREMA_CHECK_PARAM(param.min_size_size() > 0, "prior_box_param.min_size", "must be given");
  min_sizes_.clear();
  for (float size : param.min_size()) {
    CREMA_CHECK_PARAM(size > 0, "prior_box_param.min_size", "must be > 0, got ", size);
    min_sizes_.push_back(size);
  }
  aspect_ratios_.assign(1, 1.0f);
  for (float ratio : param.aspect_ratio()) {
    CREMA_CHECK_PARAM(ratio > 0, "prior_box_param.aspect_ratio", "must be > 0, got ", ratio);
    const bool seen = std::any_of(aspect_ratios_.begin(), aspect_ratios_.end(),
                                  [&](float r) { return std::fabs(ratio - r) < 1e-6; });
    if (seen) continue;
    aspect_ratios_.push_back(ratio);
    if (param.flip()) aspect_ratios_.push_back(static_cast<float>(1.0 / ratio));
  }
  num_priors_ = static_cast<int>(aspect_ratios_.size() * min_sizes_.size());
  max_sizes_.clear();
  if (param.max_size_size() > 0) {
    CREMA_CHECK_PARAM(param.max_size_size() == param.min_size_size(), "prior_box_param.max_size",
                      "must be given once per min_size (", param.min_size_size(), "), got ",
                      param.max_size_size(), " values");
    for (int i = 0; i < param.max_size_size(); ++i) {
      CREMA_CHECK_PARAM(param.max_size(i) > min_sizes_[i], "prior_box_param.max_size",
                        "must be greater than min_size: entry ", i, " is ", param.max_size(i),
                        ", min_size ", min_sizes_[i]);
      max_sizes_.push_back(param.max_size(i));
    }
    num_priors_ += static_cast<int>(max_sizes_.size());
  }
  clip_ = param.clip();
  variances_.clear();
  CREMA_CHECK_PARAM(param.variance_size() <= 1 || param.variance_size() == 4,
                    "prior_box_param.variance", "must hold 1 or 4 values, got ",
                    param.variance_size());
  for (float v : param.variance()) {
    CREMA_CHECK_PARAM(v > 0, "prior_box_param.variance", "must be > 0, got ", v);
    variances_.push_back(v);
  }
  if (variances_.empty()) variances_.push_back(0.1f);

  if (param.has_img_h() || param.has_img_w()) {
    CREMA_CHECK_PARAM(!param.has_img_size(), "prior_box_param.img_size",
                      "cannot be given together with img_h/img_w");
    CREMA_CHECK_PARAM(param.img_h() > 0, "prior_box_param.img_h", "must be > 0, got ",
                      param.img_h());
    CREMA_CHECK_PARAM(param.img_w() > 0, "prior_box_param.img_w", "must be > 0, got ",
                      param.img_w());
    img_h_ = static_cast<int>(param.img_h());
    img_w_ = static_cast<int>(param.img_w());
  } else if (param.has_img_size()) {
    CREMA_CHECK_PARAM(param.img_size() > 0, "prior_box_param.img_size", "must be > 0, got ",
                      param.img_size());
    img_h_ = img_w_ = static_cast<int>(param.img_size());
  } else {
    img_h_ = img_w_ = 0;
  }

  if (param.has_step_h() || param.has_step_w()) {
    CREMA_CHECK_PARAM(!param.has_step(), "prior_box_param.step",
                      "cannot be given together with step_h/step_w");
    CREMA_CHECK_PARAM(param.step_h() > 0, "prior_box_param.step_h", "must be > 0, got ",
                      param.step_h());
    CREMA_CHECK_PARAM(param.step_w() > 0, "prior_box_param.step_w", "must be > 0, got ",
                      param.step_w());
    step_h_ = param.step_h();
    step_w_ = param.step_w();
  } else if (param.has_step()) {
    CREMA_CHECK_PARAM(param.step() > 0, "prior_box_param.step", "must be > 0, got ", param.step());
    step_h_ = step_w_ = param.step();
  } else {
    step_h_ = step_w_ = 0;
  }
  offset_ = param.offset();
}

void PriorBoxLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (int i = 0; i < 2; ++i)
    CREMA_CHECK_SHAPE(bottom[i]->num_axes() <= 4, "PriorBox bottom ", i,
                      " must have at most 4 axes (N, C, H, W), got ", bottom[i]->shape_string());
  const int64_t dim =
      static_cast<int64_t>(bottom[0]->height()) * bottom[0]->width() * num_priors_ * 4;
  CREMA_CHECK_SHAPE(dim > 0, "PriorBox needs a non-empty feature map, got ",
                    bottom[0]->shape_string());
  CREMA_CHECK_SHAPE(top[0] != bottom[0] && top[0] != bottom[1],
                    "PriorBox does not allow in-place computation");
  top[0]->Reshape({1, 2, static_cast<int>(dim)});
}

template <typename T>
void PriorBoxLayer::ForwardT(const Blob& map, const Blob& image, Blob* top) const {
  const int layer_height = map.height();
  const int layer_width = map.width();
  const bool image_from_param = img_h_ != 0 && img_w_ != 0;
  const int img_height = image_from_param ? img_h_ : image.height();
  const int img_width = image_from_param ? img_w_ : image.width();
  float step_h = step_h_, step_w = step_w_;
  if (step_h_ == 0 || step_w_ == 0) {
    step_h = static_cast<float>(img_height) / layer_height;
    step_w = static_cast<float>(img_width) / layer_width;
  }
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t dim = static_cast<int64_t>(layer_height) * layer_width * num_priors_ * 4;
  int64_t idx = 0;
  // Coordinates are computed as SSD does: centres and sizes in float, the normalization in double.
  auto put = [&](float center_x, float center_y, float box_width, float box_height) {
    top_data[idx++] = static_cast<T>((center_x - box_width / 2.) / img_width);
    top_data[idx++] = static_cast<T>((center_y - box_height / 2.) / img_height);
    top_data[idx++] = static_cast<T>((center_x + box_width / 2.) / img_width);
    top_data[idx++] = static_cast<T>((center_y + box_height / 2.) / img_height);
  };
  for (int h = 0; h < layer_height; ++h) {
    for (int w = 0; w < layer_width; ++w) {
      const float center_x = (w + offset_) * step_w;
      const float center_y = (h + offset_) * step_h;
      for (size_t s = 0; s < min_sizes_.size(); ++s) {
        // SSD stores the sizes in ints here, dropping any fraction.
        const int min_size = static_cast<int>(min_sizes_[s]);
        put(center_x, center_y, static_cast<float>(min_size), static_cast<float>(min_size));
        if (!max_sizes_.empty()) {
          const int max_size = static_cast<int>(max_sizes_[s]);
          const auto side = static_cast<float>(std::sqrt(static_cast<double>(min_size * max_size)));
          put(center_x, center_y, side, side);
        }
        for (float ratio : aspect_ratios_) {
          if (std::fabs(ratio - 1.) < 1e-6) continue;
          const double root = std::sqrt(static_cast<double>(ratio));
          put(center_x, center_y, static_cast<float>(min_size * root),
              static_cast<float>(min_size / root));
        }
      }
    }
  }
  CREMA_ASSERT(idx == dim, "PriorBox wrote ", idx, " coordinates, expected ", dim);
  if (clip_)
    for (int64_t d = 0; d < dim; ++d) top_data[d] = std::min<T>(std::max<T>(top_data[d], 0), 1);
  T* variance_data = top_data + dim;
  for (int64_t d = 0; d < dim; ++d)
    variance_data[d] = static_cast<T>(variances_.size() == 1 ? variances_[0] : variances_[d % 4]);
}

void PriorBoxLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, ForwardT<T>(*bottom[0], *bottom[1], top[0]));
}

void PriorBoxLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  // The boxes depend only on shapes: any gradient asked for is zero.
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) bottom[i]->SetDiffZero();
}

CREMA_REGISTER_LAYER(PriorBox, PriorBoxLayer);

}  // namespace crema
