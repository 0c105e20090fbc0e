#include <glog/logging.h>

#include <map>
#include <mutex>
#include <string>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#include "layers/convolution/cudnn_convolution.hpp"
#include "math/math_gpu.hpp"

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

// TF32 tensor cores only under --math tf32; never a conversion of the data to half precision.
bool AcceptMath(cudnnMathType_t math) {
  if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  return gpu::GetMathMode() == gpu::MathMode::kTf32 || math != CUDNN_TENSOR_OP_MATH;
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
  if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
  if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
  x_desc_ = y_desc_ = nullptr;
  w_desc_ = nullptr;
  conv_desc_ = nullptr;
  conv_desc_applied_ = false;
  ready_ = false;
}

namespace {

// The algorithms chosen for one geometry under the current settings.
struct AlgoChoice {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
  cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
};

std::string ChoiceKey(const CudnnConvGeometry& g) {
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  std::string key = StrCat(device, "|", static_cast<int>(g.dtype), "|", g.group, "|",
                           static_cast<int>(gpu::GetMathMode()), "|", gpu::Deterministic(), "|",
                           gpu::WorkspaceLimit());
  for (const auto* dims : {&g.input, &g.output, &g.filter, &g.pad, &g.stride, &g.dilation}) {
    key += "|";
    for (int d : *dims) key += StrCat(d, ",");
  }
  return key;
}

}  // namespace

void CudnnConvolution::Prepare(const CudnnConvGeometry& g) {
  if (ready_ && g == geometry_) return;
  Destroy();
  geometry_ = g;
  cudnnHandle_t handle = gpu::CudnnHandle();
  Check(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
  Check(cudnnCreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor");
  Check(cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
  Check(cudnnCreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
  SetTensor(x_desc_, g.input, g.dtype);
  SetTensor(y_desc_, g.output, g.dtype);
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
  // Algorithms are timed under `base`; each runs with the math type it was timed with (FMA only
  // when float32 stays exact).
  const cudnnMathType_t base = exact ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  const auto math_of = [&](cudnnMathType_t timed) { return exact ? CUDNN_FMA_MATH : timed; };
  SetMath(base);

  static std::mutex mutex;
  static auto* choices = new std::map<std::string, AlgoChoice>();
  const std::string key = ChoiceKey(g);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = choices->find(key);
    if (it != choices->end()) {
      const AlgoChoice& c = it->second;
      fwd_algo_ = c.fwd;
      bwd_data_algo_ = c.bwd_data;
      bwd_filter_algo_ = c.bwd_filter;
      fwd_bytes_ = c.fwd_bytes;
      bwd_data_bytes_ = c.bwd_data_bytes;
      bwd_filter_bytes_ = c.bwd_filter_bytes;
      fwd_math_ = c.fwd_math;
      bwd_data_math_ = c.bwd_data_math;
      bwd_filter_math_ = c.bwd_filter_math;
      ready_ = true;
      return;
    }
  }

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
    fwd_math_ = math_of(p->mathType);
    SetMath(fwd_math_);
    Check(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                  fwd_algo_, &fwd_bytes_),
          "cudnnGetConvolutionForwardWorkspaceSize");
  }
  {
    SetMath(base);
    Check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(max_count);
    if (timed)
      Check(cudnnFindConvolutionBackwardDataAlgorithm(handle, w_desc_, y_desc_, conv_desc_, x_desc_,
                                                      max_count, &returned, perfs.data()),
            "cudnnFindConvolutionBackwardDataAlgorithm");
    else
      Check(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                handle, w_desc_, y_desc_, conv_desc_, x_desc_, max_count, &returned, perfs.data()),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    const auto* p = Pick(perfs, returned, "backward-data");
    bwd_data_algo_ = p->algo;
    bwd_data_math_ = math_of(p->mathType);
    SetMath(bwd_data_math_);
    Check(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_, conv_desc_,
                                                       x_desc_, bwd_data_algo_, &bwd_data_bytes_),
          "cudnnGetConvolutionBackwardDataWorkspaceSize");
  }
  {
    SetMath(base);
    Check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(max_count);
    if (timed)
      Check(cudnnFindConvolutionBackwardFilterAlgorithm(
                handle, x_desc_, y_desc_, conv_desc_, w_desc_, max_count, &returned, perfs.data()),
            "cudnnFindConvolutionBackwardFilterAlgorithm");
    else
      Check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                handle, x_desc_, y_desc_, conv_desc_, w_desc_, max_count, &returned, perfs.data()),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    const auto* p = Pick(perfs, returned, "backward-filter");
    bwd_filter_algo_ = p->algo;
    bwd_filter_math_ = math_of(p->mathType);
    SetMath(bwd_filter_math_);
    Check(cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, x_desc_, y_desc_, conv_desc_, w_desc_, bwd_filter_algo_, &bwd_filter_bytes_),
          "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  }
  ready_ = true;
  // Once per geometry in a process: the choice, and the workspace it needs (the shared workspace
  // grows to the largest).
  LOG(INFO) << "cuDNN convolution " << key.substr(key.find('|') + 1) << ": " << Describe();
  std::lock_guard<std::mutex> lock(mutex);
  (*choices)[key] = AlgoChoice{fwd_algo_,  bwd_data_algo_,  bwd_filter_algo_,
                               fwd_bytes_, bwd_data_bytes_, bwd_filter_bytes_,
                               fwd_math_,  bwd_data_math_,  bwd_filter_math_};
}

