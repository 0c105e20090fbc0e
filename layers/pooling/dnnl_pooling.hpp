#pragma once
// The oneDNN engine of Pooling on the CPU (src/math/dnnl_engine.hpp has the policy that picks
// it): float32 (N, C, H, W), MAX and AVE, only where oneDNN computes exactly Caffe's function:
//   - the output size is the layer's (Caffe's ceil, last window clipped); the right padding is
//     whatever makes oneDNN's floor formula give it, and no window may lie wholly outside the
//     input;
//   - MAX ignores padding cells in both; ties go to the first maximum in both;
//   - AVE divides by the window clipped to the padded input (H + pad): with pad 0 that is the
//     cells inside the input (oneDNN's avg_exclude_padding); with pad > 0 it is the full kernel
//     when no window reaches beyond the padding (avg_include_padding); other geometries decline.
// MAX keeps oneDNN's argmax workspace from Forward for Backward (not in forward-only nets). The
// bottom diff is overwritten. Tensors stay in crema's plain layout (no reorders), or the
// channel-blocked layout of the oneDNN layers around (then the pooling runs blocked, and in
// training so does the Backward after it: the argmax is in that layout).
#include <memory>
#include <string>
#include <vector>

namespace crema {

class Workspace;

struct DnnlPoolGeometry {
  std::vector<int> input, output;  // (N, C, H, W)
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool max = true;       // MAX, else AVE
  bool training = true;  // Backward will run (MAX keeps its argmax)
  bool operator==(const DnnlPoolGeometry& o) const;
};

class DnnlPooling {
 public:
  DnnlPooling();
  ~DnnlPooling();
  DnnlPooling(const DnnlPooling&) = delete;
  DnnlPooling& operator=(const DnnlPooling&) = delete;

  // Creates the primitives when `geometry` differs from the last one; false when oneDNN's result
  // would differ from Caffe's, or oneDNN does not take the geometry (crema's kernels run then).
  bool Prepare(const DnnlPoolGeometry& geometry);
  // `block` > 0: x is channel-blocked by that (math/dnnl_engine.hpp), and so is y when
  // `blocked_y`; oneDNN then pools in the blocked layout.
  void Forward(const float* x, float* y, Workspace* ws, int block = 0, bool blocked_y = false);
  // dx = the gradient (overwrites), in the layout of the Forward just before (which MAX needs);
  // `dy_block` / `dx_block` > 0: dy / dx are channel-blocked by that.
  void Backward(const float* dy, float* dx, Workspace* ws, int dy_block = 0, int dx_block = 0);
  // Whether the last Forward pooled in the channel-blocked layout.
  bool ForwardRanBlocked() const;
  std::string Describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crema
