#pragma once
// The caching device allocator: blocks freed by crema go to a per-device cache and are handed out
// again, so a steady-state iteration never calls cudaMalloc or cudaFree. All crema work on a
// device runs on its one stream, so a block freed by the host may be reused by later work at once
// (stream order keeps earlier kernels that read it ahead of later ones that write it).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace crema::gpu {

// A block of at least `bytes` on the current device; RuntimeError when the device is out of
// memory even after the cache was returned to CUDA.
void* DeviceAlloc(size_t bytes);
// Returns a block from DeviceAlloc to its device's cache.
void DeviceFree(void* ptr);
// Returns every cached (unused) block to CUDA.
void EmptyCache();

struct MemoryStats {
  size_t in_use = 0;         // bytes in blocks handed out
  size_t peak_in_use = 0;    // maximum of in_use since start or ResetPeak
  size_t cached = 0;         // bytes held in the cache, free
  int64_t cuda_mallocs = 0;  // cudaMalloc calls so far
};
MemoryStats GetMemoryStats(int device);
void ResetPeak(int device);

// CUDA graph capture (net/iteration_graph.hpp) on the current device. A captured graph keeps the
// addresses it was recorded with, so a block freed while the capture runs must not be handed to
// anyone else while the graph lives: BeginCapture holds such blocks back, EndCapture returns them
// (still in use) for the graph to DeviceFree when it is destroyed.
void BeginCapture();
std::vector<void*> EndCapture();
// Counts the blocks freed on `device` outside a capture: when it moved since a graph was
// captured, a block the graph uses may belong to someone else now, and the graph is stale.
uint64_t FreeGeneration(int device);

}  // namespace crema::gpu