// One workspace per device, shared by every cuDNN layer: layers run one at a time on the
// device's stream, so they never use it at the same time.
void* CudnnConvolution::Workspace(size_t bytes) {
  return gpu::DeviceScratch(gpu::Scratch::kCudnnWorkspace, bytes);
}

namespace {

// The alpha = 1 and beta = 0 or 1 scalars of a cuDNN call, in the tensors' type.
struct Scalars {
  explicit Scalars(DataType type) : is_double(type == DataType::kFloat64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&one_d) : &one_f; }
  const void* zero() const { return is_double ? static_cast<const void*>(&zero_d) : &zero_f; }
  bool is_double;
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
};

}  // namespace

// Each direction runs with the math type its algorithm was timed with (as PyTorch does).
void CudnnConvolution::SetMath(cudnnMathType_t math) {
  if (math == math_ && conv_desc_applied_) return;
  Check(cudnnSetConvolutionMathType(conv_desc_, math), "cudnnSetConvolutionMathType");
  math_ = math;
  conv_desc_applied_ = true;
}

void CudnnConvolution::Forward(const void* x, const void* w, void* y) {
  SetMath(fwd_math_);
  const Scalars s(geometry_.dtype);
  Check(cudnnConvolutionForward(gpu::CudnnHandle(), s.one(), x_desc_, x, w_desc_, w, conv_desc_,
                                fwd_algo_, Workspace(fwd_bytes_), fwd_bytes_, s.zero(), y_desc_, y),
        "cudnnConvolutionForward");
}

void CudnnConvolution::BackwardData(const void* dy, const void* w, void* dx) {
  SetMath(bwd_data_math_);
  const Scalars s(geometry_.dtype);
  Check(cudnnConvolutionBackwardData(gpu::CudnnHandle(), s.one(), w_desc_, w, y_desc_, dy,
                                     conv_desc_, bwd_data_algo_, Workspace(bwd_data_bytes_),
                                     bwd_data_bytes_, s.zero(), x_desc_, dx),
        "cudnnConvolutionBackwardData");
}

void CudnnConvolution::BackwardFilter(const void* x, const void* dy, void* dw) {
  SetMath(bwd_filter_math_);
  const Scalars s(geometry_.dtype);
  // beta = 1: parameter gradients accumulate, as everywhere in Caffe.
  Check(cudnnConvolutionBackwardFilter(gpu::CudnnHandle(), s.one(), x_desc_, x, y_desc_, dy,
                                       conv_desc_, bwd_filter_algo_, Workspace(bwd_filter_bytes_),
                                       bwd_filter_bytes_, s.one(), w_desc_, dw),
        "cudnnConvolutionBackwardFilter");
}

std::string CudnnConvolution::Describe() const {
  return StrCat("forward algorithm ", static_cast<int>(fwd_algo_), " (", fwd_bytes_,
                " B workspace, math ", static_cast<int>(fwd_math_), "), backward data ",
                static_cast<int>(bwd_data_algo_), " (", bwd_data_bytes_, " B, math ",
                static_cast<int>(bwd_data_math_), "), backward filter ",
                static_cast<int>(bwd_filter_algo_), " (", bwd_filter_bytes_, " B, math ",
                static_cast<int>(bwd_filter_math_), ")");
}

}  // namespace crema
