#pragma once
// The cuDNN engine of Convolution (and, with the roles of data and diff swapped, Deconvolution):
// NCHW / NCDHW float or double tensors, groups, pads, strides, dilations. Descriptors are set up
// again only when the input shape changes; for each shape the algorithms are chosen once, by
// timing (cudnnFind*) or, in deterministic mode, among the deterministic ones, within the
// workspace limit (gpu::WorkspaceLimit). FP32 math stays exact unless gpu::MathMode is TF32.
#ifdef CREMA_WITH_CUDA
#include <cudnn.h>

#include <cstddef>
#include <string>
#include <vector>

#include "crema/blob.hpp"

namespace crema {

struct CudnnConvGeometry {
  std::vector<int> input;   // (N, C, spatial...)
  std::vector<int> output;  // (N, K, spatial...)
  std::vector<int> filter;  // (K, C / group, kernel...)
  std::vector<int> pad, stride, dilation;
  int group = 1;
  DataType dtype = DataType::kFloat32;
  bool operator==(const CudnnConvGeometry& o) const;
};

class CudnnConvolution {
 public:
  CudnnConvolution() = default;
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // Whether cuDNN handles these parameters (1 to 3 spatial axes, channel axis 1).
  static bool Supports(int channel_axis, int num_spatial_axes);
  // (Re)creates descriptors and picks algorithms when `geometry` differs from the last one.
  void Prepare(const CudnnConvGeometry& geometry);

  // y = conv(x, w) (+ bias broadcast per output channel when bias != null).
  void Forward(const void* x, const void* w, const void* bias, void* y);
  // dx = conv^T(dy, w) (overwrites).
  void BackwardData(const void* dy, const void* w, void* dx);
  // dw += dW(x, dy); db += sum of dy per channel (null pointers are skipped).
  void BackwardFilter(const void* x, const void* dy, void* dw, void* db);
  // The algorithms in use, e.g. "fwd IMPLICIT_PRECOMP_GEMM, bwd data 1, bwd filter 1".
  std::string Describe() const;

 private:
  void Destroy();
  void* Workspace(size_t bytes);

  CudnnConvGeometry geometry_;
  bool ready_ = false;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, bias_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_bytes_ = 0, bwd_data_bytes_ = 0, bwd_filter_bytes_ = 0;
  Blob workspace_{DataType::kFloat64};
};

}  // namespace crema
#endif  // CREMA_WITH_CUDA
