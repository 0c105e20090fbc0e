// crema device_query: describes the CUDA devices (Caffe's `caffe device_query`).
#include <cstdio>
#include <string>
#include <vector>

#include "crema/device.hpp"
#include "crema/error.hpp"
#include "flags.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

int RunDeviceQuery(const std::vector<std::string>& args) {
  // The flag is read before the devices are looked at: a malformed --gpu is a usage error (exit
  // 2) on any machine.
  std::vector<int> ids =
      FLAGS_gpu.empty() || FLAGS_gpu == "all" ? std::vector<int>{} : GpuIdsFromFlag();
  const int count = CudaDeviceCount();
  if (count == 0)
    CREMA_THROW_RUNTIME(
        "device_query: no CUDA device is visible (crema built without CUDA, no "
        "driver, or CUDA_VISIBLE_DEVICES hides them)");
  if (ids.empty())
    for (int i = 0; i < count; ++i) ids.push_back(i);
  for (int id : ids)
    if (id >= count)
      CREMA_THROW_RUNTIME("--gpu ", FLAGS_gpu, ": there is no CUDA device ", id, " (", count,
                          " visible)");
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf("%s%s", i ? "\n" : "", CudaDeviceInfo(ids[i]).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(device_query, "device_query", "describe the CUDA devices",
                    "crema device_query [--gpu ID[,ID] | --gpu all]\n\n"
                    "Prints name, compute capability, memory and limits of each device given by "
                    "--gpu (all visible devices when omitted). Exit code 1 when no CUDA device "
                    "is visible.",
                    {"gpu"}, &crema::cli::RunDeviceQuery);
