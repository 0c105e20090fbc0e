#include "layers/pooling/pooling_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void PoolingLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PoolingParameter& param = layer_param_.pooling_param();
  pool_ = param.pool();
  global_pooling_ = param.global_pooling();
  round_mode_ = param.round_mode();
  if (global_pooling_) {
    CREMA_CHECK_PARAM(!param.has_kernel_size() && !param.has_kernel_h() && !param.has_kernel_w(),
                      "pooling_param.global_pooling",
                      "takes the kernel from the bottom; do not give kernel_size or "
                      "kernel_h/kernel_w");
  } else {
    CREMA_CHECK_PARAM(!(param.has_kernel_size() && param.has_kernel_h() && param.has_kernel_w()),
                      "pooling_param.kernel_size",
                      "is given both as kernel_size and as kernel_h/kernel_w; use one or the "
                      "other");
    CREMA_CHECK_PARAM(param.has_kernel_size() || (param.has_kernel_h() && param.has_kernel_w()),
                      param.has_kernel_h() || param.has_kernel_w() ? "pooling_param.kernel_h"
                                                                   : "pooling_param.kernel_size",
                      param.has_kernel_h() || param.has_kernel_w()
                          ? "and kernel_w must both be given for a non-square kernel"
                          : "must be given (or kernel_h and kernel_w, or global_pooling: true)");
  }
  CREMA_CHECK_PARAM((!param.has_pad() && param.has_pad_h() && param.has_pad_w()) ||
                        (!param.has_pad_h() && !param.has_pad_w()),
                    param.has_pad() ? "pooling_param.pad" : "pooling_param.pad_h",
                    param.has_pad()
                        ? "is given both as pad and as pad_h/pad_w; use one or the other"
                        : "and pad_w must both be given");
  CREMA_CHECK_PARAM((!param.has_stride() && param.has_stride_h() && param.has_stride_w()) ||
                        (!param.has_stride_h() && !param.has_stride_w()),
                    param.has_stride() ? "pooling_param.stride" : "pooling_param.stride_h",
                    param.has_stride()
                        ? "is given both as stride and as stride_h/stride_w; use one or the other"
                        : "and stride_w must both be given");
  if (global_pooling_) {
    kernel_h_ = bottom[0]->height();
    kernel_w_ = bottom[0]->width();
  } else if (param.has_kernel_size()) {
    kernel_h_ = kernel_w_ = static_cast<int>(param.kernel_size());
  } else {
    kernel_h_ = static_cast<int>(param.kernel_h());
    kernel_w_ = static_cast<int>(param.kernel_w());
  }
  if (!global_pooling_) {
    const char* field = param.has_kernel_size() ? "pooling_param.kernel_size" : nullptr;
    CREMA_CHECK_PARAM(kernel_h_ > 0, field ? field : "pooling_param.kernel_h", "must be > 0, got ",
                      kernel_h_);
    CREMA_CHECK_PARAM(kernel_w_ > 0, field ? field : "pooling_param.kernel_w", "must be > 0, got ",
                      kernel_w_);
  }
  if (param.has_pad_h()) {
    pad_h_ = static_cast<int>(param.pad_h());
    pad_w_ = static_cast<int>(param.pad_w());
  } else {
    pad_h_ = pad_w_ = static_cast<int>(param.pad());
  }
  if (param.has_stride_h()) {
    stride_h_ = static_cast<int>(param.stride_h());
    stride_w_ = static_cast<int>(param.stride_w());
  } else {
    stride_h_ = stride_w_ = static_cast<int>(param.stride());
  }
  const bool hw_stride = param.has_stride_h();
  CREMA_CHECK_PARAM(stride_h_ > 0, hw_stride ? "pooling_param.stride_h" : "pooling_param.stride",
                    "must be > 0, got ", stride_h_);
  CREMA_CHECK_PARAM(stride_w_ > 0, hw_stride ? "pooling_param.stride_w" : "pooling_param.stride",
                    "must be > 0, got ", stride_w_);
  if (global_pooling_) {
    CREMA_CHECK_PARAM(pad_h_ == 0 && pad_w_ == 0 && stride_h_ == 1 && stride_w_ == 1,
                      "pooling_param.global_pooling", "needs pad 0 and stride 1, got pad ", pad_h_,
                      "x", pad_w_, " and stride ", stride_h_, "x", stride_w_);
  }
  if (pad_h_ != 0 || pad_w_ != 0) {
    const bool hw_pad = param.has_pad_h();
    CREMA_CHECK_PARAM(pool_ == PoolingParameter::AVE || pool_ == PoolingParameter::MAX,
                      hw_pad ? "pooling_param.pad_h" : "pooling_param.pad",
                      "is only supported for MAX and AVE pooling, got pool: ",
                      PoolingParameter::PoolMethod_Name(pool_));
    CREMA_CHECK_PARAM(pad_h_ < kernel_h_, hw_pad ? "pooling_param.pad_h" : "pooling_param.pad",
                      "must be < the kernel height ", kernel_h_, ", got ", pad_h_);
    CREMA_CHECK_PARAM(pad_w_ < kernel_w_, hw_pad ? "pooling_param.pad_w" : "pooling_param.pad",
                      "must be < the kernel width ", kernel_w_, ", got ", pad_w_);
  }
}

void PoolingLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() == 4,
                    "the bottom must have 4 axes (num, channels, height, width), got ",
                    bottom[0]->shape_string());
  for (Blob* t : top) CREMA_CHECK_SHAPE(t != bottom[0], "does not support in-place computation");
  channels_ = bottom[0]->channels();
  height_ = bottom[0]->height();
  width_ = bottom[0]->width();
  if (global_pooling_) {
    kernel_h_ = height_;
    kernel_w_ = width_;
  }
  // As Caffe: the division is done in float and rounded up (or down with round_mode: FLOOR).
  auto pooled = [&](int size, int pad, int kernel, int stride) {
    const float windows = static_cast<float>(size + 2 * pad - kernel) / stride;
    return static_cast<int>(round_mode_ == PoolingParameter::FLOOR ? std::floor(windows)
                                                                   : std::ceil(windows)) +
           1;
  };
  pooled_height_ = pooled(height_, pad_h_, kernel_h_, stride_h_);
  pooled_width_ = pooled(width_, pad_w_, kernel_w_, stride_w_);
  if (pad_h_ || pad_w_) {
    // The last window must start inside the image or its leading padding, never beyond it.
    if ((pooled_height_ - 1) * stride_h_ >= height_ + pad_h_) --pooled_height_;
    if ((pooled_width_ - 1) * stride_w_ >= width_ + pad_w_) --pooled_width_;
  }
  CREMA_CHECK_SHAPE(pooled_height_ > 0 && pooled_width_ > 0, "the kernel ", kernel_h_, "x",
                    kernel_w_, " (pad ", pad_h_, "x", pad_w_, ") does not fit bottom ",
                    bottom[0]->shape_string(), ": the output would be empty");
  top[0]->Reshape(bottom[0]->num(), channels_, pooled_height_, pooled_width_);
  if (top.size() > 1) top[1]->ReshapeLike(*top[0]);
  if ((pool_ == PoolingParameter::MAX && top.size() == 1) || pool_ == PoolingParameter::STOCHASTIC)
    max_idx_.resize(top[0]->count());
}

