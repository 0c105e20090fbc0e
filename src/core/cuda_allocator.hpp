#pragma once
// The caching device allocator: blocks freed by crema go to a per-device cache and are handed out
// again, so a steady-state iteration never calls cudaMalloc or cudaFree. All crema work on a
// device runs on its one stream, so a block freed by the host may be reused by later work at once
// (stream order keeps earlier kernels that read it ahead of later ones that write it).
#include <cstddef>
#include <cstdint>

namespace crema::gpu {

// A block of at least `bytes` on the current device; RuntimeError when the device is out of
// memory even after the cache was returned to CUDA.
void* DeviceAlloc(size_t bytes);
// Returns a block from DeviceAlloc to its device's cache.
void DeviceFree(void* ptr);
// Returns every cached (unused) block to CUDA.
void EmptyCache();

struct MemoryStats {
  size_t in_use = 0;        // bytes in blocks handed out
  size_t peak_in_use = 0;   // maximum of in_use since start or ResetPeak
  size_t cached = 0;        // bytes held in the cache, free
  int64_t cuda_mallocs = 0; // cudaMalloc calls so far
};
MemoryStats GetMemoryStats(int device);
void ResetPeak(int device);

}  // namespace crema::gpu
