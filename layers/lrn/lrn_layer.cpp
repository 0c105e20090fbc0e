#include "layers/lrn/lrn_layer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "crema/layer_registry.hpp"
#include "math/cpu_isa.hpp"

namespace crema {

void LRNLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LRNParameter& param = layer_param_.lrn_param();
  size_ = static_cast<int>(param.local_size());
  CREMA_CHECK_PARAM(size_ % 2 == 1, "lrn_param.local_size", "must be odd, got ", size_);
  across_channels_ = param.norm_region() == LRNParameter::ACROSS_CHANNELS;
  alpha_ = param.alpha();
  beta_ = param.beta();
  k_ = param.k();
  scale_.set_dtype(dtype());
  buffer_.set_dtype(dtype());
  sums_.set_dtype(dtype());
}

void LRNLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() == 4,
                    "needs a bottom of 4 axes (num, channels, height, width), got ",
                    bottom[0]->shape_string());
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "does not support in-place computation");
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  // WITHIN_CHANNEL's per-image buffers (ACROSS_CHANNELS keeps a chunk per thread).
  buffer_.Reshape(across_channels_ ? std::vector<int>{0}
                                   : std::vector<int>{channels_, height_, width_});
  sums_.Reshape(across_channels_ ? std::vector<int>{0}
                                 : std::vector<int>{channels_, height_, width_});
}

template <typename T>
void LRNLayer::WindowSum(const T* in, T* out) const {
  const int half = (size_ - 1) / 2;
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  for (int c = 0; c < channels_; ++c) {
    const T* i = in + c * plane;
    T* o = out + c * plane;
    for (int h = 0; h < height_; ++h)
      for (int w = 0; w < width_; ++w) {
        T sum = 0;
        for (int hh = std::max(0, h - half); hh <= std::min(height_ - 1, h + half); ++hh)
          for (int ww = std::max(0, w - half); ww <= std::min(width_ - 1, w + half); ++ww)
            sum += i[hh * width_ + ww];
        o[h * width_ + w] = sum;
      }
  }
}

namespace {

// s^-beta; for Caffe's default beta 0.75 as 1 / (sqrt(s) * sqrt(sqrt(s))) (within two units in
// the last place of pow, and vectorised, where pow is a library call per element).
template <typename T>
CREMA_ISA_INLINE inline T PowNegBeta(T s, T neg_beta, bool three_quarters) {
  if (three_quarters) {
    const T root = std::sqrt(s);
    return T(1) / (root * std::sqrt(root));
  }
  return std::pow(s, neg_beta);
}

// The positions of a plane one pass of ACROSS_CHANNELS handles: all channels of `kChunk`
// neighbouring positions, so that a chunk's values stay in the L1/L2 cache between the squares,
// the window sums and the output, and the chunks of all images run in parallel.
constexpr int64_t kChunk = 64;

// Calls body(values, at, len) for each image and chunk of `plane` positions, in parallel; `at` is
// the chunk's first element in channel 0, `values` the thread's channels x kChunk scratch.
template <typename T, typename Body>
void ForEachChunk(int num, int channels, int64_t plane, const Body& body) {
  const int64_t chunks = (plane + kChunk - 1) / kChunk;
#pragma omp parallel if (num * channels * plane > 32768)
  {
    std::vector<T> values(static_cast<size_t>(channels) * kChunk);
#pragma omp for
    for (int64_t item = 0; item < num * chunks; ++item) {
      const int64_t p0 = (item % chunks) * kChunk;
      body(values.data(), item / chunks * channels * plane + p0, std::min(kChunk, plane - p0));
    }
  }
}

// sum[j] = the values of channels c - half .. c + half (those that exist) at position j, added
// in channel order.
template <typename T>
CREMA_ISA_INLINE inline void ChannelWindowSum(const T* values, int c, int half, int channels,
                                              int64_t len, T* sum) {
  for (int64_t j = 0; j < len; ++j) sum[j] = T(0);
  for (int cc = std::max(0, c - half); cc <= std::min(channels - 1, c + half); ++cc)
    for (int64_t j = 0; j < len; ++j) sum[j] += values[cc * kChunk + j];
}

}  // namespace