template <typename T>
void PoolingLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* bottom_data = bottom[0]->cpu_data<T>();
  T* top_data = top[0]->mutable_cpu_data<T>();
  const int64_t top_count = top[0]->count();
  const int num = bottom[0]->num();
  const int64_t bottom_plane = static_cast<int64_t>(height_) * width_;
  const int64_t top_plane = static_cast<int64_t>(pooled_height_) * pooled_width_;
  switch (pool_) {
    case PoolingParameter::MAX: {
      const bool use_top_mask = top.size() > 1;
      T* top_mask = use_top_mask ? top[1]->mutable_cpu_data<T>() : nullptr;
      int* mask = use_top_mask ? nullptr : max_idx_.data();
      if (use_top_mask)
        cpu::Set<T>(top_count, T(-1), top_mask);
      else
        std::fill(max_idx_.begin(), max_idx_.end(), -1);
      cpu::Set<T>(top_count, static_cast<T>(-FLT_MAX), top_data);
      for (int64_t plane = 0; plane < static_cast<int64_t>(num) * channels_; ++plane) {
        for (int ph = 0; ph < pooled_height_; ++ph) {
          for (int pw = 0; pw < pooled_width_; ++pw) {
            int hstart = ph * stride_h_ - pad_h_;
            int wstart = pw * stride_w_ - pad_w_;
            const int hend = std::min(hstart + kernel_h_, height_);
            const int wend = std::min(wstart + kernel_w_, width_);
            hstart = std::max(hstart, 0);
            wstart = std::max(wstart, 0);
            const int pool_index = ph * pooled_width_ + pw;
            for (int h = hstart; h < hend; ++h) {
              for (int w = wstart; w < wend; ++w) {
                const int index = h * width_ + w;
                if (bottom_data[index] > top_data[pool_index]) {
                  top_data[pool_index] = bottom_data[index];
                  if (use_top_mask)
                    top_mask[pool_index] = static_cast<T>(index);
                  else
                    mask[pool_index] = index;
                }
              }
            }
          }
        }
        bottom_data += bottom_plane;
        top_data += top_plane;
        if (use_top_mask)
          top_mask += top_plane;
        else
          mask += top_plane;
      }
      break;
    }
    case PoolingParameter::AVE: {
      cpu::Set<T>(top_count, T(0), top_data);
      for (int64_t plane = 0; plane < static_cast<int64_t>(num) * channels_; ++plane) {
        for (int ph = 0; ph < pooled_height_; ++ph) {
          for (int pw = 0; pw < pooled_width_; ++pw) {
            int hstart = ph * stride_h_ - pad_h_;
            int wstart = pw * stride_w_ - pad_w_;
            int hend = std::min(hstart + kernel_h_, height_ + pad_h_);
            int wend = std::min(wstart + kernel_w_, width_ + pad_w_);
            const int pool_size = (hend - hstart) * (wend - wstart);
            hstart = std::max(hstart, 0);
            wstart = std::max(wstart, 0);
            hend = std::min(hend, height_);
            wend = std::min(wend, width_);
            T sum = 0;
            for (int h = hstart; h < hend; ++h)
              for (int w = wstart; w < wend; ++w) sum += bottom_data[h * width_ + w];
            top_data[ph * pooled_width_ + pw] = sum / pool_size;
          }
        }
        bottom_data += bottom_plane;
        top_data += top_plane;
      }
      break;
    }
    case PoolingParameter::STOCHASTIC: {
      const bool train = phase_ == TRAIN;
      // Drawn in double whatever T is, so float32 and float64 runs sample the same cells.
      std::vector<double> rand(train ? top_count : 0);
      if (train) cpu::RngUniform<double>(top_count, 0.0, 1.0, rand.data());
      int64_t top_index = 0;
      for (int64_t plane = 0; plane < static_cast<int64_t>(num) * channels_; ++plane) {
        for (int ph = 0; ph < pooled_height_; ++ph) {
          for (int pw = 0; pw < pooled_width_; ++pw, ++top_index) {
            const int hstart = ph * stride_h_;
            const int wstart = pw * stride_w_;
            const int hend = std::min(hstart + kernel_h_, height_);
            const int wend = std::min(wstart + kernel_w_, width_);
            T* out = top_data + ph * pooled_width_ + pw;
            if (train) {
              T cumsum = 0;
              for (int h = hstart; h < hend; ++h)
                for (int w = wstart; w < wend; ++w) cumsum += bottom_data[h * width_ + w];
              const T threshold = static_cast<T>(rand[top_index]) * cumsum;
              cumsum = 0;
              // As Caffe's kernel: the first cell whose running sum reaches the threshold.
              int chosen = hstart * width_ + wstart;
              for (int h = hstart; h < hend; ++h) {
                for (int w = wstart; w < wend; ++w) {
                  cumsum += bottom_data[h * width_ + w];
                  if (cumsum >= threshold) {
                    chosen = h * width_ + w;
                    h = hend;
                    break;
                  }
                }
              }
              max_idx_[top_index] = chosen;
              *out = bottom_data[chosen];
            } else {
              T cumsum = static_cast<T>(FLT_MIN);
              T cumvalues = 0;
              for (int h = hstart; h < hend; ++h) {
                for (int w = wstart; w < wend; ++w) {
                  const T v = bottom_data[h * width_ + w];
                  cumsum += v;
                  cumvalues += v * v;
                }
              }
              *out = cumvalues / cumsum;
            }
          }
        }
        bottom_data += bottom_plane;
        top_data += top_plane;
      }
      break;
    }
    default:
      CREMA_CHECK_PARAM(false, "pooling_param.pool", "unknown method ", static_cast<int>(pool_));
  }
}

