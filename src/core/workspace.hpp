#pragma once
// Scratch memory that the layers of one net share: a layer borrows it inside its Forward or
// Backward (im2col columns, a GEMM's output before it is scattered) and leaves nothing in it for
// later, so one buffer sized to the largest request serves every layer (layers of a net run one
// at a time). As cuDNN's and Caffe2's workspaces. A layer outside a net has one of its own.
#include <cstddef>
#include <memory>

#include "crema/blob.hpp"

namespace crema {

class Workspace {
 public:
  // At least `bytes` of host (device) memory, 64-byte aligned, valid until the next request;
  // its contents are undefined. Grows, never shrinks.
  void* Cpu(size_t bytes);
  void* Gpu(size_t bytes);
  template <typename T>
  T* Cpu(int64_t count) {
    return static_cast<T*>(Cpu(static_cast<size_t>(count) * sizeof(T)));
  }
  template <typename T>
  T* Gpu(int64_t count) {
    return static_cast<T*>(Gpu(static_cast<size_t>(count) * sizeof(T)));
  }
  // Bytes held now.
  size_t bytes() const { return memory_ ? memory_->size() : 0; }

 private:
  void Grow(size_t bytes);
  std::unique_ptr<SyncedMemory> memory_;
};

}  // namespace crema
