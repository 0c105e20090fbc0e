#include "crema/version.hpp"

namespace crema {

const char* VersionString() { return "0.1.0"; }

const char* BuildInfo() {
  return "crema 0.1.0, C++17, "
#if defined(__clang__)
         "clang " __clang_version__
#elif defined(__GNUC__)
         "g++ " __VERSION__
#endif
         ", OpenBLAS"
#ifdef CREMA_WITH_CUDA
         ", CUDA"
#else
         ", no CUDA"
#endif
#ifdef CREMA_WITH_OPENCV
         ", OpenCV"
#endif
      ;
}

}  // namespace crema
