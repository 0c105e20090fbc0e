#include "layers/pooling/pooling_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "layers/pooling/dnnl_pooling.hpp"
#include "math/activation.hpp"
#include "math/cpu_isa.hpp"
#include "math/math.hpp"

namespace crema {
namespace {

// One pooling window along one axis: [start, end) clipped to the input, and its size counted
// with the padding (what AVE divides by).
struct Window {
  int start;
  int end;
  int size;
};

// The windows for every pooled position along one axis. For AVE (`ave`) the size counts the
// padded extent, as Caffe: min(start + kernel, size + pad) - start before clipping.
std::vector<Window> Windows(int pooled, int stride, int pad, int kernel, int size, bool ave) {
  std::vector<Window> windows(pooled);
  for (int p = 0; p < pooled; ++p) {
    int start = p * stride - pad;
    int end = std::min(start + kernel, ave ? size + pad : size);
    const int padded = end - start;
    start = std::max(start, 0);
    end = std::min(end, size);
    windows[p] = {start, end, padded};
  }
  return windows;
}

struct MaxGeometry {
  std::vector<Window> hwin, wwin;
  int width, pooled_width, stride_w, pad_w, kernel_w;
  int whole_begin, whole_end;
};

// The windows of pooled columns [begin, end) of one row, each whole inside the image, at input
// row h: each window's running max and argmax take the row's kernel_w values in order, the
// windows side by side so that the loop vectorises (S: the stride, 0 when only known at run
// time).
template <typename T, int S>
CREMA_ISA_INLINE inline void MaxWholeWindowsRow(const MaxGeometry& g, const T* in, int h, int begin,
                                                int end, T* best, int* index) {
  const int stride = S > 0 ? S : g.stride_w;
  const int kernel_w = g.kernel_w, pad_w = g.pad_w, width = g.width;
  const int n = end - begin;
  for (int kw = 0; kw < kernel_w; ++kw) {
    const int w0 = begin * stride - pad_w + kw;
    const T* row = in + h * width + w0;
    const int i0 = h * width + w0;
    T* b = best + begin;
    int* x = index + begin;
    for (int p = 0; p < n; ++p) {
      // Branch-free, in the form the compiler vectorises; the same tests as window by window.
      const T v = row[p * stride];
      const T current = b[p];
      const int keep = -static_cast<int>(v > current);  // all ones where v wins
      x[p] ^= (x[p] ^ (i0 + p * stride)) & keep;
      b[p] = std::max(current, v);  // (best < v) ? v : best, the same test
    }
  }
}

// Eight whole 2x2 windows at stride 2 side by side (float): rows r0 and r1 from the first
// window's left column, `at` its index in the plane; the maxima into out[0, 8) and their indices
// into index[0, 8) (null: not kept). Each window's four values are deinterleaved into lanes and
// compared in Caffe's order (the first row left to right, then the second), the first maximum kept:
// the window-by-window loop's results. Reads r0[0, 16) and r1[0, 16).
CREMA_ISA_INLINE inline void MaxEight2x2(const float* r0, const float* r1, int at, int width,
                                         float* out, int* index) {
  typedef float F8 __attribute__((vector_size(32), aligned(4)));
  typedef int I8 __attribute__((vector_size(32), aligned(4)));
  F8 a0, a1, b0, b1;
  std::memcpy(&a0, r0, sizeof(F8));
  std::memcpy(&a1, r0 + 8, sizeof(F8));
  std::memcpy(&b0, r1, sizeof(F8));
  std::memcpy(&b1, r1 + 8, sizeof(F8));
#if defined(__clang__)
#define CREMA_EVEN_LANES(x, y) __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14)
#define CREMA_ODD_LANES(x, y) __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15)
#else
#define CREMA_EVEN_LANES(x, y) __builtin_shuffle(x, y, I8{0, 2, 4, 6, 8, 10, 12, 14})
#define CREMA_ODD_LANES(x, y) __builtin_shuffle(x, y, I8{1, 3, 5, 7, 9, 11, 13, 15})
#endif
  const F8 v[4] = {CREMA_EVEN_LANES(a0, a1), CREMA_ODD_LANES(a0, a1), CREMA_EVEN_LANES(b0, b1),
                   CREMA_ODD_LANES(b0, b1)};
#undef CREMA_EVEN_LANES
#undef CREMA_ODD_LANES
  const I8 left = I8{0, 2, 4, 6, 8, 10, 12, 14} + at;  // the windows' first index: at + 2 * lane
  const I8 where[4] = {left, left + 1, left + width, left + width + 1};
  F8 best = F8{} - FLT_MAX;
  I8 best_index = I8{} - 1;
  for (int e = 0; e < 4; ++e) {
    const I8 wins = v[e] > best;
    best_index = wins ? where[e] : best_index;
    best = wins ? v[e] : best;
  }
  std::memcpy(out, &best, sizeof(F8));
  if (index != nullptr) std::memcpy(index, &best_index, sizeof(I8));
}

// MaxPlane for rows of few windows (too short to vectorise along): window by window, the running
// max in a register; full 2x2 windows at stride 2 with their four compares written out, eight at
// a time for float with AVX2 or AVX-512, with the plain mask or none (LeNet's pool1 in training, 64
// x 20 planes of 24 x 24, 1 thread: 0.69 -> 0.27-0.32 ms).
template <typename T>
CREMA_ISA_INLINE inline void MaxPlaneByWindow(const MaxGeometry& g, const T* in, T* out, int* mask,
                                              T* top_mask) {
  const int pooled_height = static_cast<int>(g.hwin.size());
  const int pooled_width = g.pooled_width, width = g.width;
  const bool fast_2x2 = g.kernel_w == 2 && g.stride_w == 2 && g.pad_w == 0;
  const int full_2x2_w = std::min(pooled_width, width / 2);
  const auto put = [&](int index, T best, int best_index) {
    out[index] = best;
    if (top_mask != nullptr)
      top_mask[index] = static_cast<T>(best_index);
    else if (mask != nullptr)
      mask[index] = best_index;
  };
  for (int ph = 0; ph < pooled_height; ++ph) {
    const Window& hw = g.hwin[ph];
    int pw = 0;
    if (fast_2x2 && hw.end - hw.start == 2) {
      const T* r0 = in + hw.start * width;
      const T* r1 = r0 + width;
      if constexpr (std::is_same_v<T, float>) {
        // Only with AVX2 and up (RunForCpuIsa's copy for that level compiles the lanes to ymm
        // registers; on SSE2 they were about five times slower than the windows one by one).
        if (top_mask == nullptr && full_2x2_w >= 8 && CpuIsaLevel() != CpuIsa::kBaseline) {
          int* row_mask = mask != nullptr ? mask + ph * pooled_width : nullptr;
          float* row_out = out + ph * pooled_width;
          const int at = hw.start * width;
          for (; pw + 8 <= full_2x2_w; pw += 8)
            MaxEight2x2(r0 + 2 * pw, r1 + 2 * pw, at + 2 * pw, width, row_out + pw,
                        row_mask != nullptr ? row_mask + pw : nullptr);
          // The rest as the row's last eight, overlapping windows done already (the same
          // values written again).
          if (pw < full_2x2_w) {
            pw = full_2x2_w - 8;
            MaxEight2x2(r0 + 2 * pw, r1 + 2 * pw, at + 2 * pw, width, row_out + pw,
                        row_mask != nullptr ? row_mask + pw : nullptr);
            pw = full_2x2_w;
          }
        }
      }
      for (; pw < full_2x2_w; ++pw) {
        const int i0 = hw.start * width + 2 * pw;
        const T v[4] = {r0[2 * pw], r0[2 * pw + 1], r1[2 * pw], r1[2 * pw + 1]};
        const int at[4] = {i0, i0 + 1, i0 + width, i0 + width + 1};
        T best = static_cast<T>(-FLT_MAX);
        int best_index = -1;
        for (int e = 0; e < 4; ++e) {
          const int keep = -static_cast<int>(v[e] > best);  // all ones where v[e] wins
          best_index ^= (best_index ^ at[e]) & keep;
          best = std::max(best, v[e]);  // (best < v) ? v : best, the same test
        }
        put(ph * pooled_width + pw, best, best_index);
      }
    }
    for (; pw < pooled_width; ++pw) {
      const Window& ww = g.wwin[pw];
      T best = static_cast<T>(-FLT_MAX);
      int best_index = -1;
      for (int h = hw.start; h < hw.end; ++h) {
        const T* row = in + h * width;
        for (int w = ww.start; w < ww.end; ++w) {
          // Branch-free (random data mispredicts a branch half the time); same result.
          const T v = row[w];
          const int keep = -static_cast<int>(v > best);  // all ones where v wins
          best_index ^= (best_index ^ (h * width + w)) & keep;
          best = std::max(best, v);  // (best < v) ? v : best, the same test
        }
      }
      put(ph * pooled_width + pw, best, best_index);
    }
  }
}

// MAX pooling of one plane into `out` with the argmax into `mask` or, as values, `top_mask`
// (either may be null): Caffe's order, each window's positions row by row and left to right, the
// first maximum kept. Rows of 16 whole windows or more go along the row (MaxWholeWindowsRow), the
// running maxima in `out` and the argmax in `mask` or else `index` (scratch of pooled_width);
// shorter rows window by window.
template <typename T>
CREMA_ISA_INLINE inline void MaxPlane(const MaxGeometry& g, const T* in, T* out, int* mask,
                                      T* top_mask, int* index) {
  const int pooled_height = static_cast<int>(g.hwin.size());
  const int pooled_width = g.pooled_width, width = g.width;
  const int whole_begin = g.whole_begin, whole_end = g.whole_end;
  if (whole_end - whole_begin < 16) return MaxPlaneByWindow(g, in, out, mask, top_mask);
  for (int ph = 0; ph < pooled_height; ++ph) {
    const Window& hw = g.hwin[ph];
    T* best = out + ph * pooled_width;
    int* x = mask != nullptr ? mask + ph * pooled_width : index;
    std::fill(best, best + pooled_width, static_cast<T>(-FLT_MAX));
    std::fill(x, x + pooled_width, -1);
    for (int h = hw.start; h < hw.end; ++h) {
      // Windows cut by the image's edges, one at a time.
      for (int pw = 0; pw < pooled_width; ++pw) {
        if (pw == whole_begin) pw = whole_end;
        if (pw >= pooled_width) break;
        const Window& ww = g.wwin[pw];
        for (int w = ww.start; w < ww.end; ++w) {
          const T v = in[h * width + w];
          if (v > best[pw]) x[pw] = h * width + w;
          best[pw] = std::max(best[pw], v);
        }
      }
      if (g.stride_w == 2)
        MaxWholeWindowsRow<T, 2>(g, in, h, whole_begin, whole_end, best, x);
      else if (g.stride_w == 1)
        MaxWholeWindowsRow<T, 1>(g, in, h, whole_begin, whole_end, best, x);
      else
        MaxWholeWindowsRow<T, 0>(g, in, h, whole_begin, whole_end, best, x);
    }
    if (top_mask != nullptr)
      for (int pw = 0; pw < pooled_width; ++pw)
        top_mask[ph * pooled_width + pw] = static_cast<T>(x[pw]);
  }
}

}  // namespace

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
  // Forward only, MAX keeps no argmax for Backward.
  if ((pool_ == PoolingParameter::MAX && top.size() == 1 && !forward_only()) ||
      pool_ == PoolingParameter::STOCHASTIC) {
    max_idx_.resize(top[0]->count());
  } else {
    max_idx_.clear();
    max_idx_.shrink_to_fit();
  }
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
      // Each (image, channel) plane on its own (MaxPlane); planes are independent, so threads do
      // not change results.
      const bool use_top_mask = top.size() > 1;
      T* top_mask = use_top_mask ? top[1]->mutable_cpu_data<T>() : nullptr;
      int* mask = use_top_mask || max_idx_.empty() ? nullptr : max_idx_.data();
      MaxGeometry g;
      g.hwin = Windows(pooled_height_, stride_h_, pad_h_, kernel_h_, height_, false);
      g.wwin = Windows(pooled_width_, stride_w_, pad_w_, kernel_w_, width_, false);
      g.width = width_;
      g.pooled_width = pooled_width_;
      g.stride_w = stride_w_;
      g.pad_w = pad_w_;
      g.kernel_w = kernel_w_;
      // The pooled columns whose window lies whole inside the image: [whole_begin, whole_end).
      g.whole_begin = std::min(pooled_width_, (pad_w_ + stride_w_ - 1) / stride_w_);
      g.whole_end = g.whole_begin;
      while (g.whole_end < pooled_width_ && g.whole_end * stride_w_ - pad_w_ + kernel_w_ <= width_)
        ++g.whole_end;
      const int64_t planes = static_cast<int64_t>(num) * channels_;
#pragma omp parallel if (planes * bottom_plane > 65536)
      {
        std::vector<int> index(pooled_width_);
#pragma omp for
        for (int64_t plane = 0; plane < planes; ++plane) {
          RunForCpuIsa([&]() CREMA_ISA_INLINE {
            MaxPlane<T>(g, bottom_data + plane * bottom_plane, top_data + plane * top_plane,
                        mask != nullptr ? mask + plane * top_plane : nullptr,
                        top_mask != nullptr ? top_mask + plane * top_plane : nullptr, index.data());
          });
        }
      }
      break;
    }
    case PoolingParameter::AVE: {
      const std::vector<Window> hwin =
          Windows(pooled_height_, stride_h_, pad_h_, kernel_h_, height_, true);
      const std::vector<Window> wwin =
          Windows(pooled_width_, stride_w_, pad_w_, kernel_w_, width_, true);
      const int64_t planes = static_cast<int64_t>(num) * channels_;
      if (top_plane == 1 && hwin[0].start == 0 && hwin[0].end == height_ && wwin[0].start == 0 &&
          wwin[0].end == width_) {
        // One window over the whole plane (global pooling): eight planes' sums side by side,
        // each still in the plane's order (the same bits), so that eight additions are in
        // flight instead of one chain (SqueezeNet's pool10 at batch 8, 8000 planes of 196).
        constexpr int kPlanes = 8;
        const T pool_size = static_cast<T>(hwin[0].size * wwin[0].size);
        const int64_t groups = planes / kPlanes;
#pragma omp parallel for if (planes * bottom_plane > 65536)
        for (int64_t g = 0; g <= groups; ++g) {
          const int64_t first = g * kPlanes;
          const int count = static_cast<int>(std::min<int64_t>(kPlanes, planes - first));
          const T* in = bottom_data + first * bottom_plane;
          T sum[kPlanes] = {};
          if (count == kPlanes) {
            for (int64_t i = 0; i < bottom_plane; ++i)
              for (int k = 0; k < kPlanes; ++k) sum[k] += in[k * bottom_plane + i];
          } else {
            for (int k = 0; k < count; ++k)
              for (int64_t i = 0; i < bottom_plane; ++i) sum[k] += in[k * bottom_plane + i];
          }
          for (int k = 0; k < count; ++k) top_data[first + k] = sum[k] / pool_size;
        }
        break;
      }
#pragma omp parallel for if (planes * bottom_plane > 65536)
      for (int64_t plane = 0; plane < planes; ++plane) {
        const T* in = bottom_data + plane * bottom_plane;
        T* out = top_data + plane * top_plane;
        for (int ph = 0; ph < pooled_height_; ++ph) {
          const Window& hw = hwin[ph];
          for (int pw = 0; pw < pooled_width_; ++pw) {
            const Window& ww = wwin[pw];
            const int pool_size = hw.size * ww.size;
            T sum = 0;
            for (int h = hw.start; h < hw.end; ++h)
              for (int w = ww.start; w < ww.end; ++w) sum += in[h * width_ + w];
            out[ph * pooled_width_ + pw] = sum / pool_size;
          }
        }
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
                             const BlobVec& bottom, const float* relu_slope) {
  if (!propagate_down[0]) return;
  // MAX and AVE with the bottom's ReLU fused (Layer::set_fused_relu_backward): its gradient on
  // each plane once that is filled, while it is in the cache.
  const T* relu_y = relu_slope != nullptr ? bottom[0]->cpu_data<T>() : nullptr;
  const T slope = static_cast<T>(relu_slope != nullptr ? *relu_slope : 0.f);
  const T* top_diff = top[0]->cpu_diff<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  const int num = bottom[0]->num();
  const int64_t bottom_plane = static_cast<int64_t>(height_) * width_;
  const int64_t top_plane = static_cast<int64_t>(pooled_height_) * pooled_width_;
  const int64_t planes = static_cast<int64_t>(num) * channels_;
  // MAX and AVE: each (image, channel) plane is zeroed and filled on its own, in parallel.
  switch (pool_) {
    case PoolingParameter::MAX: {
      const bool use_top_mask = top.size() > 1;
      const T* top_mask = use_top_mask ? top[1]->cpu_data<T>() : nullptr;
      const int* mask = use_top_mask ? nullptr : max_idx_.data();
#pragma omp parallel for if (planes * bottom_plane > 65536)
      for (int64_t plane = 0; plane < planes; ++plane) {
        T* out = bottom_diff + plane * bottom_plane;
        const T* in = top_diff + plane * top_plane;
        std::fill(out, out + bottom_plane, T(0));
        for (int64_t i = 0; i < top_plane; ++i) {
          const int64_t k = plane * top_plane + i;
          const int index = use_top_mask ? static_cast<int>(top_mask[k]) : mask[k];
          if (index >= 0) out[index] += in[i];
        }
        if (relu_y != nullptr)
          ReLUGradientSerial(bottom_plane, relu_y + plane * bottom_plane, out, slope, out);
      }
      return;
    }
    case PoolingParameter::AVE: {
      const std::vector<Window> hwin =
          Windows(pooled_height_, stride_h_, pad_h_, kernel_h_, height_, true);
      const std::vector<Window> wwin =
          Windows(pooled_width_, stride_w_, pad_w_, kernel_w_, width_, true);
#pragma omp parallel for if (planes * bottom_plane > 65536)
      for (int64_t plane = 0; plane < planes; ++plane) {
        T* out = bottom_diff + plane * bottom_plane;
        const T* in = top_diff + plane * top_plane;
        std::fill(out, out + bottom_plane, T(0));
        for (int ph = 0; ph < pooled_height_; ++ph) {
          const Window& hw = hwin[ph];
          for (int pw = 0; pw < pooled_width_; ++pw) {
            const Window& ww = wwin[pw];
            const T g = in[ph * pooled_width_ + pw] / (hw.size * ww.size);
            for (int h = hw.start; h < hw.end; ++h)
              for (int w = ww.start; w < ww.end; ++w) out[h * width_ + w] += g;
          }
        }
        if (relu_y != nullptr)
          ReLUGradientSerial(bottom_plane, relu_y + plane * bottom_plane, out, slope, out);
      }
      return;
    }
    default:
      break;
  }
  cpu::Set<T>(bottom[0]->count(), T(0), bottom_diff);
  switch (pool_) {
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

// ---- oneDNN CPU engine ----
CpuEngine PoolingLayer::DnnlPolicy(const BlobVec& bottom, const BlobVec& top) {
  const CpuEngine policy = LayerCpuEngine();
  if (policy == CpuEngine::kCaffe || dtype() != DataType::kFloat32 || top.size() > 1 ||
      (pool_ != PoolingParameter::MAX && pool_ != PoolingParameter::AVE))
    return CpuEngine::kCaffe;
  if (!dnnl_) dnnl_ = std::make_shared<DnnlPooling>();
  const DnnlPoolGeometry geometry{bottom[0]->shape(),
                                  top[0]->shape(),
                                  kernel_h_,
                                  kernel_w_,
                                  stride_h_,
                                  stride_w_,
                                  pad_h_,
                                  pad_w_,
                                  pool_ == PoolingParameter::MAX,
                                  !forward_only()};
  return dnnl_->Prepare(geometry) ? policy : CpuEngine::kCaffe;
}
// ---- end oneDNN CPU engine ----

bool PoolingLayer::ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) {
  return ChannelBlockable(bottom[0]->shape()) && top[0]->num_axes() == 4 &&
         cpu_engine_choice_.NextRunsDnnl(DnnlPolicy(bottom, top), "forward", bottom[0]->shape());
}

bool PoolingLayer::GlobalAverageReadsBlocked(const Blob& bottom) const {
  return forward_only() && pool_ == PoolingParameter::AVE && dtype() == DataType::kFloat32 &&
         bottom.num_axes() == 4 && pooled_height_ == 1 && pooled_width_ == 1 && pad_h_ == 0 &&
         pad_w_ == 0 && kernel_h_ == bottom.shape(2) && kernel_w_ == bottom.shape(3);
}

void PoolingLayer::ForwardGlobalAverageBlocked(const Blob& bottom, Blob* top) {
  const int block = bottom.cpu_channel_block();
  CREMA_ASSERT(
      GlobalAverageReadsBlocked(bottom) && block > 0 && block <= 64 && bottom.shape(1) % block == 0,
      "global average pooling of this blocked input");
  const int64_t plane = static_cast<int64_t>(bottom.shape(2)) * bottom.shape(3);
  const int64_t blocks = static_cast<int64_t>(bottom.shape(0)) * bottom.shape(1) / block;
  const float pool_size = static_cast<float>(plane);
  const float* x = bottom.cpu_data<float>();
  float* y = top->mutable_cpu_data<float>();  // (n, c): block b's channels at b * block
  // Block by block: its channels' sums side by side, each over the plane in order.
#pragma omp parallel for if (blocks * plane * block > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* in = x + b * plane * block;
    float sum[64] = {};
    for (int64_t i = 0; i < plane; ++i)
#pragma omp simd
      for (int k = 0; k < block; ++k) sum[k] += in[i * block + k];
    for (int k = 0; k < block; ++k) y[b * block + k] = sum[k] / pool_size;
  }
  top->data()->set_channel_block(0);
}

bool PoolingLayer::BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) {
  // oneDNN's, after a Forward that pooled blocked (MAX: the engine of that Forward).
  return forward_ran_dnnl_ && dnnl_->ForwardRanBlocked() &&
         (pool_ == PoolingParameter::MAX ||
          cpu_engine_choice_.NextRunsDnnl(DnnlPolicy(bottom, top), "backward", bottom[0]->shape()));
}

void PoolingLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  const auto crema = [&] {
    CREMA_ASSERT(bottom[0]->cpu_channel_block() == 0, "channel-blocked input for crema's kernels");
    forward_ran_dnnl_ = false;
    CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
  };
  // crema's global average pooling as a blocked kernel (it races oneDNN's where the input arrives
  // blocked); a plain input takes crema's plain kernel, the same bits.
  const auto blocked = [&] {
    forward_ran_dnnl_ = false;
    if (bottom[0]->cpu_channel_block() == 0) return ForwardT<float>(bottom, top);
    ForwardGlobalAverageBlocked(*bottom[0], top[0]);
  };
  const auto dnnl = [&] {
    forward_ran_dnnl_ = true;
    // Channel-blocked in (the net let it through: ReadsChannelBlocked), then blocked out where
    // allowed (ChannelBlockedOnlyFromBlocked).
    const int block = bottom[0]->cpu_channel_block();
    const bool blocked_y =
        block > 0 && top[0]->channel_block_allowed() && ChannelBlockable(top[0]->shape());
    dnnl_->Forward(bottom[0]->cpu_data<float>(), top[0]->mutable_cpu_data<float>(), &workspace(),
                   block, blocked_y);
    top[0]->data()->set_channel_block(blocked_y ? block : 0);
  };
  cpu_engine_choice_.Run(DnnlPolicy(bottom, top), name(), "forward", bottom[0]->shape(), crema,
                         dnnl, nullptr,
                         GlobalAverageReadsBlocked(*bottom[0]) ? CpuEngineChoice::Pass(blocked)
                                                               : CpuEngineChoice::Pass());
}

void PoolingLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const auto crema = [&] {
    CREMA_ASSERT(bottom[0]->cpu_channel_block() == 0 && top[0]->cpu_diff_channel_block() == 0,
                 "channel-blocked input or gradient for crema's kernels");
    float slope = 0;
    const bool relu = (pool_ == PoolingParameter::MAX || pool_ == PoolingParameter::AVE) &&
                      TakeFusedReLUBackward(0, &slope);
    CREMA_DISPATCH_FLOAT(dtype(), T,
                         BackwardT<T>(top, propagate_down, bottom, relu ? &slope : nullptr));
  };
  const auto dnnl = [&] {
    // dy as the net holds it, dx in x's layout.
    const int dx_block = bottom[0]->cpu_channel_block();
    dnnl_->Backward(top[0]->cpu_diff<float>(), bottom[0]->mutable_cpu_diff<float>(), &workspace(),
                    top[0]->cpu_diff_channel_block(), dx_block);
    bottom[0]->diff()->set_channel_block(dx_block);
  };
  // MAX: the engine of the Forward that recorded the argmax.
  const CpuEngine policy = pool_ == PoolingParameter::MAX
                               ? (forward_ran_dnnl_ ? CpuEngine::kDnnl : CpuEngine::kCaffe)
                               : DnnlPolicy(bottom, top);
  cpu_engine_choice_.Run(policy, name(), "backward", bottom[0]->shape(), crema, dnnl);
}

CREMA_REGISTER_LAYER(Pooling, PoolingLayer);

}  // namespace crema
