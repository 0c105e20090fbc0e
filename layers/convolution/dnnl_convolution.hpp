#pragma once
// The oneDNN engine of Convolution on the CPU (src/math/dnnl_engine.hpp has the policy that
// picks it): float32 NCHW / NCDHW tensors (channel axis 1, 2 or 3 spatial axes), groups, pads,
// strides, dilations (oneDNN's dilation is Caffe's minus 1), a kernel no larger than the padded
// input. Primitives are created again only when the geometry changes. The primitives choose
// their own (blocked) layouts; tensors are reordered from and to crema's plain layout around
// each call, in scratch memory from the net's workspace (the backward passes run in one call: a
// plain dy is reordered once for the weight and the data gradients; MobileNet v1 training at
// batch 16, 1 thread, a 2-core Xeon: 65 -> 45 reorders into oneDNN's layout an iteration, 80 ->
// 61 ms, iterations 3-5% faster). Measured on an AVX-512 CPU (1 thread):
// with plain NCHW layouts oneDNN falls back to im2col + GEMM and cifar10_quick trained at 1000
// img/s, with its own layouts and the reorders at 2600 (crema's kernels: 1100). Training
// reorders the weights on every call (they change every iteration); a forward-only layer keeps
// them reordered while the blob's generation stays (ResNet-50 inference at batch 1: the weight
// reorders were a sixth of oneDNN's time, the activations' a thirteenth).
// Weight and bias diffs accumulate (+=) as in Caffe; the bottom diff is overwritten.
// 3x3 convolutions of stride 1 (no dilation; groups of whole 16-channel blocks run group by group,
// each on its channels of the whole tensors) also get oneDNN's Winograd primitives where it has
// them (AVX-512): F(4x4, 3x3), fewer multiplications, results within float rounding
// of the direct ones (about twice their rounding error; a fused ReLU there gives -0 where crema's
// ReLU gives +0); the layer's engine race (CpuKernel) decides per direction whether they run.
// Measured on a Zen 4 core (1 thread): ResNet-50's 3x3 convolutions took 0.4-0.6x the direct
// time in training (batch 8, forward and backward, reorders included), and 0.3-0.75x in inference
// (batch 1, the inference primitive); training's primitive at 7x7 and batch 1 took 3x.
//
// oneDNN types stay in the .cpp (compiled with CREMA_WITH_DNNL); without oneDNN in the build
// Prepare() declines every geometry and crema's kernels run.
#include <cstdint>
#include <memory>
#include <vector>

#include "math/dnnl_engine.hpp"

namespace crema {

class Workspace;

struct DnnlConvGeometry {
  std::vector<int> input;                  // (N, C, spatial...)
  std::vector<int> output;                 // (N, K, spatial...)
  std::vector<int> filter;                 // (K, C / group, kernel...)
  std::vector<int> pad, stride, dilation;  // Caffe's, per spatial axis
  int group = 1;
  bool bias = true;
  // The layer only runs forward (inference): the Winograd primitive is then oneDNN's inference
  // one, whose weights are kept transformed (Io::weights_generation).
  bool forward_only = false;
  bool operator==(const DnnlConvGeometry& o) const;
};

class DnnlConvolution {
 public:
  DnnlConvolution();
  ~DnnlConvolution();
  DnnlConvolution(const DnnlConvolution&) = delete;
  DnnlConvolution& operator=(const DnnlConvolution&) = delete;

  // Creates the primitives when `geometry` differs from the last one; false when oneDNN does not
  // take it (then crema's kernels run; asked again only for another geometry).
  bool Prepare(const DnnlConvGeometry& geometry);
  // Whether the prepared geometry has Winograd primitives too (Io::winograd, the backward passes'
  // `winograd`).
  bool HasWinograd() const { return !winograd_.empty(); }

  // How a forward pass reads and writes: with `weights_generation` (not 0: the weights blob's
  // data_generation()), w in oneDNN's layout is kept for the next calls with the same weights;
  // `src_block` / `dst_block` > 0: x / y are channel-blocked by that (math/dnnl_engine.hpp);
  // `sum`: y += conv (y's value read in the convolution, a post-op) instead of y = conv;
  // `relu`: then y = ReLU(y) with that negative slope, inside the convolution (a post-op);
  // `winograd`: through the Winograd primitive (HasWinograd; where it does not take the post-ops,
  // the direct one).
  struct Io {
    uint64_t weights_generation = 0;
    int src_block = 0, dst_block = 0;
    bool sum = false;
    const float* relu = nullptr;
    bool winograd = false;
  };
  // y = conv(x, w) (+ bias per output channel when the geometry has one).
  void Forward(const float* x, const float* w, const float* bias, float* y, Workspace* ws,
               const Io& io);
  // The backward passes (math/dnnl_engine.hpp's DnnlBackwardArgs: the weight and bias
  // gradients, then dx); `winograd`: through the Winograd primitive (HasWinograd).
  void Backward(const DnnlBackwardArgs& args, Workspace* ws, bool winograd = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // the direct convolution
  // The Winograd convolution, one per group (empty: none for this geometry).
  std::vector<std::unique_ptr<Impl>> winograd_;
  // Elements from one group's first to the next's, in x, y, w and the bias.
  struct GroupStep {
    int64_t input = 0, output = 0, weights = 0, bias = 0;
  } group_step_;
};

}  // namespace crema
