#pragma once
// The cuDNN engine of Convolution (and, with the roles of data and diff swapped, Deconvolution):
// NCHW / NCDHW float or double tensors, groups, pads, strides, dilations; biases are the
// layers' (gpu::AddChannelBias, gpu::ReduceByAxis). Descriptors are set up again only when the
// input shape changes. The algorithm of every direction (forward, backward data, backward
// filter) is chosen once per geometry in the process, as PyTorch's cudnn.benchmark: by timing
// (cudnnFind*), or in deterministic mode among the deterministic ones by cuDNN's heuristics,
// within the workspace limit (gpu::WorkspaceLimit); layers of the same geometry share the
// choice. FP32 math stays exact unless gpu::MathMode is TF32.
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

  // y = conv(x, w) (overwrites).
  void Forward(const void* x, const void* w, void* y);
  // dx = conv^T(dy, w) (overwrites).
  void BackwardData(const void* dy, const void* w, void* dx);
  // dw += dW(x, dy).
  void BackwardFilter(const void* x, const void* dy, void* dw);
  // The algorithms in use, e.g. "fwd IMPLICIT_PRECOMP_GEMM, bwd data 1, bwd filter 1".
  std::string Describe() const;

 private:
  void Destroy();
  void* Workspace(size_t bytes);
  void SetMath(cudnnMathType_t math);

  CudnnConvGeometry geometry_;
  bool ready_ = false;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_bytes_ = 0, bwd_data_bytes_ = 0, bwd_filter_bytes_ = 0;
  cudnnMathType_t fwd_math_{}, bwd_data_math_{}, bwd_filter_math_{};
  // The math type set on conv_desc_ (valid when conv_desc_applied_).
  cudnnMathType_t math_{};
  bool conv_desc_applied_ = false;
};

}  // namespace crema
#endif  // CREMA_WITH_CUDA
