#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/host_memory.hpp"
#include "crema/blob.hpp"
#include "crema/error.hpp"

#ifdef CREMA_WITH_CUDA
#include "core/cuda_allocator.hpp"
#include "core/cuda_context.hpp"
#endif

namespace crema {
namespace {

[[noreturn]] void NoCuda() {
  CREMA_THROW_RUNTIME(
      "this crema was built without CUDA; rebuild with -DCREMA_CUDA=ON or run on the CPU");
}

}  // namespace

SyncedMemory::SyncedMemory(size_t size_bytes) : size_(size_bytes) {}

uint64_t SyncedMemory::NewGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void SyncedMemory::MarkWritten() { generation_ = NewGeneration(); }

SyncedMemory::~SyncedMemory() {
  if (cpu_ptr_ != nullptr && own_cpu_data_) std::free(cpu_ptr_);
#ifdef CREMA_WITH_CUDA
  if (gpu_ptr_ != nullptr && own_gpu_data_) gpu::DeviceFree(gpu_ptr_);
#endif
}

std::shared_ptr<SyncedMemory> SyncedMemory::View(std::shared_ptr<SyncedMemory> arena, size_t offset,
                                                 size_t size) {
  CREMA_ASSERT(arena && offset + size <= arena->size(), offset, " ", size);
  auto view = std::make_shared<SyncedMemory>(size);
  view->arena_ = std::move(arena);
  view->offset_ = offset;
  return view;
}

char* SyncedMemory::HostBase() {
  if (cpu_ptr_ == nullptr) {
    cpu_ptr_ = AllocateHost(size_);
    own_cpu_data_ = true;
  }
  return static_cast<char*>(cpu_ptr_);
}

char* SyncedMemory::DeviceBase() {
#ifdef CREMA_WITH_CUDA
  if (gpu_ptr_ == nullptr) {
    gpu::Check(cudaGetDevice(&gpu_device_), "cudaGetDevice");
    gpu_ptr_ = gpu::DeviceAlloc(size_);
    own_gpu_data_ = true;
  }
  return static_cast<char*>(gpu_ptr_);
#else
  NoCuda();
#endif
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case Head::kUninitialized:
      if (arena_) {
        cpu_ptr_ = arena_->HostBase() + offset_;
      } else {
        cpu_ptr_ = AllocateHost(size_);
        own_cpu_data_ = true;
      }
      std::memset(cpu_ptr_, 0, size_);
      head_ = Head::kAtCpu;
      break;
    case Head::kAtGpu:
#ifdef CREMA_WITH_CUDA
      if (cpu_ptr_ == nullptr && arena_) {
        cpu_ptr_ = arena_->HostBase() + offset_;
      } else if (cpu_ptr_ == nullptr) {
        cpu_ptr_ = AllocateHost(size_);
        own_cpu_data_ = true;
      }
      // The copy waits for the kernels queued before it on the stream; the host then waits.
      gpu::Check(cudaMemcpyAsync(cpu_ptr_, gpu_ptr_, size_, cudaMemcpyDeviceToHost, gpu::Stream()),
                 "cudaMemcpyAsync (device to host)");
      gpu::Synchronize();
      head_ = Head::kSynced;
#else
      NoCuda();
#endif
      break;
    case Head::kAtCpu:
    case Head::kSynced:
      break;
  }
  if (zero_pending_) {
    std::memset(cpu_ptr_, 0, size_);
    zero_pending_ = false;
  }
}

void SyncedMemory::ZeroLazily() {
#ifdef CREMA_WITH_CUDA
  if (head_ == Head::kAtGpu || head_ == Head::kSynced) {  // in use on the device: zeroed there
    gpu::Check(cudaMemsetAsync(gpu_ptr_, 0, size_, gpu::Stream()), "cudaMemsetAsync");
    head_ = Head::kAtGpu;
    MarkWritten();
    return;
  }
#endif
  if (head_ == Head::kUninitialized) return;  // zeros on first access anyway
  zero_pending_ = true;
  head_ = Head::kAtCpu;
  MarkWritten();
}

void* SyncedMemory::mutable_cpu_data_to_add(bool* zero) {
  *zero = zero_pending_;
  zero_pending_ = false;
  if (*zero) {  // (allocated: ZeroLazily saw the host copy in use)
    MarkWritten();
    return cpu_ptr_;
  }
  *zero = head_ == Head::kUninitialized;
  if (*zero) {
    // Zeros the caller overwrites: allocate without the memset.
    if (arena_) {
      cpu_ptr_ = arena_->HostBase() + offset_;
    } else {
      cpu_ptr_ = AllocateHost(size_);
      own_cpu_data_ = true;
    }
    head_ = Head::kAtCpu;
    MarkWritten();
    return cpu_ptr_;
  }
  return mutable_cpu_data();
}

void SyncedMemory::PushToDevice() {
  if (head_ == Head::kAtCpu && gpu_ptr_ != nullptr) ToGpu();
}

void SyncedMemory::DeviceWritten() {
  if (head_ == Head::kSynced) head_ = Head::kAtGpu;
  MarkWritten();
}

void SyncedMemory::ToGpu() {
#ifdef CREMA_WITH_CUDA
  if (zero_pending_) ToCpu();  // the zeros are copied like any host value
  switch (head_) {
    case Head::kUninitialized:
      if (arena_) {
        gpu_ptr_ = arena_->DeviceBase() + offset_;
      } else {
        gpu::Check(cudaGetDevice(&gpu_device_), "cudaGetDevice");
        gpu_ptr_ = gpu::DeviceAlloc(size_);
        own_gpu_data_ = true;
      }
      gpu::Check(cudaMemsetAsync(gpu_ptr_, 0, size_, gpu::Stream()), "cudaMemsetAsync");
      head_ = Head::kAtGpu;
      break;
    case Head::kAtCpu:
      if (gpu_ptr_ == nullptr && arena_) {
        gpu_ptr_ = arena_->DeviceBase() + offset_;
      } else if (gpu_ptr_ == nullptr) {
        gpu::Check(cudaGetDevice(&gpu_device_), "cudaGetDevice");
        gpu_ptr_ = gpu::DeviceAlloc(size_);
        own_gpu_data_ = true;
      }
      // From pageable memory the call returns once the source was read, so the host may
      // write its buffer again right away.
      gpu::Check(cudaMemcpyAsync(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice, gpu::Stream()),
                 "cudaMemcpyAsync (host to device)");
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
  MarkWritten();
  return cpu_ptr_;
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  head_ = Head::kAtGpu;
  MarkWritten();
  return gpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CREMA_ASSERT(data != nullptr);
  if (own_cpu_data_) std::free(cpu_ptr_);
  cpu_ptr_ = data;
  own_cpu_data_ = false;
  zero_pending_ = false;
  head_ = Head::kAtCpu;
  MarkWritten();
}

}  // namespace crema
