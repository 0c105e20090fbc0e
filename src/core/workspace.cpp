#include "core/workspace.hpp"

namespace crema {

void Workspace::Grow(size_t bytes) {
  if (memory_ && memory_->size() >= bytes) return;
  memory_.reset();  // free the old buffer first: the peak is the new size, not the sum
  memory_ = std::make_unique<SyncedMemory>(bytes);
}

void* Workspace::Cpu(size_t bytes) {
  if (bytes == 0) return nullptr;
  Grow(bytes);
  return memory_->mutable_cpu_data();
}

void* Workspace::Gpu(size_t bytes) {
  if (bytes == 0) return nullptr;
  Grow(bytes);
  return memory_->mutable_gpu_data();
}

}  // namespace crema
