#pragma once
// A 1x1 convolution (stride 1, no padding, with bias and ReLU) followed by a 3x3 depthwise
// convolution of its output (pad 1, stride 1 or 2, with bias and ReLU), as MobileNet's blocks
// chain them (conv2_1/sep -> conv2_2/dw), computed row by row on oneDNN's channel-blocked layout
// with 16 channels a block (nChw16c, AVX-512): the 1x1 convolution's output rows go to a ring of
// three rows per thread, which the depthwise convolution reads while they are in L1/L2, instead
// of a whole intermediate image written out and read back from L3 or memory (MobileNet v1's
// 112 x 112 x 64 one: 3.2 MB). Net::PlanFuseDepthwise (src/net/README.md) runs it for such pairs
// in CPU inference.
//
// Each output is computed with the operations of oneDNN's jit kernels for the two layers (the
// bias, then the products over the input channels, or over the 3x3 taps row by row, in order,
// as fused multiply-adds; then crema's ReLU, math/activation.hpp): on MobileNet v1's pairs the
// results are the two layers' bits.
#include <cstddef>

namespace crema::cpu {

struct PointwiseDepthwiseShape {
  int in_channels = 0;        // of the 1x1 convolution's input
  int channels = 0;           // of its output, and of the depthwise convolution's input and output
  int height = 0, width = 0;  // of the input (and of the 1x1 convolution's output)
  int stride = 1;             // of the depthwise convolution: 1 or 2
  int out_height() const { return (height - 1) / stride + 1; }
  int out_width() const { return (width - 1) / stride + 1; }
};

// Whether PointwiseDepthwiseForward runs on this CPU for that shape: AVX-512 (math/cpu_isa.hpp),
// channel counts multiples of 16, stride 1 or 2, a non-empty image.
bool PointwiseDepthwiseApplies(const PointwiseDepthwiseShape& shape);

// Whether the fused kernel gains over the two layers on this CPU: when one image of the 1x1
// convolution's output is larger than half of a core's L2 cache (sysconf; 1 MiB assumed when
// unknown), so that written out whole it would be read back from L3 or memory. On a 2-core Xeon
// with 2 MB of L2 per core, MobileNet v1 at batch 1, one thread, each pair in the net against
// oneDNN's two kernels: 1.17-1.20x at 112 x 112 (stride 2, 3.2 MB in between), 1.05-1.07x at
// 56 x 56 (stride 2, 1.6 MB), 0.94-1.00x at 56 x 56 (stride 1, 1.6 MB, as large as the output);
// the whole pass 1.01-1.04x with the three, 1.00-1.02x without the stride-1 one.
bool PointwiseDepthwiseGains(const PointwiseDepthwiseShape& shape);

// The weights in the kernel's order. Pointwise: w is channels x in_channels (Caffe's 1x1
// convolution weights), packed as [channels / 16][in_channels / 16][16 inputs][16 outputs]
// (channels * in_channels floats). Depthwise: w is channels x 3 x 3, packed as
// [channels / 16][9 taps][16] (channels * 9 floats).
void PackPointwiseWeights(const PointwiseDepthwiseShape& shape, const float* w, float* packed);
void PackDepthwiseWeights(const PointwiseDepthwiseShape& shape, const float* w, float* packed);

// Floats of scratch PointwiseDepthwiseForward needs with `threads` OpenMP threads (three rows of
// the 1x1 convolution's output per thread, and one 64-byte alignment).
size_t PointwiseDepthwiseScratchFloats(const PointwiseDepthwiseShape& shape, int threads);

struct PointwiseDepthwiseArgs {
  const float* x = nullptr;               // batch x in_channels x height x width, nChw16c
  const float* pointwise = nullptr;       // packed
  const float* pointwise_bias = nullptr;  // channels, or null for none
  const float* pointwise_relu = nullptr;  // the ReLU's negative slope, or null for no ReLU
  const float* depthwise = nullptr;       // packed
  const float* depthwise_bias = nullptr;
  const float* depthwise_relu = nullptr;
  float* y = nullptr;        // batch x channels x out_height x out_width, nChw16c; may not
                             // overlap x
  int threads = 1;           // OpenMP threads at most
  float* scratch = nullptr;  // PointwiseDepthwiseScratchFloats(shape, threads)
};

// y = ReLU(depthwise(ReLU(pointwise(x)))) for `batch` images, in parallel over output rows
// (OpenMP, args.threads at most); the 1x1 convolution's rows next to a thread's first and last
// output rows are computed by both threads that need them. Requires
// PointwiseDepthwiseApplies(shape).
void PointwiseDepthwiseForward(const PointwiseDepthwiseShape& shape, int batch,
                               const PointwiseDepthwiseArgs& args);

// The operands of a kernel alone on the blocked layout (PointwiseForward, DepthwiseForward).
struct AloneArgs {
  const float* x = nullptr;        // batch x in_channels x positions, nChw16c
  const float* weights = nullptr;  // PackPointwiseWeights' / PackDepthwiseWeights' order
  const float* bias = nullptr;     // channels, or null for none
  const float* relu = nullptr;     // the ReLU's negative slope, or null for no ReLU
  float* y = nullptr;              // batch x channels x its positions, nChw16c; may not overlap x
  int threads = 1;                 // OpenMP threads at most
};

// A 1x1 convolution alone (stride 1, no padding, one group, with bias and ReLU) on the same
// layout with the same register tiles, the next chunk's weights fetched ahead (at batch 1 they
// come from memory): a kernel CPU inference's 1x1 convolutions race (CpuKernel::kCremaBlocked).
// On a 2-core Xeon, MobileNet v1 at batch 1, one thread, in the net: conv6/sep (7 x 7, 1024
// channels) 0.55-0.58 ms where oneDNN's took 0.62-0.64, the whole pass 1.045x with the layers
// whose races it won; two threads 1.01-1.02x; batch 8 0.99-1.0x.
// Whether it runs on this CPU: AVX-512, channel counts multiples of 16, positions > 0.
bool PointwiseApplies(int in_channels, int channels, int positions);

// y = ReLU(pointwise(x)) for `batch` images, each output as PointwiseDepthwiseForward's 1x1 part
// computes it (the same bits on any thread count), the threads taking equal shares of the tiles
// of the groups of output blocks (each group's weights used by every image in turn).
void PointwiseForward(int in_channels, int channels, int positions, int batch,
                      const AloneArgs& args);

// A 3x3 depthwise convolution alone (pad 1, stride 1 or 2, with bias and ReLU; shape.in_channels
// == shape.channels) on the same layout: the fused kernel's depthwise rows, reading the input's
// rows where they are, in parallel over output rows (the same bits on any thread count). A
// kernel CPU inference's depthwise convolutions race (CpuKernel::kCremaBlocked). Requires
// PointwiseDepthwiseApplies(shape).
void DepthwiseForward(const PointwiseDepthwiseShape& shape, int batch, const AloneArgs& args);

}  // namespace crema::cpu
