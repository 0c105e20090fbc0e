#include "core/cuda_context.hpp"

#ifdef CREMA_WITH_CUDA
#include <dlfcn.h>
#endif

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/cuda_allocator.hpp"
#include "crema/error.hpp"

namespace crema::gpu {
namespace {

std::atomic<MathMode> g_math_mode{MathMode::kFp32};
std::atomic<bool> g_deterministic{false};
std::atomic<size_t> g_workspace_limit{size_t{1} << 30};
thread_local bool t_capturing = false;

}  // namespace

bool Capturing() { return t_capturing; }
void SetCapturing(bool capturing) { t_capturing = capturing; }
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

// Resolves `name` in `library` into `*function`.
template <typename Fn>
void Resolve(void* library, const char* soname, const char* name, Fn* function) {
  *function = reinterpret_cast<Fn>(dlsym(library, name));
  if (*function == nullptr)
    CREMA_THROW_RUNTIME(soname, " has no function ", name,
                        " (an older cuBLAS than crema was built "
                        "with?)");
}

CublasApi LoadCublas() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    CREMA_THROW_RUNTIME("cannot load ", soname, " (cuBLAS, needed to run on a GPU): ", dlerror(),
                        "; install cuBLAS ", CUBLAS_VER_MAJOR,
                        " or add its folder to LD_LIBRARY_PATH");
  CublasApi api;
  const char* so = soname.c_str();
  // The exported names: cublas_v2.h maps cublasCreate to cublasCreate_v2 and so on.
  Resolve(library, so, "cublasCreate_v2", &api.Create);
  Resolve(library, so, "cublasSetWorkspace_v2", &api.SetWorkspace);
  Resolve(library, so, "cublasSetStream_v2", &api.SetStream);
  Resolve(library, so, "cublasSetMathMode", &api.SetMathMode);
  Resolve(library, so, "cublasGetStatusName", &api.GetStatusName);
  Resolve(library, so, "cublasSgemm_v2", &api.Sgemm);
  Resolve(library, so, "cublasDgemm_v2", &api.Dgemm);
  Resolve(library, so, "cublasSgemmStridedBatched", &api.SgemmStridedBatched);
  Resolve(library, so, "cublasDgemmStridedBatched", &api.DgemmStridedBatched);
  Resolve(library, so, "cublasSgemv_v2", &api.Sgemv);
  Resolve(library, so, "cublasDgemv_v2", &api.Dgemv);
  Resolve(library, so, "cublasSaxpy_v2_64", &api.Saxpy_64);
  Resolve(library, so, "cublasDaxpy_v2_64", &api.Daxpy_64);
  Resolve(library, so, "cublasSscal_v2_64", &api.Sscal_64);
  Resolve(library, so, "cublasDscal_v2_64", &api.Dscal_64);
  Resolve(library, so, "cublasSdot_v2_64", &api.Sdot_64);
  Resolve(library, so, "cublasDdot_v2_64", &api.Ddot_64);
  Resolve(library, so, "cublasSasum_v2_64", &api.Sasum_64);
  Resolve(library, so, "cublasDasum_v2_64", &api.Dasum_64);
  return api;
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
    const CublasApi& cublas = Cublas();
    Check(cublas.Create(&ctx.cublas), "cublasCreate");
    Check(cublas.SetStream(ctx.cublas, ctx.stream), "cublasSetStream");
    Check(cublas.SetMathMode(ctx.cublas, CublasMath(g_math_mode)), "cublasSetMathMode");
    // A workspace of crema's own (the size cuBLAS asks for on Hopper), so that cuBLAS never
    // allocates inside a graph capture.
    constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
    Check(
        cublas.SetWorkspace(ctx.cublas, DeviceAlloc(kCublasWorkspaceBytes), kCublasWorkspaceBytes),
        "cublasSetWorkspace");
  }
  return ctx;
}

}  // namespace

const CublasApi& Cublas() {
  // Loaded once; a failed load throws and is tried again on the next call.
  static std::mutex mutex;
  static std::unique_ptr<CublasApi> api;
  std::lock_guard<std::mutex> lock(mutex);
  if (api == nullptr) api = std::make_unique<CublasApi>(LoadCublas());
  return *api;
}

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME(what, " failed: ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ")");
}

void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    CREMA_THROW_RUNTIME(what, " failed: ", Cublas().GetStatusName(status));
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
      Check(Cublas().SetMathMode(entry.second.cublas, CublasMath(mode)), "cublasSetMathMode");
}
#else
void SetMathMode(MathMode mode) { g_math_mode = mode; }
#endif  // CREMA_WITH_CUDA

}  // namespace crema::gpu
