#include "layers/convolution/cudnn_convolution.hpp"

#include <glog/logging.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"

namespace crema {
namespace {

using gpu::Check;

cudnnDataType_t CudnnType(DataType type) {
  return type == DataType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// cuDNN wants at least 4-D tensors: a 1-D convolution becomes 2-D with height 1.
std::vector<int> AtLeast4D(std::vector<int> dims) {
  while (dims.size() < 4) dims.insert(dims.begin() + 2, 1);
  return dims;
}

void SetTensor(cudnnTensorDescriptor_t desc, const std::vector<int>& dims, DataType type) {
  const std::vector<int> d = AtLeast4D(dims);
  std::vector<int> strides(d.size());
  int stride = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= d[i];
  }
  Check(cudnnSetTensorNdDescriptor(desc, CudnnType(type), static_cast<int>(d.size()), d.data(),
                                   strides.data()),
        "cudnnSetTensorNdDescriptor");
}

// One workspace per device, shared by every cuDNN layer: layers run one at a time on the
// device's stream, so they never use it at the same time.
void* SharedWorkspace(size_t bytes) {
  static std::mutex mutex;
  static auto* workspaces = new std::map<int, std::unique_ptr<Blob>>();
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Blob>& blob = (*workspaces)[device];
  if (!blob) blob = std::make_unique<Blob>(DataType::kFloat64);
  const int64_t doubles = static_cast<int64_t>((bytes + 7) / 8);
  if (blob->count() < doubles) blob->Reshape(std::vector<int>{static_cast<int>(doubles)});
  return blob->count() == 0 ? nullptr : blob->mutable_gpu_data<double>();
}

bool AcceptMath(cudnnMathType_t math) {
  if (gpu::GetMathMode() == gpu::MathMode::kTf32) return true;
  return math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Picks the fastest (Find results come sorted by time) or, in deterministic mode, the first
// deterministic algorithm that fits the workspace limit and the math mode.
template <typename Perf>
const Perf* Pick(const std::vector<Perf>& perfs, int returned, const char* what) {
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > gpu::WorkspaceLimit()) continue;
    if (gpu::Deterministic() && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (!AcceptMath(p.mathType)) continue;
    return &p;
  }
  CREMA_THROW_RUNTIME("cuDNN has no ", what, " algorithm for this convolution within the ",
                      gpu::WorkspaceLimit() >> 20,
                      " MiB workspace limit (raise --cudnn_workspace_mb)");
}

}  // namespace

bool CudnnConvGeometry::operator==(const CudnnConvGeometry& o) const {
  return input == o.input && output == o.output && filter == o.filter && pad == o.pad &&
         stride == o.stride && dilation == o.dilation && group == o.group && dtype == o.dtype;
}

bool CudnnConvolution::Supports(int channel_axis, int num_spatial_axes) {
  return channel_axis == 1 && num_spatial_axes >= 1 && num_spatial_axes <= 3;
}

CudnnConvolution::~CudnnConvolution() { Destroy(); }

void CudnnConvolution::Destroy() {
  if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
  if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
  if (bias_desc_) cudnnDestroyTensorDescriptor(bias_desc_);
  if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
  if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
  x_desc_ = y_desc_ = bias_desc_ = nullptr;
  w_desc_ = nullptr;
  conv_desc_ = nullptr;
  ready_ = false;
}

void CudnnConvolution::Prepare(const CudnnConvGeometry& g) {
  if (ready_ && g == geometry_) return;
  Destroy();
  geometry_ = g;
  cudnnHandle_t handle = gpu::CudnnHandle();
  Check(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
  Check(cudnnCreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor");
  Check(cudnnCreateTensorDescriptor(&bias_desc_), "cudnnCreateTensorDescriptor");
  Check(cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
  Check(cudnnCreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
  SetTensor(x_desc_, g.input, g.dtype);
  SetTensor(y_desc_, g.output, g.dtype);
  std::vector<int> bias_dims(AtLeast4D(g.output).size(), 1);
  bias_dims[1] = g.output[1];
  SetTensor(bias_desc_, bias_dims, g.dtype);
  const std::vector<int> w = AtLeast4D(g.filter);
  Check(cudnnSetFilterNdDescriptor(w_desc_, CudnnType(g.dtype), CUDNN_TENSOR_NCHW,
                                   static_cast<int>(w.size()), w.data()),
        "cudnnSetFilterNdDescriptor");
  std::vector<int> pad = g.pad, stride = g.stride, dilation = g.dilation;
  if (pad.size() == 1) {
    pad.insert(pad.begin(), 0);
    stride.insert(stride.begin(), 1);
    dilation.insert(dilation.begin(), 1);
  }
  Check(cudnnSetConvolutionNdDescriptor(conv_desc_, static_cast<int>(pad.size()), pad.data(),
                                        stride.data(), dilation.data(), CUDNN_CROSS_CORRELATION,
                                        CudnnType(g.dtype)),
        "cudnnSetConvolutionNdDescriptor");
  Check(cudnnSetConvolutionGroupCount(conv_desc_, g.group), "cudnnSetConvolutionGroupCount");
  const bool exact = g.dtype == DataType::kFloat32 && gpu::GetMathMode() == gpu::MathMode::kFp32;
  Check(cudnnSetConvolutionMathType(conv_desc_, exact ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
        "cudnnSetConvolutionMathType");

  // Timing (cudnnFind*) like PyTorch's cudnn.benchmark; heuristics in deterministic mode, so
  // that the choice does not depend on timing noise either.
  const bool timed = !gpu::Deterministic();
  int max_count = 0, returned = 0;
  {
    Check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(max_count);
    if (timed)
      Check(cudnnFindConvolutionForwardAlgorithm(handle, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                 max_count, &returned, perfs.data()),
            "cudnnFindConvolutionForwardAlgorithm");
    else
      Check(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                   max_count, &returned, perfs.data()),
            "cudnnGetConvolutionForwardAlgorithm_v7");
    const auto* p = Pick(perfs, returned, "forward");
    fwd_algo_ = p->algo;
    Check(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                  fwd_algo_, &fwd_bytes_),
          "cudnnGetConvolutionForwardWorkspaceSize");
  }
  {
    Check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(max_count);
    if (timed)
      Check(cudnnFindConvolutionBackwardDataAlgorithm(handle, w_desc_, y_desc_, conv_desc_,
                                                      x_desc_, max_count, &returned, perfs.data()),
            "cudnnFindConvolutionBackwardDataAlgorithm");
    else
      Check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_desc_, y_desc_, conv_desc_,
                                                        x_desc_, max_count, &returned,
                                                        perfs.data()),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    const auto* p = Pick(perfs, returned, "backward-data");
    bwd_data_algo_ = p->algo;
    Check(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_, conv_desc_,
                                                       x_desc_, bwd_data_algo_, &bwd_data_bytes_),
          "cudnnGetConvolutionBackwardDataWorkspaceSize");
  }
  {
    Check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(max_count);
    if (timed)
      Check(cudnnFindConvolutionBackwardFilterAlgorithm(handle, x_desc_, y_desc_, conv_desc_,
                                                        w_desc_, max_count, &returned,
                                                        perfs.data()),
            "cudnnFindConvolutionBackwardFilterAlgorithm");
    else
      Check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_desc_, y_desc_, conv_desc_,
                                                          w_desc_, max_count, &returned,
                                                          perfs.data()),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    const auto* p = Pick(perfs, returned, "backward-filter");
    bwd_filter_algo_ = p->algo;
    Check(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x_desc_, y_desc_, conv_desc_,
                                                         w_desc_, bwd_filter_algo_,
                                                         &bwd_filter_bytes_),
          "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  }
  ready_ = true;
  VLOG(1) << "cuDNN convolution: " << Describe();
}

void* CudnnConvolution::Workspace(size_t bytes) {
  return bytes == 0 ? nullptr : SharedWorkspace(bytes);
}

void CudnnConvolution::Forward(const void* x, const void* w, const void* bias, void* y) {
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool is_double = geometry_.dtype == DataType::kFloat64;
  const void* one = is_double ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = is_double ? static_cast<const void*>(&zero_d) : &zero_f;
  cudnnHandle_t handle = gpu::CudnnHandle();
  Check(cudnnConvolutionForward(handle, one, x_desc_, x, w_desc_, w, conv_desc_, fwd_algo_,
                                Workspace(fwd_bytes_), fwd_bytes_, zero, y_desc_, y),
        "cudnnConvolutionForward");
  if (bias != nullptr)
    Check(cudnnAddTensor(handle, one, bias_desc_, bias, one, y_desc_, y), "cudnnAddTensor");
}

void CudnnConvolution::BackwardData(const void* dy, const void* w, void* dx) {
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool is_double = geometry_.dtype == DataType::kFloat64;
  const void* one = is_double ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = is_double ? static_cast<const void*>(&zero_d) : &zero_f;
  Check(cudnnConvolutionBackwardData(gpu::CudnnHandle(), one, w_desc_, w, y_desc_, dy, conv_desc_,
                                     bwd_data_algo_, Workspace(bwd_data_bytes_), bwd_data_bytes_,
                                     zero, x_desc_, dx),
        "cudnnConvolutionBackwardData");
}

void CudnnConvolution::BackwardFilter(const void* x, const void* dy, void* dw, void* db) {
  const double one_d = 1;
  const float one_f = 1;
  const bool is_double = geometry_.dtype == DataType::kFloat64;
  const void* one = is_double ? static_cast<const void*>(&one_d) : &one_f;
  cudnnHandle_t handle = gpu::CudnnHandle();
  // beta = 1: parameter gradients accumulate, as everywhere in Caffe.
  if (dw != nullptr)
    Check(cudnnConvolutionBackwardFilter(handle, one, x_desc_, x, y_desc_, dy, conv_desc_,
                                         bwd_filter_algo_, Workspace(bwd_filter_bytes_),
                                         bwd_filter_bytes_, one, w_desc_, dw),
          "cudnnConvolutionBackwardFilter");
  if (db != nullptr)
    Check(cudnnConvolutionBackwardBias(handle, one, y_desc_, dy, one, bias_desc_, db),
          "cudnnConvolutionBackwardBias");
}

std::string CudnnConvolution::Describe() const {
  return StrCat("forward algorithm ", static_cast<int>(fwd_algo_), " (", fwd_bytes_,
                " B workspace), backward data ", static_cast<int>(bwd_data_algo_), " (",
                bwd_data_bytes_, " B), backward filter ", static_cast<int>(bwd_filter_algo_),
                " (", bwd_filter_bytes_, " B)");
}

}  // namespace crema
