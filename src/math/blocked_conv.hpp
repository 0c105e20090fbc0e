#pragma once
// A 3x3 convolution (stride 1, pad 1, one group, with bias and ReLU) on oneDNN's channel-blocked
// layout with 16 channels a block (nChw16c, AVX-512), computed directly in register tiles of
// three output blocks x 7 positions of a row, the weights of one input block (27 KB) kept in L1
// while every row of the image adds them. It is one of the kernels a CPU inference net's 3x3
// convolutions race (CpuKernel::kCremaBlocked, math/dnnl_engine.hpp): on a 2-core Xeon with
// AVX-512, in ResNet-50 at batch 1 and one thread,
// its 7 x 7 ones (512 channels) took 1.2 ms a layer where oneDNN's took 1.9 (direct) and 2.0
// (Winograd), its 14 x 14 ones 1.1 where Winograd took 1.25.
//
// The input may also be in Caffe's plain layout (the kernel copies it into a blocked one with a
// border of zeros either way); the output is blocked.
//
// Each output is the bias, then the products over the input channels block by block, and in a
// block over the 3x3 taps row by row and the 16 channels in order, as fused multiply-adds; then
// crema's ReLU (math/activation.hpp). The same on any thread count.
#include <cstddef>

namespace crema::cpu {

struct BlockedConvShape {
  int in_channels = 0;
  int channels = 0;           // of the output
  int height = 0, width = 0;  // of the input and of the output
  int kernel = 3;  // 3 (this kernel) or 1 (math/pointwise_depthwise.hpp PointwiseForward)
  // A 3x3 depthwise convolution (in_channels == channels, one group per channel) of this stride
  // (1 or 2): math/pointwise_depthwise.hpp DepthwiseForward.
  bool depthwise = false;
  int stride = 1;
};

// Whether BlockedConv3x3Forward runs on this CPU for that shape: AVX-512 (math/cpu_isa.hpp),
// channel counts multiples of 16, a non-empty image.
bool BlockedConv3x3Applies(const BlockedConvShape& shape);

// The weights (Caffe's: channels x in_channels x 3 x 3) in the kernel's order:
// [channels / 16][in_channels / 16][3][3][16 inputs][16 outputs] (as many floats).
void PackBlockedConv3x3Weights(const BlockedConvShape& shape, const float* w, float* packed);

// Floats of scratch BlockedConv3x3Forward needs for `batch` images (the input with its border
// of zeros, and one 64-byte alignment).
size_t BlockedConv3x3ScratchFloats(const BlockedConvShape& shape, int batch);

struct BlockedConvArgs {
  const float* x = nullptr;        // batch x in_channels x height x width, nChw16c
  bool x_plain = false;            // x in Caffe's plain layout (NCHW) instead
  const float* weights = nullptr;  // packed
  const float* bias = nullptr;     // channels, or null for none
  const float* relu = nullptr;     // the ReLU's negative slope, or null for no ReLU
  float* y = nullptr;              // batch x channels x height x width, nChw16c; may not overlap x
  int threads = 1;                 // OpenMP threads at most
  float* scratch = nullptr;        // BlockedConv3x3ScratchFloats(shape, batch)
};

// y = ReLU(conv3x3(x)) for `batch` images, in parallel over rows of output block groups (OpenMP,
// args.threads at most, each thread an equal share of the work). Requires BlockedConv3x3Applies.
void BlockedConv3x3Forward(const BlockedConvShape& shape, int batch, const BlockedConvArgs& args);

}  // namespace crema::cpu
