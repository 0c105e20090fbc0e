#pragma once
// Errors. User input (files, flags, parameters, data) -> ConfigError (exit 2) or RuntimeError
// (environment: missing files, DBs, memory; exit 1). Bugs -> CREMA_ASSERT, which aborts.
// The library never exits; the CLI prints the message on one line.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace crema {

template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad prototxt, flag, parameter or weights file: the user can fix it.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The environment failed: a missing file or DB, out of memory, no GPU, corrupt data.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void AssertFailed(const char* file, int line, const char* condition,
                               const std::string& message);

}  // namespace crema

#define CREMA_ASSERT(cond, ...)                                              \
  do {                                                                       \
    if (!(cond))                                                             \
      ::crema::AssertFailed(__FILE__, __LINE__, #cond,                       \
                            ::crema::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#define CREMA_THROW_CONFIG(...) throw ::crema::ConfigError(::crema::StrCat(__VA_ARGS__))
#define CREMA_THROW_RUNTIME(...) throw ::crema::RuntimeError(::crema::StrCat(__VA_ARGS__))
