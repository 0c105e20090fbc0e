#include "layers/upsample/upsample_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void UpsampleLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const UpsampleParameter& param = layer_param_.upsample_param();
  bilinear_ = param.mode() == UpsampleParameter::BILINEAR;
  CREMA_CHECK_PARAM(!param.has_align_corners() || bilinear_, "upsample_param.align_corners",
                    "applies to mode BILINEAR only (mode is NEAREST)");
  align_corners_ = param.align_corners();
  CREMA_CHECK_PARAM(
      param.has_upsample_h() == param.has_upsample_w(),
      param.has_upsample_h() ? "upsample_param.upsample_w" : "upsample_param.upsample_h",
      "must be given together with ", param.has_upsample_h() ? "upsample_h" : "upsample_w");
  CREMA_CHECK_PARAM(param.has_scale_h() == param.has_scale_w(),
                    param.has_scale_h() ? "upsample_param.scale_w" : "upsample_param.scale_h",
                    "must be given together with ", param.has_scale_h() ? "scale_h" : "scale_w");
  if (param.has_upsample_h()) {
    CREMA_CHECK_PARAM(!param.has_scale() && !param.has_scale_h(), "upsample_param.upsample_h",
                      "gives the output size; do not give scale or scale_h/scale_w with it");
    CREMA_CHECK_PARAM(param.upsample_h() > 0, "upsample_param.upsample_h", "must be > 0, got ",
                      param.upsample_h());
    CREMA_CHECK_PARAM(param.upsample_w() > 0, "upsample_param.upsample_w", "must be > 0, got ",
                      param.upsample_w());
    upsample_h_ = static_cast<int>(param.upsample_h());
    upsample_w_ = static_cast<int>(param.upsample_w());
    return;
  }
  if (param.has_scale_h()) {
    CREMA_CHECK_PARAM(!param.has_scale(), "upsample_param.scale",
                      "and scale_h/scale_w both given; give one or the other");
    CREMA_CHECK_PARAM(param.scale_h() > 0, "upsample_param.scale_h", "must be > 0, got ",
                      param.scale_h());
    CREMA_CHECK_PARAM(param.scale_w() > 0, "upsample_param.scale_w", "must be > 0, got ",
                      param.scale_w());
    scale_h_ = static_cast<int>(param.scale_h());
    scale_w_ = static_cast<int>(param.scale_w());
  } else {
    CREMA_CHECK_PARAM(param.scale() > 0, "upsample_param.scale", "must be > 0, got ",
                      param.scale());
    scale_h_ = scale_w_ = static_cast<int>(param.scale());
  }
}

void UpsampleLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Upsample does not allow in-place computation");
  const Blob& in = *bottom[0];
  CREMA_CHECK_SHAPE(in.num_axes() >= 2,
                    "Upsample needs a bottom with at least 2 axes (..., H, W), got ",
                    in.shape_string());
  std::vector<int> shape = in.shape();
  const int axes = in.num_axes();
  const int64_t height = shape[axes - 2], width = shape[axes - 1];
  CREMA_CHECK_SHAPE(height > 0 && width > 0, "Upsample needs a non-empty H x W, got ",
                    in.shape_string());
  const int64_t out_h = upsample_h_ > 0 ? upsample_h_ : height * scale_h_;
  const int64_t out_w = upsample_w_ > 0 ? upsample_w_ : width * scale_w_;
  CREMA_CHECK_SHAPE(out_h <= INT32_MAX && out_w <= INT32_MAX, "Upsample output ", out_h, " x ",
                    out_w, " is too large");
  shape[axes - 2] = static_cast<int>(out_h);
  shape[axes - 1] = static_cast<int>(out_w);
  top[0]->Reshape(shape);
}

std::vector<UpsampleLayer::Tap> UpsampleLayer::Taps(int in_size, int out_size) const {
  std::vector<Tap> taps(out_size);
  for (int o = 0; o < out_size; ++o) {
    Tap& t = taps[o];
    if (!bilinear_) {
      t.first = t.second = static_cast<int>(
          std::min<int64_t>(static_cast<int64_t>(o) * in_size / out_size, in_size - 1));
      continue;
    }
    double source;
    if (align_corners_)
      source = out_size > 1 ? static_cast<double>(o) * (in_size - 1) / (out_size - 1) : 0.0;
    else
      source = std::max(0.0, (o + 0.5) * in_size / out_size - 0.5);
    t.first = std::min(static_cast<int>(source), in_size - 1);
    t.second = std::min(t.first + 1, in_size - 1);
    t.lambda = t.second == t.first ? 0.0 : source - t.first;
  }
  return taps;
}

template <typename T>
void UpsampleLayer::Forward(const Blob& bottom, Blob* top) const {
  const int axes = bottom.num_axes();
  const int in_h = bottom.shape(axes - 2), in_w = bottom.shape(axes - 1);
  const int out_h = top->shape(axes - 2), out_w = top->shape(axes - 1);
  const std::vector<Tap> rows = Taps(in_h, out_h), cols = Taps(in_w, out_w);
  cpu::ResizeForward(bottom.cpu_data<T>(), bottom.count(0, axes - 2), in_h, in_w, rows, cols,
                     bilinear_, top->mutable_cpu_data<T>());
}

template <typename T>
void UpsampleLayer::Backward(const Blob& top, Blob* bottom) const {
  const int axes = bottom->num_axes();
  const int in_h = bottom->shape(axes - 2), in_w = bottom->shape(axes - 1);
  const int out_h = top.shape(axes - 2), out_w = top.shape(axes - 1);
  const std::vector<Tap> rows = Taps(in_h, out_h), cols = Taps(in_w, out_w);
  cpu::ResizeBackward(top.cpu_diff<T>(), bottom->count(0, axes - 2), in_h, in_w, rows, cols,
                      bilinear_, bottom->mutable_cpu_diff<T>());
}

void UpsampleLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void UpsampleLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Upsample, UpsampleLayer);

}  // namespace crema
