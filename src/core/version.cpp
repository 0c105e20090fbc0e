#include "crema/version.hpp"

#include <sstream>
#include <string>

// Generated at every build (cmake/git_commit.cmake); the other CREMA_* macros below come from
// cmake/version.cmake, for this file only.
#include "crema_git_commit.hpp"

#ifdef CREMA_WITH_CUDA
#include <cudnn_version.h>
#endif
#ifdef CREMA_WITH_NCCL
#include <nccl.h>
#endif
#ifdef CREMA_WITH_DNNL
#include <oneapi/dnnl/dnnl_version.h>
#endif

namespace crema {
namespace {

#ifdef CREMA_WITH_MPI
constexpr bool kWithMpi = true;
#else
constexpr bool kWithMpi = false;
#endif
#ifdef CREMA_WITH_OPENCV
constexpr bool kWithOpenCv = true;
#else
constexpr bool kWithOpenCv = false;
#endif
#ifdef CREMA_WITH_LEVELDB
constexpr bool kWithLevelDb = true;
#else
constexpr bool kWithLevelDb = false;
#endif

}  // namespace

const char* VersionString() { return CREMA_VERSION; }

const char* GitCommit() { return CREMA_GIT_COMMIT; }

const char* BuildInfo() {
  static const std::string info = [] {
    std::ostringstream out;
    out << "crema " << CREMA_VERSION << " (git " << CREMA_GIT_COMMIT << ")";
#ifdef CREMA_INFERENCE_ONLY
    out << ", inference-only build";
#endif
#if defined(__clang__)
    out << "\ncompiler: clang " << __clang_version__;
#elif defined(__GNUC__)
    out << "\ncompiler: g++ " << __VERSION__;
#endif
    out << ", C++17, " << CREMA_BUILD_TYPE;
#ifdef CREMA_WITH_CUDA
    out << "\nCUDA: yes, " << CREMA_CUDA_VERSION << " (architectures " << CREMA_CUDA_ARCHITECTURES
        << "; cuBLAS loaded at the first GPU use)";
    out << "\ncuDNN: yes, " << CUDNN_MAJOR << "." << CUDNN_MINOR << "." << CUDNN_PATCHLEVEL;
#else
    out << "\nCUDA: not built\ncuDNN: not built";
#endif
#ifdef CREMA_WITH_NCCL
    out << "\nNCCL: yes, " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH;
#else
    out << "\nNCCL: not built";
#endif
#ifdef CREMA_WITH_DNNL
    out << "\noneDNN: yes, " << DNNL_VERSION_MAJOR << "." << DNNL_VERSION_MINOR << "."
        << DNNL_VERSION_PATCH;
#else
    out << "\noneDNN: not built";
#endif
    const auto yes_no = [](bool found) { return found ? "yes" : "not built"; };
    out << "\nMPI: " << yes_no(kWithMpi) << "\nOpenCV: " << yes_no(kWithOpenCv)
        << "\nLevelDB: " << yes_no(kWithLevelDb) << "\nBLAS: OpenBLAS";
    return out.str();
  }();
  return info.c_str();
}

}  // namespace crema
