#pragma once
// The GPU twin of resize.hpp (built when CREMA_WITH_CUDA): the same tap tables, computed on the
// host by the layer exactly as for the CPU, are uploaded once per geometry; the kernels evaluate
// the CPU's expressions in the CPU's order. Forward: one thread per output element. Backward: one
// thread per input element gathering, in the CPU's (y, x, tap) order, the output taps that
// scatter onto it, so no atomics and the same sums as cpu::ResizeBackward.
#ifdef CREMA_WITH_CUDA
#include <cstdint>
#include <vector>

#include "crema/blob.hpp"
#include "math/resize.hpp"

namespace crema::gpu {

class ResizeTable {
 public:
  // Makes the device copy hold these taps (uploading only when they differ from the last ones)
  // for an in_h x in_w input.
  void Set(const std::vector<cpu::ResizeTap>& rows, const std::vector<cpu::ResizeTap>& cols,
           int in_h, int in_w);

  // out (planes x out_h x out_w) from in (planes x in_h x in_w), as cpu::ResizeForward.
  template <typename T>
  void Forward(const T* in, int64_t planes, bool bilinear, T* out);
  // in_diff (overwritten) from out_diff, as cpu::ResizeBackward.
  template <typename T>
  void Backward(const T* out_diff, int64_t planes, bool bilinear, T* in_diff);

 private:
  std::vector<double> host_;
  Blob device_{DataType::kFloat64};
  int in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
};

}  // namespace crema::gpu
#endif  // CREMA_WITH_CUDA
