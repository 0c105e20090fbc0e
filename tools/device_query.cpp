// crema device_query: describes the CUDA devices (Caffe's `caffe device_query`).
#include <algorithm>
#include <cctype>
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
  const int count = CudaDeviceCount();
  if (count == 0)
    CREMA_THROW_RUNTIME(
        "device_query: no CUDA device is visible (crema built without CUDA, no "
        "driver, or CUDA_VISIBLE_DEVICES hides them)");
  std::vector<int> ids;
  if (FLAGS_gpu.empty() || FLAGS_gpu == "all") {
    for (int i = 0; i < count; ++i) ids.push_back(i);
  } else {
    for (const std::string& id : SplitList(FLAGS_gpu)) {
      if (!std::all_of(id.begin(), id.end(), ::isdigit))
        CREMA_THROW_CONFIG("--gpu: expected device ids or 'all', got \"", FLAGS_gpu, "\"");
      ids.push_back(std::stoi(id));
    }
  }
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
