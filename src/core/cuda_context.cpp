#include "core/cuda_context.hpp"

#include <atomic>
#include <map>
#include <mutex>

#include "crema/error.hpp"

namespace crema::gpu {
namespace {

std::atomic<MathMode> g_math_mode{MathMode::kFp32};
std::atomic<bool> g_deterministic{false};
std::atomic<size_t> g_workspace_limit{size_t{1} << 30};

}  // namespace

void SetDeterministic(bool deterministic) { g_deterministic = deterministic; }
bool Deterministic() { return g_deterministic; }
void SetWorkspaceLimit(size_t bytes) { g_workspace_limit = bytes; }
size_t WorkspaceLimit() { return g_workspace_limit; }
MathMode GetMathMode() { return g_math_mode; }

#ifdef CREMA_WITH_CUDA
namespace {

struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

std::mutex& ContextMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
// Never destroyed: handles must outlive every static that might still free device memory.
std::map<int, DeviceContext>& Contexts() {
  static auto* contexts = new std::map<int, DeviceContext>();
  return *contexts;
}

cublasMath_t CublasMath(MathMode mode) {
  return mode == MathMode::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH;
}

DeviceContext& Context() {
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(ContextMutex());
  DeviceContext& ctx = Contexts()[device];
  if (ctx.stream == nullptr) {
    Check(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cublasCreate(&ctx.cublas), "cublasCreate");
    Check(cublasSetStream(ctx.cublas, ctx.stream), "cublasSetStream");
    Check(cublasSetMathMode(ctx.cublas, CublasMath(g_math_mode)), "cublasSetMathMode");
  }
  return ctx;
}

}  // namespace

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME(what, " failed: ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ")");
}

void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    CREMA_THROW_RUNTIME(what, " failed: ", cublasGetStatusName(status));
}

void Check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    CREMA_THROW_RUNTIME(what, " failed: ", cudnnGetErrorString(status));
}

cudaStream_t Stream() { return Context().stream; }
cublasHandle_t CublasHandle() { return Context().cublas; }

cudnnHandle_t CudnnHandle() {
  DeviceContext& ctx = Context();
  std::lock_guard<std::mutex> lock(ContextMutex());
  if (ctx.cudnn == nullptr) {
    Check(cudnnCreate(&ctx.cudnn), "cudnnCreate");
    Check(cudnnSetStream(ctx.cudnn, ctx.stream), "cudnnSetStream");
  }
  return ctx.cudnn;
}

void Synchronize() { Check(cudaStreamSynchronize(Stream()), "cudaStreamSynchronize"); }

void SetMathMode(MathMode mode) {
  g_math_mode = mode;
  std::lock_guard<std::mutex> lock(ContextMutex());
  for (auto& entry : Contexts())
    if (entry.second.cublas != nullptr)
      Check(cublasSetMathMode(entry.second.cublas, CublasMath(mode)), "cublasSetMathMode");
}
#else
void SetMathMode(MathMode mode) { g_math_mode = mode; }
#endif  // CREMA_WITH_CUDA

}  // namespace crema::gpu