// ACROSS_CHANNELS, forward: for each (image, chunk of positions), the squares of all channels,
// then per channel the window sum (summed in channel order, as WindowSum), s and y.
template <typename T>
void LRNLayer::ForwardAcross(const Blob& bottom, Blob* top) {
  const int half = (size_ - 1) / 2;
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  const T base = static_cast<T>(k_);
  const T coeff = static_cast<T>(alpha_ / size_);
  const T neg_beta = static_cast<T>(-beta_);
  const bool three_quarters = beta_ == 0.75;
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  T* scale = forward_only() ? nullptr : scale_.mutable_cpu_data<T>();
  ForEachChunk<T>(num_, channels_, plane, [&](T* squares, int64_t at, int64_t len) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      for (int c = 0; c < channels_; ++c) {
        const T* x = bottom_data + at + c * plane;
        T* sq = squares + c * kChunk;
        for (int64_t j = 0; j < len; ++j) sq[j] = x[j] * x[j];
      }
      for (int c = 0; c < channels_; ++c) {
        const T* x = bottom_data + at + c * plane;
        T* y = top_data + at + c * plane;
        T* s_out = scale != nullptr ? scale + at + c * plane : nullptr;
        T sum[kChunk];
        ChannelWindowSum(squares, c, half, channels_, len, sum);
        for (int64_t j = 0; j < len; ++j) {
          const T s = base + coeff * sum[j];
          if (s_out != nullptr) s_out[j] = s;
          y[j] = x[j] * PowNegBeta(s, neg_beta, three_quarters);
        }
      }
    });
  });
}

// ACROSS_CHANNELS, backward: the same chunks, with the ratios dy * y / s in place of the squares.
template <typename T>
void LRNLayer::BackwardAcross(const Blob& top, Blob* bottom) {
  const int half = (size_ - 1) / 2;
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  const T coeff = static_cast<T>(2 * alpha_ * beta_ / size_);
  const T neg_beta = static_cast<T>(-beta_);
  const bool three_quarters = beta_ == 0.75;
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  const T* bottom_data = bottom->cpu_data<T>();
  const T* scale = scale_.cpu_data<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  ForEachChunk<T>(num_, channels_, plane, [&](T* ratios, int64_t at, int64_t len) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      for (int c = 0; c < channels_; ++c) {
        const int64_t o = at + c * plane;
        T* r = ratios + c * kChunk;
        for (int64_t j = 0; j < len; ++j) r[j] = top_diff[o + j] * top_data[o + j] / scale[o + j];
      }
      for (int c = 0; c < channels_; ++c) {
        const int64_t o = at + c * plane;
        T sum[kChunk];
        ChannelWindowSum(ratios, c, half, channels_, len, sum);
        for (int64_t j = 0; j < len; ++j)
          bottom_diff[o + j] =
              top_diff[o + j] * PowNegBeta(scale[o + j], neg_beta, three_quarters) -
              coeff * bottom_data[o + j] * sum[j];
      }
    });
  });
}

template <typename T>
void LRNLayer::ForwardT(const Blob& bottom, Blob* top) {
  if (across_channels_) return ForwardAcross<T>(bottom, top);
  // WITHIN_CHANNEL, image by image.
  const int64_t image = static_cast<int64_t>(channels_) * height_ * width_;
  const T base = T(1);
  const T coeff = static_cast<T>(alpha_ / (size_ * size_));
  const bool three_quarters = beta_ == 0.75;
  const T neg_beta = static_cast<T>(-beta_);
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  // Forward only, s is not kept for Backward: each image's goes where its squares were.
  T* scale = forward_only() ? nullptr : scale_.mutable_cpu_data<T>();
  T* squares = buffer_.mutable_cpu_data<T>();
  T* sums = sums_.mutable_cpu_data<T>();
  for (int n = 0; n < num_; ++n) {
    const T* x = bottom_data + n * image;
    for (int64_t i = 0; i < image; ++i) squares[i] = x[i] * x[i];
    WindowSum(squares, sums);
    T* s = scale != nullptr ? scale + n * image : squares;
    T* y = top_data + n * image;
    for (int64_t i = 0; i < image; ++i) {
      s[i] = base + coeff * sums[i];
      y[i] = x[i] * PowNegBeta(s[i], neg_beta, three_quarters);
    }
  }
}

template <typename T>
void LRNLayer::BackwardT(const Blob& top, Blob* bottom) {
  if (across_channels_) return BackwardAcross<T>(top, bottom);
  const int64_t image = static_cast<int64_t>(channels_) * height_ * width_;
  const T coeff = static_cast<T>(2 * alpha_ * beta_ / (size_ * size_));
  const T neg_beta = static_cast<T>(-beta_);
  const bool three_quarters = beta_ == 0.75;
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  const T* bottom_data = bottom->cpu_data<T>();
  const T* scale = scale_.cpu_data<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  T* ratio = buffer_.mutable_cpu_data<T>();
  T* sums = sums_.mutable_cpu_data<T>();
  for (int n = 0; n < num_; ++n) {
    const int64_t offset = n * image;
    for (int64_t i = 0; i < image; ++i)
      ratio[i] = top_diff[offset + i] * top_data[offset + i] / scale[offset + i];
    WindowSum(ratio, sums);
    for (int64_t i = 0; i < image; ++i)
      bottom_diff[offset + i] =
          top_diff[offset + i] * PowNegBeta(scale[offset + i], neg_beta, three_quarters) -
          coeff * bottom_data[offset + i] * sums[i];
  }
}

void LRNLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void LRNLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(LRN, LRNLayer);

}  // namespace crema
