#include "core/cuda_allocator.hpp"

#include <map>
#include <mutex>
#include <unordered_map>

#include "crema/error.hpp"

#ifdef CREMA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace crema::gpu {
namespace {

// Small requests are rounded to 512 bytes, large ones to 2 MiB, so that blocks of similar sizes
// are interchangeable; a cached block is reused for a request of at least half its size. (Only
// a CUDA build allocates.)
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;
constexpr size_t kSmallLimit = size_t{1} << 20;

[[maybe_unused]] size_t RoundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + unit - 1) / unit * unit;
}

struct Block {
  size_t size;
  int device;
};

struct DevicePool {
  std::multimap<size_t, void*> free_blocks;
  MemoryStats stats;
  bool capturing = false;
  std::vector<void*> held;  // freed during a capture, kept for the graph
  uint64_t free_generation = 0;
};

struct Allocator {
  std::mutex mutex;
  std::map<int, DevicePool> pools;
  std::unordered_map<void*, Block> blocks;  // every block handed out
};

// Never destroyed: device memory may be freed by other statics during exit.
Allocator& Instance() {
  static auto* allocator = new Allocator();
  return *allocator;
}

#ifdef CREMA_WITH_CUDA
void ReleaseCached(DevicePool* pool, int device) {
  int current = 0;
  cudaGetDevice(&current);
  if (current != device) cudaSetDevice(device);
  for (auto& entry : pool->free_blocks) cudaFree(entry.second);
  if (current != device) cudaSetDevice(current);
  pool->free_blocks.clear();
  pool->stats.cached = 0;
}
#endif

}  // namespace

void* DeviceAlloc(size_t bytes) {
#ifdef CREMA_WITH_CUDA
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME("cudaGetDevice failed: ", cudaGetErrorString(status));
  const size_t size = RoundSize(bytes);
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  DevicePool& pool = a.pools[device];
  void* ptr = nullptr;
  size_t got = size;
  auto it = pool.free_blocks.lower_bound(size);
  if (it != pool.free_blocks.end() && it->first <= 2 * size) {
    got = it->first;
    ptr = it->second;
    pool.free_blocks.erase(it);
    pool.stats.cached -= got;
  } else {
    status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ReleaseCached(&pool, device);
      status = cudaMalloc(&ptr, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      CREMA_THROW_RUNTIME("out of GPU memory on cuda:", device, " allocating ", bytes,
                          " bytes (crema holds ", pool.stats.in_use,
                          " bytes in use): use a smaller batch_size, or --amp to store "
                          "activations in half precision");
    }
    ++pool.stats.cuda_mallocs;
  }
  a.blocks[ptr] = Block{got, device};
  pool.stats.in_use += got;
  if (pool.stats.in_use > pool.stats.peak_in_use) pool.stats.peak_in_use = pool.stats.in_use;
  return ptr;
#else
  CREMA_THROW_RUNTIME("this crema was built without CUDA");
#endif
}

void DeviceFree(void* ptr) {
  if (ptr == nullptr) return;
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.blocks.find(ptr);
  CREMA_ASSERT(it != a.blocks.end(), "DeviceFree of a pointer not from DeviceAlloc");
  DevicePool& pool = a.pools[it->second.device];
  if (pool.capturing) {
    pool.held.push_back(ptr);
    return;
  }
  ++pool.free_generation;
  pool.stats.in_use -= it->second.size;
  pool.stats.cached += it->second.size;
  pool.free_blocks.emplace(it->second.size, ptr);
  a.blocks.erase(it);
}

void EmptyCache() {
#ifdef CREMA_WITH_CUDA
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  for (auto& entry : a.pools) ReleaseCached(&entry.second, entry.first);
#endif
}

namespace {

DevicePool& CurrentPool(Allocator& a) {
  int device = 0;
#ifdef CREMA_WITH_CUDA
  cudaGetDevice(&device);
#endif
  return a.pools[device];
}

}  // namespace

void BeginCapture() {
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  DevicePool& pool = CurrentPool(a);
  CREMA_ASSERT(!pool.capturing, "nested graph captures on one device");
  pool.capturing = true;
}

std::vector<void*> EndCapture() {
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  DevicePool& pool = CurrentPool(a);
  pool.capturing = false;
  std::vector<void*> held;
  held.swap(pool.held);
  return held;
}

uint64_t FreeGeneration(int device) {
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.pools[device].free_generation;
}

MemoryStats GetMemoryStats(int device) {
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.pools[device].stats;
}

void ResetPeak(int device) {
  Allocator& a = Instance();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.pools[device].stats.peak_in_use = a.pools[device].stats.in_use;
}

}  // namespace crema::gpu
