#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Adds a bias broadcast over bottom[0], as Caffe: top = bottom[0] + b, where b lines up with the
// axes [axis, axis + b.num_axes()) of bottom[0] and is repeated over the axes before and after:
//   top[o, d, i] = bottom[o, d, i] + b[d]   (o outer, d over b's axes, i inner).
// b is bottom[1] when given (any shape that matches those bottom axes; a scalar b has axis 0),
// else a learned blob of shape bottom[0].shape[axis, axis + num_axes) (num_axes -1: to the end).
// Backward: d bottom[0] = d top; d b = sum over o and i of d top (accumulated into a learned b,
// written into bottom[1]'s diff). In-place safe (top == bottom[0]).
// Params: bias_param { axis (1, may be negative), num_axes (1; -1 = all remaining; ignored with
// two bottoms), filler (constant 0 by default) }.
class BiasLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Bias"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                 const BlobVec& bottom);

  int64_t outer_dim_ = 0;
  int64_t bias_dim_ = 0;
  int64_t inner_dim_ = 0;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
