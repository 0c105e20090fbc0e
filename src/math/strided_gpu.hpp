#pragma once
// Strided copies on the GPU (built when CREMA_WITH_CUDA), the data movement of layers such as
// Concat, Slice, Crop, Permute, ShuffleChannel and Tile. A StridedMap sends element i of a dense row-major array
// of `shape` to element base + sum_a i_a * stride[a] of another array, (i_0, ..., i_{rank-1})
// being i's coordinates; a stride of 0 repeats elements. Runs on the current device's stream.
#ifdef CREMA_WITH_CUDA
#include <cstdint>
#include <vector>

namespace crema::gpu {

struct StridedMap {
  static constexpr int kMaxRank = 32;  // Blob::kMaxAxes
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
  int64_t base = 0;
};
// `shape` and `stride` have the same size, at most kMaxRank.
StridedMap MakeStridedMap(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride,
                          int64_t base = 0);

// The strides of a dense row-major array of `shape`.
std::vector<int64_t> RowMajorStrides(const std::vector<int>& shape);

// dst[i] = src[map(i)] for i < n (n = the product of map.shape).
template <typename T>
void GatherStrided(int64_t n, const StridedMap& map, const T* src, T* dst);
// dst[map(i)] = src[i] for i < n; map must be one-to-one (no zero strides).
template <typename T>
void ScatterStrided(int64_t n, const StridedMap& map, const T* src, T* dst);

// `rows` slabs of `width` elements: dst[r * dst_stride + i] = src[r * src_stride + i] (strides in
// elements; one 2-D copy by the copy engine): the pieces of Concat and Slice.
template <typename T>
void CopySlabs(int64_t rows, int64_t width, const T* src, int64_t src_stride, T* dst,
               int64_t dst_stride);

}  // namespace crema::gpu
#endif  // CREMA_WITH_CUDA