template <typename T>
void PoolingLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const T* top_diff = top[0]->cpu_diff<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  cpu::Set<T>(bottom[0]->count(), T(0), bottom_diff);
  const int num = bottom[0]->num();
  const int64_t bottom_plane = static_cast<int64_t>(height_) * width_;
  const int64_t top_plane = static_cast<int64_t>(pooled_height_) * pooled_width_;
  const int64_t planes = static_cast<int64_t>(num) * channels_;
  switch (pool_) {
    case PoolingParameter::MAX: {
      const bool use_top_mask = top.size() > 1;
      const T* top_mask = use_top_mask ? top[1]->cpu_data<T>() : nullptr;
      const int* mask = use_top_mask ? nullptr : max_idx_.data();
      for (int64_t plane = 0; plane < planes; ++plane) {
        for (int64_t i = 0; i < top_plane; ++i) {
          const int index = use_top_mask ? static_cast<int>(top_mask[i]) : mask[i];
          if (index >= 0) bottom_diff[index] += top_diff[i];
        }
        bottom_diff += bottom_plane;
        top_diff += top_plane;
        if (use_top_mask)
          top_mask += top_plane;
        else
          mask += top_plane;
      }
      break;
    }
    case PoolingParameter::AVE: {
      for (int64_t plane = 0; plane < planes; ++plane) {
        for (int ph = 0; ph < pooled_height_; ++ph) {
          for (int pw = 0; pw < pooled_width_; ++pw) {
            int hstart = ph * stride_h_ - pad_h_;
            int wstart = pw * stride_w_ - pad_w_;
            int hend = std::min(hstart + kernel_h_, height_ + pad_h_);
            int wend = std::min(wstart + kernel_w_, width_ + pad_w_);
            const int pool_size = (hend - hstart) * (wend - wstart);
            hstart = std::max(hstart, 0);
            wstart = std::max(wstart, 0);
            hend = std::min(hend, height_);
            wend = std::min(wend, width_);
            const T g = top_diff[ph * pooled_width_ + pw] / pool_size;
            for (int h = hstart; h < hend; ++h)
              for (int w = wstart; w < wend; ++w) bottom_diff[h * width_ + w] += g;
          }
        }
        bottom_diff += bottom_plane;
        top_diff += top_plane;
      }
      break;
    }
    case PoolingParameter::STOCHASTIC: {
      if (phase_ == TRAIN) {
        const int* idx = max_idx_.data();
        for (int64_t plane = 0; plane < planes; ++plane) {
          for (int64_t i = 0; i < top_plane; ++i) bottom_diff[idx[i]] += top_diff[i];
          bottom_diff += bottom_plane;
          top_diff += top_plane;
          idx += top_plane;
        }
        break;
      }
      // TEST: y = S2 / S1 with S1 = sum x, S2 = sum x^2, so dy/dx = (2 x S1 - S2) / S1^2.
      const T* bottom_data = bottom[0]->cpu_data<T>();
      for (int64_t plane = 0; plane < planes; ++plane) {
        for (int ph = 0; ph < pooled_height_; ++ph) {
          for (int pw = 0; pw < pooled_width_; ++pw) {
            const int hstart = ph * stride_h_;
            const int wstart = pw * stride_w_;
            const int hend = std::min(hstart + kernel_h_, height_);
            const int wend = std::min(wstart + kernel_w_, width_);
            T s1 = static_cast<T>(FLT_MIN);
            T s2 = 0;
            for (int h = hstart; h < hend; ++h) {
              for (int w = wstart; w < wend; ++w) {
                const T v = bottom_data[h * width_ + w];
                s1 += v;
                s2 += v * v;
              }
            }
            const T g = top_diff[ph * pooled_width_ + pw];
            for (int h = hstart; h < hend; ++h)
              for (int w = wstart; w < wend; ++w)
                bottom_diff[h * width_ + w] +=
                    g * (2 * bottom_data[h * width_ + w] * s1 - s2) / (s1 * s1);
          }
        }
        bottom_data += bottom_plane;
        bottom_diff += bottom_plane;
        top_diff += top_plane;
      }
      break;
    }
    default:
      break;
  }
}

void PoolingLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
}

void PoolingLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Pooling, PoolingLayer);

}  // namespace crema
