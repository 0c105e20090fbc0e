#include "core/host_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace crema {
namespace {

uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The VmFlags of the mapping holding `p` in /proc/self/smaps ("" where not found).
std::string VmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= Address(p) && Address(p) < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(AllocateHost, SmallBuffersAre64ByteAlignedAndUsable) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}, size_t{1000001}}) {
    HostFloats floats(static_cast<float*>(AllocateHost(bytes)));
    ASSERT_NE(floats.get(), nullptr) << bytes;
    EXPECT_EQ(Address(floats.get()) % 64, 0u) << bytes;
    std::memset(floats.get(), 0x5a, bytes);
  }
}

TEST(AllocateHost, FromTheThresholdOnWhole2MbPages) {
  constexpr size_t kMb = size_t{1} << 20;
  for (size_t bytes : {2 * kMb, 3 * kMb + 5, kHugePagesFrom}) {
    HostFloats floats(static_cast<float*>(AllocateHost(bytes, kWeightHugePagesFrom)));
    EXPECT_EQ(Address(floats.get()) % (2 * kMb), 0u) << bytes;
    std::memset(floats.get(), 1, bytes);
  }
  // Below the thresholds (and below one 2 MB page): 64-byte alignment is all that is promised.
  for (const auto& [bytes, from] : {std::pair{2 * kMb, kHugePagesFrom}, std::pair{kMb, kMb}}) {
    HostFloats floats(static_cast<float*>(AllocateHost(bytes, from)));
    EXPECT_EQ(Address(floats.get()) % 64, 0u);
  }
}

TEST(AllocateHost, AdvisesHugePagesWhereTheKernelHasThem) {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  if (modes.find("[never]") != std::string::npos || modes.empty())
    GTEST_SKIP() << "no transparent huge pages here";
  constexpr size_t kBytes = size_t{3} << 20;
  HostFloats floats(static_cast<float*>(AllocateHost(kBytes, kWeightHugePagesFrom)));
  std::memset(floats.get(), 0, kBytes);
  const std::string flags = VmFlagsAt(floats.get());
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the buffer";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  // The last megabyte is no whole 2 MB page: not advised (a huge page there would hold a
  // megabyte the buffer never uses).
  const std::string tail =
      VmFlagsAt(reinterpret_cast<const char*>(floats.get()) + (size_t{2} << 20));
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.find(" hg"), std::string::npos) << tail;
}

}  // namespace
}  // namespace crema
