// cuBLAS is loaded on first use (core/cuda_context.hpp: gpu::Cublas), not linked: a CPU run does
// not map cuBLAS/cuBLASLt (~210 MB resident).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#ifdef CREMA_WITH_CUDA
#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#endif

namespace crema {
namespace {

// Whether a file whose name contains `name` is mapped into this process.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(name) != std::string::npos) return true;
  return false;
}

#ifdef CREMA_WITH_CUDA
TEST(CublasLoader, NotMappedUntilUsedThenEveryFunctionResolves) {
  EXPECT_FALSE(Mapped("libcublas")) << "cuBLAS is mapped before any GPU use";
  const gpu::CublasApi* api = nullptr;
  try {
    api = &gpu::Cublas();
  } catch (const RuntimeError& e) {
    GTEST_SKIP() << "no cuBLAS on this machine: " << e.what();
  }
  EXPECT_TRUE(Mapped("libcublas.so"));
  for (const void* function :
       {reinterpret_cast<const void*>(api->Create), reinterpret_cast<const void*>(api->SetStream),
        reinterpret_cast<const void*>(api->SetMathMode),
        reinterpret_cast<const void*>(api->GetStatusName),
        reinterpret_cast<const void*>(api->Sgemm), reinterpret_cast<const void*>(api->Dgemm),
        reinterpret_cast<const void*>(api->SgemmStridedBatched),
        reinterpret_cast<const void*>(api->DgemmStridedBatched),
        reinterpret_cast<const void*>(api->Sgemv), reinterpret_cast<const void*>(api->Dgemv),
        reinterpret_cast<const void*>(api->Saxpy_64), reinterpret_cast<const void*>(api->Daxpy_64),
        reinterpret_cast<const void*>(api->Sscal_64), reinterpret_cast<const void*>(api->Dscal_64),
        reinterpret_cast<const void*>(api->Sdot_64), reinterpret_cast<const void*>(api->Ddot_64),
        reinterpret_cast<const void*>(api->Sasum_64), reinterpret_cast<const void*>(api->Dasum_64)})
    EXPECT_NE(function, nullptr);
  // A call that needs no device.
  EXPECT_EQ(std::string(api->GetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)),
            "CUBLAS_STATUS_NOT_INITIALIZED");
}
#else
TEST(CublasLoader, CpuOnlyBuildMapsNoCublas) { EXPECT_FALSE(Mapped("libcublas")); }
#endif

}  // namespace
}  // namespace crema
