#include "crema/device.hpp"

#include "crema/error.hpp"

#ifdef CREMA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace crema {

int CudaDeviceCount() {
#ifdef CREMA_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device/driver" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

bool CudaAvailable() { return CudaDeviceCount() > 0; }

void SetCudaDevice(int id) {
#ifdef CREMA_WITH_CUDA
  const int count = CudaDeviceCount();
  if (id < 0 || id >= count)
    CREMA_THROW_RUNTIME("GPU ", id, " requested but ", count, " CUDA device",
                        count == 1 ? " is" : "s are", " visible");
  cudaError_t status = cudaSetDevice(id);
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME("cudaSetDevice(", id, ") failed: ", cudaGetErrorString(status));
#else
  CREMA_THROW_RUNTIME("GPU ", id, " requested but this crema was built without CUDA");
#endif
}

std::string CudaDeviceInfo(int id) {
#ifdef CREMA_WITH_CUDA
  const int count = CudaDeviceCount();
  if (id < 0 || id >= count)
    CREMA_THROW_RUNTIME("GPU ", id, " requested but ", count, " CUDA device",
                        count == 1 ? " is" : "s are", " visible");
  cudaDeviceProp prop;
  cudaError_t status = cudaGetDeviceProperties(&prop, id);
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME("cudaGetDeviceProperties(", id, ") failed: ", cudaGetErrorString(status));
  return StrCat("Device id:                     ", id, "\n",
                "Name:                          ", prop.name, "\n",
                "Compute capability:            ", prop.major, ".", prop.minor, "\n",
                "Total global memory:           ", prop.totalGlobalMem, "\n",
                "Shared memory per block:       ", prop.sharedMemPerBlock, "\n",
                "Registers per block:           ", prop.regsPerBlock, "\n",
                "Warp size:                     ", prop.warpSize, "\n",
                "Max threads per block:         ", prop.maxThreadsPerBlock, "\n",
                "Number of multiprocessors:     ", prop.multiProcessorCount, "\n",
                "L2 cache size:                 ", prop.l2CacheSize, "\n");
#else
  CREMA_THROW_RUNTIME("device_query: this crema was built without CUDA");
#endif
}

}  // namespace crema
