#pragma once
// Per-device CUDA state (built when CREMA_WITH_CUDA): one non-blocking stream per device with the
// cuBLAS and cuDNN handles bound to it, and the process-wide GPU math settings. Every crema
// kernel, copy and library call runs on the current device's stream, so work is ordered without
// host synchronization; the host waits only where it reads a value.
#include <cstddef>

#ifdef CREMA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace crema::gpu {

// The stream and handles of the calling thread's current device (created on first use).
cudaStream_t Stream();
cublasHandle_t CublasHandle();
cudnnHandle_t CudnnHandle();
// Waits for all work queued on the current device's stream.
void Synchronize();

// cuBLAS, loaded on first use (dlopen of libcublas.so.<major>, from the library path) rather
// than linked: linking maps and relocates cuBLAS and cuBLASLt, ~210 MB resident in every crema
// process, CPU-only runs included. The members have the types of the header's functions (the
// _v2 ones the cublas_v2.h macros name). RuntimeError when the library or a function is missing.
struct CublasApi {
  decltype(&::cublasCreate) Create;
  decltype(&::cublasSetStream) SetStream;
  decltype(&::cublasSetMathMode) SetMathMode;
  decltype(&::cublasSetWorkspace) SetWorkspace;
  decltype(&::cublasGetStatusName) GetStatusName;
  decltype(&::cublasSgemm) Sgemm;
  decltype(&::cublasDgemm) Dgemm;
  decltype(&::cublasSgemmStridedBatched) SgemmStridedBatched;
  decltype(&::cublasDgemmStridedBatched) DgemmStridedBatched;
  decltype(&::cublasSgemv) Sgemv;
  decltype(&::cublasDgemv) Dgemv;
  decltype(&::cublasSaxpy_64) Saxpy_64;
  decltype(&::cublasDaxpy_64) Daxpy_64;
  decltype(&::cublasSscal_64) Sscal_64;
  decltype(&::cublasDscal_64) Dscal_64;
  decltype(&::cublasSdot_64) Sdot_64;
  decltype(&::cublasDdot_64) Ddot_64;
  decltype(&::cublasSasum_64) Sasum_64;
  decltype(&::cublasDasum_64) Dasum_64;
};
const CublasApi& Cublas();

// Throw RuntimeError naming `what` and the library's error.
void Check(cudaError_t status, const char* what);
void Check(cublasStatus_t status, const char* what);
void Check(cudnnStatus_t status, const char* what);

}  // namespace crema::gpu

#define CREMA_CUDA_CHECK(expr) ::crema::gpu::Check((expr), #expr)
#endif  // CREMA_WITH_CUDA

namespace crema::gpu {

// kFp32: exact float32 (no tensor cores for float data). kTf32: cuBLAS and cuDNN may use TF32
// tensor cores for float32 data (crema --math tf32).
enum class MathMode { kFp32, kTf32 };
void SetMathMode(MathMode mode);
MathMode GetMathMode();
// Deterministic mode: cuDNN algorithms are restricted to deterministic ones.
void SetDeterministic(bool deterministic);
bool Deterministic();
// Upper bound of one cuDNN workspace in bytes (crema --cudnn_workspace_mb).
void SetWorkspaceLimit(size_t bytes);
size_t WorkspaceLimit();
// Whether the calling thread is capturing a CUDA graph (net/iteration_graph.hpp): the layers then
// leave out host reads of device values (the loss, label checks), which the net does after the
// replay.
bool Capturing();
void SetCapturing(bool capturing);

}  // namespace crema::gpu
