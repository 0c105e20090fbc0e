#include "staging.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "crema/error.hpp"

namespace crema::cli {

namespace fs = std::filesystem;

StagingDir::StagingDir(const std::string& folder, const std::vector<std::string>& names)
    : folder_(folder.empty() ? "." : folder), names_(names) {
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec) CREMA_THROW_RUNTIME("cannot create the folder '", folder_, "': ", ec.message());
  for (const std::string& name : names_)
    if (fs::exists(fs::symlink_status(FinalPath(name))))
      CREMA_THROW_RUNTIME("'", FinalPath(name),
                          "' exists already; remove it or choose another output folder");
  std::string pattern = folder_ + "/.crema-partial-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    CREMA_THROW_RUNTIME("cannot create a temporary folder in '", folder_,
                        "': ", std::strerror(errno));
  temp_ = pattern;
}

StagingDir::~StagingDir() {
  std::error_code ec;
  fs::remove_all(temp_, ec);  // best effort; nothing to report from a destructor
}

void StagingDir::Commit() {
  for (size_t i = 0; i < names_.size(); ++i) {
    std::error_code ec;
    fs::rename(Path(names_[i]), FinalPath(names_[i]), ec);
    if (ec) {
      const std::string why = ec.message();
      for (size_t j = 0; j < i; ++j) fs::remove_all(FinalPath(names_[j]), ec);
      CREMA_THROW_RUNTIME("cannot move '", Path(names_[i]), "' to '", FinalPath(names_[i]),
                          "': ", why);
    }
  }
}

}  // namespace crema::cli
