#include "support/reference.hpp"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace fs = std::filesystem;

namespace crema::testing {
namespace {

std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

void RemoveTempDirs() {
  for (const auto& d : TempDirs()) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}

}  // namespace

std::string ReferenceDirWanted() {
  const char* env = std::getenv("CREMA_REFERENCE_DIR");
  return env != nullptr ? env : std::string(CREMA_SOURCE_DIR) + "/../shared/reference";
}

bool ReferenceRequired() {
  const char* env = std::getenv("CREMA_REQUIRE_REFERENCE");
  return env != nullptr && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0;
}

std::string ReferenceDir() {
  const std::string dir = ReferenceDirWanted();
  std::error_code ec;
  return fs::is_directory(dir, ec) ? fs::canonical(dir, ec).string() : "";
}

std::string ReferencePath(const std::string& relative) {
  const std::string dir = ReferenceDir();
  if (dir.empty()) return "";
  const std::string path = dir + "/" + relative;
  std::error_code ec;
  return fs::exists(path, ec) ? path : "";
}

std::string TempDir() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(RemoveTempDirs); });
  std::string pattern = (fs::temp_directory_path() / "crema_test_XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  if (made == nullptr) return "";
  TempDirs().push_back(made);
  return made;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<float> ReadF32(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace crema::testing
