#include "math/resize.hpp"

#include <algorithm>

namespace crema::cpu {

template <typename T>
void ResizeForward(const T* in_data, int64_t planes, int in_h, int in_w,
                   const std::vector<ResizeTap>& rows, const std::vector<ResizeTap>& cols,
                   bool bilinear, T* out_data) {
  const int out_h = static_cast<int>(rows.size()), out_w = static_cast<int>(cols.size());
  const int64_t in_plane = static_cast<int64_t>(in_h) * in_w;
  const int64_t out_plane = static_cast<int64_t>(out_h) * out_w;
#pragma omp parallel for if (planes * out_plane > 65536)
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = in_data + p * in_plane;
    T* out = out_data + p * out_plane;
    for (int y = 0; y < out_h; ++y) {
      const ResizeTap& r = rows[y];
      const T* row0 = in + static_cast<int64_t>(r.first) * in_w;
      const T* row1 = in + static_cast<int64_t>(r.second) * in_w;
      T* out_row = out + static_cast<int64_t>(y) * out_w;
      if (!bilinear) {
        for (int x = 0; x < out_w; ++x) out_row[x] = row0[cols[x].first];
        continue;
      }
      const T ly = static_cast<T>(r.lambda);
      for (int x = 0; x < out_w; ++x) {
        const ResizeTap& c = cols[x];
        const T lx = static_cast<T>(c.lambda);
        out_row[x] = (1 - ly) * ((1 - lx) * row0[c.first] + lx * row0[c.second]) +
                     ly * ((1 - lx) * row1[c.first] + lx * row1[c.second]);
      }
    }
  }
}

template <typename T>
void ResizeBackward(const T* out_diff, int64_t planes, int in_h, int in_w,
                    const std::vector<ResizeTap>& rows, const std::vector<ResizeTap>& cols,
                    bool bilinear, T* in_diff) {
  const int out_h = static_cast<int>(rows.size()), out_w = static_cast<int>(cols.size());
  const int64_t in_plane = static_cast<int64_t>(in_h) * in_w;
  const int64_t out_plane = static_cast<int64_t>(out_h) * out_w;
#pragma omp parallel for if (planes * out_plane > 65536)
  for (int64_t p = 0; p < planes; ++p) {
    T* in = in_diff + p * in_plane;
    const T* out = out_diff + p * out_plane;
    std::fill(in, in + in_plane, T(0));
    for (int y = 0; y < out_h; ++y) {
      const ResizeTap& r = rows[y];
      T* row0 = in + static_cast<int64_t>(r.first) * in_w;
      T* row1 = in + static_cast<int64_t>(r.second) * in_w;
      const T* out_row = out + static_cast<int64_t>(y) * out_w;
      if (!bilinear) {
        for (int x = 0; x < out_w; ++x) row0[cols[x].first] += out_row[x];
        continue;
      }
      const T ly = static_cast<T>(r.lambda);
      for (int x = 0; x < out_w; ++x) {
        const ResizeTap& c = cols[x];
        const T lx = static_cast<T>(c.lambda);
        const T d = out_row[x];
        row0[c.first] += (1 - ly) * (1 - lx) * d;
        row0[c.second] += (1 - ly) * lx * d;
        row1[c.first] += ly * (1 - lx) * d;
        row1[c.second] += ly * lx * d;
      }
    }
  }
}

#define CREMA_INSTANTIATE_RESIZE(T)                                                           \
  template void ResizeForward<T>(const T*, int64_t, int, int, const std::vector<ResizeTap>&, \
                                 const std::vector<ResizeTap>&, bool, T*);                   \
  template void ResizeBackward<T>(const T*, int64_t, int, int, const std::vector<ResizeTap>&, \
                                  const std::vector<ResizeTap>&, bool, T*);
CREMA_INSTANTIATE_RESIZE(float)
CREMA_INSTANTIATE_RESIZE(double)

}  // namespace crema::cpu
