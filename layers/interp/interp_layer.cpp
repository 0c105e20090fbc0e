#include "layers/interp/interp_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void InterpLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InterpParameter& param = layer_param_.interp_param();
  pad_beg_ = param.pad_beg();
  pad_end_ = param.pad_end();
  CREMA_CHECK_PARAM(pad_beg_ <= 0, "interp_param.pad_beg",
                    "must be <= 0 (only cropping is supported), got ", pad_beg_);
  CREMA_CHECK_PARAM(pad_end_ <= 0, "interp_param.pad_end",
                    "must be <= 0 (only cropping is supported), got ", pad_end_);
  if (param.has_shrink_factor())
    CREMA_CHECK_PARAM(param.shrink_factor() >= 1, "interp_param.shrink_factor",
                      "must be >= 1, got ", param.shrink_factor());
  if (param.has_zoom_factor())
    CREMA_CHECK_PARAM(param.zoom_factor() >= 1, "interp_param.zoom_factor", "must be >= 1, got ",
                      param.zoom_factor());
  CREMA_CHECK_PARAM(param.has_height() == param.has_width(),
                    param.has_height() ? "interp_param.width" : "interp_param.height",
                    "must be given together with ", param.has_height() ? "height" : "width");
  if (param.has_height()) {
    CREMA_CHECK_PARAM(param.height() > 0, "interp_param.height", "must be > 0, got ",
                      param.height());
    CREMA_CHECK_PARAM(param.width() > 0, "interp_param.width", "must be > 0, got ", param.width());
  }
  CREMA_CHECK_PARAM(bottom.size() > 1 || param.has_zoom_factor() || param.has_shrink_factor() ||
                        param.has_height(),
                    "interp_param",
                    "must give the output size: zoom_factor, shrink_factor, height and width, or "
                    "a second bottom");
}

void InterpLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Interp does not allow in-place computation");
  const InterpParameter& param = layer_param_.interp_param();
  const Blob& in = *bottom[0];
  const int axes = in.num_axes();
  CREMA_CHECK_SHAPE(axes >= 2, "Interp needs a bottom with at least 2 axes (..., H, W), got ",
                    in.shape_string());
  const int height_eff = in.shape(axes - 2) + pad_beg_ + pad_end_;
  const int width_eff = in.shape(axes - 1) + pad_beg_ + pad_end_;
  CREMA_CHECK_PARAM(height_eff > 0 && width_eff > 0, "interp_param.pad_beg",
                    "and pad_end crop the whole input: ", in.shape_string(), " cropped by ",
                    -pad_beg_, " + ", -pad_end_, " leaves ", height_eff, " x ", width_eff);
  int height_out = 0, width_out = 0;
  if (bottom.size() > 1) {
    const Blob& like = *bottom[1];
    CREMA_CHECK_SHAPE(like.num_axes() >= 2, "bottom 1 ", like.shape_string(),
                      " must have at least 2 axes (..., H, W)");
    height_out = like.shape(like.num_axes() - 2);
    width_out = like.shape(like.num_axes() - 1);
  } else if (param.has_shrink_factor() && !param.has_zoom_factor()) {
    height_out = (height_eff - 1) / param.shrink_factor() + 1;
    width_out = (width_eff - 1) / param.shrink_factor() + 1;
  } else if (param.has_zoom_factor() && !param.has_shrink_factor()) {
    height_out = height_eff + (height_eff - 1) * (param.zoom_factor() - 1);
    width_out = width_eff + (width_eff - 1) * (param.zoom_factor() - 1);
  } else if (param.has_height()) {
    height_out = param.height();
    width_out = param.width();
  } else {
    height_out = (height_eff - 1) / param.shrink_factor() + 1;
    width_out = (width_eff - 1) / param.shrink_factor() + 1;
    height_out = height_out + (height_out - 1) * (param.zoom_factor() - 1);
    width_out = width_out + (width_out - 1) * (param.zoom_factor() - 1);
  }
  CREMA_CHECK_SHAPE(height_out > 0 && width_out > 0, "Interp output size must be positive, got ",
                    height_out, " x ", width_out);
  std::vector<int> shape = in.shape();
  shape[axes - 2] = height_out;
  shape[axes - 1] = width_out;
  top[0]->Reshape(shape);
}

std::vector<InterpLayer::Tap> InterpLayer::Taps(int crop, int in_eff, int out_size) {
  std::vector<Tap> taps(out_size);
  const double ratio =
      in_eff == out_size ? 1.0
                         : (out_size > 1 ? static_cast<double>(in_eff - 1) / (out_size - 1) : 0.0);
  for (int o = 0; o < out_size; ++o) {
    const double source = ratio * o;
    const int index = std::min(static_cast<int>(source), in_eff - 1);
    Tap& t = taps[o];
    t.first = crop + index;
    t.second = crop + (index < in_eff - 1 ? index + 1 : index);
    t.lambda = t.second == t.first ? 0.0 : source - index;
  }
  return taps;
}

template <typename T>
void InterpLayer::Forward(const Blob& bottom, Blob* top) const {
  const int axes = bottom.num_axes();
  const int in_h = bottom.shape(axes - 2), in_w = bottom.shape(axes - 1);
  const int out_h = top->shape(axes - 2), out_w = top->shape(axes - 1);
  const std::vector<Tap> rows = Taps(-pad_beg_, in_h + pad_beg_ + pad_end_, out_h);
  const std::vector<Tap> cols = Taps(-pad_beg_, in_w + pad_beg_ + pad_end_, out_w);
  cpu::ResizeForward(bottom.cpu_data<T>(), bottom.count(0, axes - 2), in_h, in_w, rows, cols,
                     true, top->mutable_cpu_data<T>());
}

template <typename T>
void InterpLayer::Backward(const Blob& top, Blob* bottom) const {
  const int axes = bottom->num_axes();
  const int in_h = bottom->shape(axes - 2), in_w = bottom->shape(axes - 1);
  const int out_h = top.shape(axes - 2), out_w = top.shape(axes - 1);
  const std::vector<Tap> rows = Taps(-pad_beg_, in_h + pad_beg_ + pad_end_, out_h);
  const std::vector<Tap> cols = Taps(-pad_beg_, in_w + pad_beg_ + pad_end_, out_w);
  cpu::ResizeBackward(top.cpu_diff<T>(), bottom->count(0, axes - 2), in_h, in_w, rows, cols,
                      true, bottom->mutable_cpu_diff<T>());
}

void InterpLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void InterpLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  // bottom[1] only gives a size; its diff reads as zero.
  if (bottom.size() > 1 && propagate_down[1]) bottom[1]->SetDiffZero();
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Interp, InterpLayer);

}  // namespace crema
