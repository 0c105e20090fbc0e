#include <algorithm>

#include "math/math_gpu.hpp"
#include "math/resize_gpu.hpp"

namespace crema::gpu {
namespace {

// The table: per output row then per output column 3 values (first, second, lambda); then per
// input row then per input column the range [begin, end) of outputs whose taps read it (first
// and second never decrease along the output, so that range is contiguous).
struct TableView {
  const double* rows;        // out_h x 3
  const double* cols;        // out_w x 3
  const double* row_ranges;  // in_h x 2
  const double* col_ranges;  // in_w x 2
};

__device__ inline TableView View(const double* table, int in_h, int out_h, int out_w) {
  const double* row_ranges = table + 3 * (static_cast<int64_t>(out_h) + out_w);
  return {table, table + 3 * static_cast<int64_t>(out_h), row_ranges,
          row_ranges + 2 * static_cast<int64_t>(in_h)};
}

template <typename T>
__global__ void ResizeForwardKernel(int64_t n, const double* table, int in_h, int in_w, int out_h,
                                    int out_w, bool bilinear, const T* in_data, T* out_data) {
  const TableView v = View(table, in_h, out_h, out_w);
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int x = static_cast<int>(index % out_w);
    const int y = static_cast<int>((index / out_w) % out_h);
    const int64_t plane = index / (static_cast<int64_t>(out_h) * out_w);
    const T* in = in_data + plane * in_h * in_w;
    const T* row0 = in + static_cast<int64_t>(v.rows[3 * y]) * in_w;
    const int c0 = static_cast<int>(v.cols[3 * x]);
    if (!bilinear) {
      out_data[index] = row0[c0];
      continue;
    }
    const T* row1 = in + static_cast<int64_t>(v.rows[3 * y + 1]) * in_w;
    const int c1 = static_cast<int>(v.cols[3 * x + 1]);
    const T ly = static_cast<T>(v.rows[3 * y + 2]);
    const T lx = static_cast<T>(v.cols[3 * x + 2]);
    out_data[index] = (1 - ly) * ((1 - lx) * row0[c0] + lx * row0[c1]) +
                      ly * ((1 - lx) * row1[c0] + lx * row1[c1]);
  }
}

template <typename T>
__global__ void ResizeBackwardKernel(int64_t n, const double* table, int in_h, int in_w, int out_h,
                                     int out_w, bool bilinear, const T* out_diff, T* in_diff) {
  const TableView v = View(table, in_h, out_h, out_w);
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int ix = static_cast<int>(index % in_w);
    const int iy = static_cast<int>((index / in_w) % in_h);
    const int64_t plane = index / (static_cast<int64_t>(in_h) * in_w);
    const T* out = out_diff + plane * out_h * out_w;
    const int y_end = static_cast<int>(v.row_ranges[2 * iy + 1]);
    const int x_begin = static_cast<int>(v.col_ranges[2 * ix]);
    const int x_end = static_cast<int>(v.col_ranges[2 * ix + 1]);
    T sum = T(0);
    for (int y = static_cast<int>(v.row_ranges[2 * iy]); y < y_end; ++y) {
      const bool r0 = static_cast<int>(v.rows[3 * y]) == iy;
      const bool r1 = static_cast<int>(v.rows[3 * y + 1]) == iy;
      const T ly = static_cast<T>(v.rows[3 * y + 2]);
      const T* out_row = out + static_cast<int64_t>(y) * out_w;
      for (int x = x_begin; x < x_end; ++x) {
        const bool c0 = static_cast<int>(v.cols[3 * x]) == ix;
        if (!bilinear) {
          if (r0 && c0) sum += out_row[x];
          continue;
        }
        const bool c1 = static_cast<int>(v.cols[3 * x + 1]) == ix;
        const T lx = static_cast<T>(v.cols[3 * x + 2]);
        const T d = out_row[x];
        // The CPU's four scatters, in its order.
        if (r0 && c0) sum += (1 - ly) * (1 - lx) * d;
        if (r0 && c1) sum += (1 - ly) * lx * d;
        if (r1 && c0) sum += ly * (1 - lx) * d;
        if (r1 && c1) sum += ly * lx * d;
      }
    }
    in_diff[index] = sum;
  }
}

// Appends, per input index, the outputs [begin, end) whose first or second tap reads it.
void AppendRanges(const std::vector<cpu::ResizeTap>& taps, int in_size, std::vector<double>* out) {
  std::vector<int> begin(in_size, 0), end(in_size, 0);
  for (int o = static_cast<int>(taps.size()) - 1; o >= 0; --o)
    for (int i : {taps[o].first, taps[o].second}) {
      if (end[i] == 0) end[i] = o + 1;
      begin[i] = o;
    }
  for (int i = 0; i < in_size; ++i) {
    out->push_back(begin[i]);
    out->push_back(end[i]);
  }
}

}  // namespace

void ResizeTable::Set(const std::vector<cpu::ResizeTap>& rows,
                      const std::vector<cpu::ResizeTap>& cols, int in_h, int in_w) {
  std::vector<double> host;
  host.reserve(3 * (rows.size() + cols.size()) + 2 * (in_h + in_w));
  for (const auto* taps : {&rows, &cols})
    for (const cpu::ResizeTap& t : *taps)
      host.insert(host.end(), {double(t.first), double(t.second), t.lambda});
  AppendRanges(rows, in_h, &host);
  AppendRanges(cols, in_w, &host);
  in_h_ = in_h;
  in_w_ = in_w;
  out_h_ = static_cast<int>(rows.size());
  out_w_ = static_cast<int>(cols.size());
  if (host == host_) return;
  host_ = std::move(host);
  device_.Reshape({static_cast<int>(host_.size())});
  std::copy(host_.begin(), host_.end(), device_.mutable_cpu_data<double>());
}

template <typename T>
void ResizeTable::Forward(const T* in, int64_t planes, bool bilinear, T* out) {
  const int64_t n = planes * out_h_ * out_w_;
  if (n == 0) return;
  ResizeForwardKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(
      n, device_.gpu_data<double>(), in_h_, in_w_, out_h_, out_w_, bilinear, in, out);
  CheckLaunch("resize forward");
}

template <typename T>
void ResizeTable::Backward(const T* out_diff, int64_t planes, bool bilinear, T* in_diff) {
  const int64_t n = planes * in_h_ * in_w_;
  if (n == 0) return;
  ResizeBackwardKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(
      n, device_.gpu_data<double>(), in_h_, in_w_, out_h_, out_w_, bilinear, out_diff, in_diff);
  CheckLaunch("resize backward");
}

template void ResizeTable::Forward<float>(const float*, int64_t, bool, float*);
template void ResizeTable::Forward<double>(const double*, int64_t, bool, double*);
template void ResizeTable::Backward<float>(const float*, int64_t, bool, float*);
template void ResizeTable::Backward<double>(const double*, int64_t, bool, double*);

}  // namespace crema::gpu
