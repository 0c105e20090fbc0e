#include "crema/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace crema {

void AssertFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "crema: internal error at %s:%d: %s%s%s\nPlease report this bug.\n", file,
               line, condition, message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace crema
