#pragma once
// Host memory for what the CPU kernels stream (Blob data, weights kept in a kernel's layout):
// 64-byte aligned; large buffers on 2 MB boundaries with transparent huge pages asked for.
#include <cstddef>
#include <cstdlib>
#include <memory>

namespace crema {

// Buffers this large get huge pages by default (a Blob's data and diff, the activation arenas):
// at most a quarter more memory where a size is rounded up to whole 2 MB pages.
inline constexpr size_t kHugePagesFrom = size_t{8} << 20;
// Weights a kernel keeps in its own layout and reads again in every pass get them from 1 MB up:
// 1 MB of a 1x1 convolution's weights streamed from memory at batch 1 ran 11% faster on huge
// pages (a 2-core Xeon; 4 KB pages: a page walk every 64 cache lines the prefetches ask for).
inline constexpr size_t kWeightHugePagesFrom = size_t{1} << 20;

// `bytes` (at least 1) of uninitialized host memory, 64-byte aligned; from `huge_from` bytes up,
// rounded up to whole 2 MB pages and advised MADV_HUGEPAGE (advice only: without transparent
// huge pages nothing changes). Throws on exhaustion; give it back with std::free (HostFree).
void* AllocateHost(size_t bytes, size_t huge_from = kHugePagesFrom);

struct HostFree {
  void operator()(void* p) const { std::free(p); }
};
// floats from AllocateHost.
using HostFloats = std::unique_ptr<float[], HostFree>;

}  // namespace crema
