#include <cstdlib>
#include <cstring>

#include "crema/blob.hpp"
#include "crema/error.hpp"

#ifdef CREMA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace crema {
namespace {

void* HostAlloc(size_t size) {
  // 64-byte alignment for vector loads; at least 1 byte so a zero-size blob has an address.
  size_t rounded = ((size + 63) / 64) * 64;
  void* ptr = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (ptr == nullptr) CREMA_THROW_RUNTIME("out of host memory allocating ", size, " bytes");
  return ptr;
}

#ifdef CREMA_WITH_CUDA
void CudaCheck(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME(what, " failed: ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ")");
}
#endif

[[noreturn]] void NoCuda() {
  CREMA_THROW_RUNTIME(
      "this crema was built without CUDA; rebuild with -DCREMA_CUDA=ON or run on the CPU");
}

}  // namespace

SyncedMemory::SyncedMemory(size_t size_bytes) : size_(size_bytes) {}

SyncedMemory::~SyncedMemory() {
  if (cpu_ptr_ != nullptr && own_cpu_data_) std::free(cpu_ptr_);
#ifdef CREMA_WITH_CUDA
  if (gpu_ptr_ != nullptr && own_gpu_data_) cudaFree(gpu_ptr_);
#endif
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case Head::kUninitialized:
      cpu_ptr_ = HostAlloc(size_);
      std::memset(cpu_ptr_, 0, size_);
      own_cpu_data_ = true;
      head_ = Head::kAtCpu;
      break;
    case Head::kAtGpu:
#ifdef CREMA_WITH_CUDA
      if (cpu_ptr_ == nullptr) {
        cpu_ptr_ = HostAlloc(size_);
        own_cpu_data_ = true;
      }
      CudaCheck(cudaMemcpy(cpu_ptr_, gpu_ptr_, size_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
      head_ = Head::kSynced;
#else
      NoCuda();
#endif
      break;
    case Head::kAtCpu:
    case Head::kSynced:
      break;
  }
}

void SyncedMemory::ToGpu() {
#ifdef CREMA_WITH_CUDA
  switch (head_) {
    case Head::kUninitialized:
      CudaCheck(cudaGetDevice(&gpu_device_), "cudaGetDevice");
      CudaCheck(cudaMalloc(&gpu_ptr_, size_ == 0 ? 1 : size_), "cudaMalloc");
      CudaCheck(cudaMemset(gpu_ptr_, 0, size_), "cudaMemset");
      own_gpu_data_ = true;
      head_ = Head::kAtGpu;
      break;
    case Head::kAtCpu:
      if (gpu_ptr_ == nullptr) {
        CudaCheck(cudaGetDevice(&gpu_device_), "cudaGetDevice");
        CudaCheck(cudaMalloc(&gpu_ptr_, size_ == 0 ? 1 : size_), "cudaMalloc");
        own_gpu_data_ = true;
      }
      CudaCheck(cudaMemcpy(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
      head_ = Head::kSynced;
      break;
    case Head::kAtGpu:
    case Head::kSynced:
      break;
  }
#else
  NoCuda();
#endif
}

const void* SyncedMemory::cpu_data() {
  ToCpu();
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data() {
  ToCpu();
  head_ = Head::kAtCpu;
  return cpu_ptr_;
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  head_ = Head::kAtGpu;
  return gpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CREMA_ASSERT(data != nullptr);
  if (own_cpu_data_) std::free(cpu_ptr_);
  cpu_ptr_ = data;
  own_cpu_data_ = false;
  head_ = Head::kAtCpu;
}

}  // namespace crema
