#pragma once
// Where a net runs: the CPU or one CUDA device. There is no global mode: a Net is built for a
// Device and hands it to its layers at set-up.
#include <string>

namespace crema {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int id = 0;

  static Device Cpu() { return Device{}; }
  static Device Cuda(int id) { return Device{Kind::kCuda, id}; }
  bool is_cpu() const { return kind == Kind::kCpu; }
  bool is_cuda() const { return kind == Kind::kCuda; }
  std::string ToString() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(id); }
};

// True when crema was built with CUDA and at least one device is visible.
bool CudaAvailable();
int CudaDeviceCount();
// Makes `id` the current CUDA device of the calling thread; RuntimeError when impossible.
void SetCudaDevice(int id);
// A human-readable description of a CUDA device (crema device_query).
std::string CudaDeviceInfo(int id);

}  // namespace crema
