#pragma once
// Separable 2-D resampling of planes (nearest or bilinear), shared by Upsample and Interp: each
// output row y reads input rows rows[y].first and rows[y].second with weights 1 - lambda and
// lambda, and likewise for columns; nearest reads `first` only.
#include <cstdint>
#include <vector>

namespace crema::cpu {

struct ResizeTap {
  int first = 0;
  int second = 0;
  double lambda = 0.0;
};

// out (planes x rows.size() x cols.size()) from in (planes x in_h x in_w).
template <typename T>
void ResizeForward(const T* in, int64_t planes, int in_h, int in_w,
                   const std::vector<ResizeTap>& rows, const std::vector<ResizeTap>& cols,
                   bool bilinear, T* out);
// The adjoint: in_diff (overwritten) from out_diff. Planes run in parallel, each scattered in a
// fixed order, so results do not depend on the thread count.
template <typename T>
void ResizeBackward(const T* out_diff, int64_t planes, int in_h, int in_w,
                    const std::vector<ResizeTap>& rows, const std::vector<ResizeTap>& cols,
                    bool bilinear, T* in_diff);

}  // namespace crema::cpu
