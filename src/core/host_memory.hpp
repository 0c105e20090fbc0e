#pragma once
// Host memory for what the CPU kernels stream (Blob data, weights kept in a kernel's layout):
// 64-byte aligned; large buffers on 2 MB boundaries with transparent huge pages asked for.
#include <cstddef>
#include <cstdlib>
#include <memory>

namespace crema {

// Buffers this large get huge pages by default (a Blob's data and diff, the activation arenas).
inline constexpr size_t kHugePagesFrom = size_t{8} << 20;
// Weights a kernel keeps in its own layout and reads again in every pass get them from 2 MB up
// (one whole huge page): ResNet-50 passes at batch 1 ran 1.3-2.5% faster on a 2-core Xeon; 4 KB
// pages cost a page walk every 64 cache lines the kernels' prefetches ask for.
inline constexpr size_t kWeightHugePagesFrom = size_t{2} << 20;

// `bytes` (at least 1) of uninitialized host memory, 64-byte aligned; from `huge_from` bytes (and
// at least 2 MB) up, 2 MB aligned with its whole 2 MB pages advised MADV_HUGEPAGE (advice only:
// without transparent huge pages nothing changes; the tail stays on 4 KB pages). Throws on
// exhaustion; give it back with std::free (HostFree).
void* AllocateHost(size_t bytes, size_t huge_from = kHugePagesFrom);

struct HostFree {
  void operator()(void* p) const { std::free(p); }
};
// floats from AllocateHost.
using HostFloats = std::unique_ptr<float[], HostFree>;

}  // namespace crema
