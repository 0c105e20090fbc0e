#pragma once
// Outputs that appear whole or not at all: a verb writes its DBs and files into a hidden
// temporary folder beside their final place and moves them into place only when everything
// succeeded. If the verb fails (or throws) the temporary folder is deleted, so nothing
// half-written is left under a final name.
#include <string>
#include <vector>

namespace crema::cli {

class StagingDir {
 public:
  // `folder` is created when missing. Each of `names` is an entry of `folder` to be written;
  // one that exists already is a RuntimeError naming it (nothing is overwritten).
  StagingDir(const std::string& folder, const std::vector<std::string>& names);
  ~StagingDir();  // deletes the temporary folder and whatever is left in it
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  // Where to write entry `name` for now.
  std::string Path(const std::string& name) const { return temp_ + "/" + name; }
  // Where entry `name` will be.
  std::string FinalPath(const std::string& name) const { return folder_ + "/" + name; }
  // Renames every entry into `folder`; RuntimeError (having removed the entries already moved)
  // when a rename fails.
  void Commit();

 private:
  std::string folder_;
  std::vector<std::string> names_;
  std::string temp_;
};

}  // namespace crema::cli
