#pragma once
// The oneDNN engine of InnerProduct on the CPU (src/math/dnnl_engine.hpp has the policy that
// picks it): float32, the bottom viewed as M x K, weights (N, K) or, with transpose, (K, N),
// bias (N). Every tensor stays in crema's layout: letting oneDNN pick the weights' layout costs a
// reorder per call (the weights change every training iteration), which made CaffeNet's fc6 40%
// slower than OpenBLAS, against level with plain weights. Weight and bias diffs accumulate (+=)
// as in Caffe; the bottom diff is overwritten.
#include <memory>
#include <string>

#include "math/dnnl_engine.hpp"

namespace crema {

class Workspace;

struct DnnlInnerProductGeometry {
  int m = 0, k = 0, n = 0;
  bool transpose = false;
  bool bias = true;
  bool operator==(const DnnlInnerProductGeometry& o) const;
};

class DnnlInnerProduct {
 public:
  DnnlInnerProduct();
  ~DnnlInnerProduct();
  DnnlInnerProduct(const DnnlInnerProduct&) = delete;
  DnnlInnerProduct& operator=(const DnnlInnerProduct&) = delete;

  // Creates the primitives when `geometry` differs from the last one; false when oneDNN does not
  // take it (crema's kernels run then).
  bool Prepare(const DnnlInnerProductGeometry& geometry);
  // y = x W^T (+ bias).
  void Forward(const float* x, const float* w, const float* bias, float* y, Workspace* ws);
  // The backward passes (math/dnnl_engine.hpp's DnnlBackwardArgs): dw += dy^T x, db += column
  // sums of dy, then dx = dy W (overwrites); the blocks stay 0.
  void Backward(const DnnlBackwardArgs& args, Workspace* ws);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crema
