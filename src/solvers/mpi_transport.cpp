// The MPI transport (allreduce.hpp): the job started by mpirun or srun.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "crema/error.hpp"
#include "solvers/allreduce.hpp"

#ifdef CREMA_WITH_MPI
// The C API only (Open MPI's and MPICH's deprecated C++ bindings warn).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace crema::dist {

bool LaunchedByMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

#ifdef CREMA_WITH_MPI
namespace {

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    // Serialized: the gradient buckets may be reduced on the communication thread while the
    // net's thread runs backward; the two never call MPI at the same time.
    if (!initialized &&
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      CREMA_THROW_RUNTIME("MPI_Init failed (started by an MPI launcher, but cannot join its job)");
    if (!initialized && provided < MPI_THREAD_SERIALIZED)
      CREMA_THROW_RUNTIME("this MPI library does not provide MPI_THREAD_SERIALIZED");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    local_rank_ = -1;
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char* value = std::getenv(name); value && local_rank_ < 0)
        local_rank_ = std::atoi(value);
    if (local_rank_ < 0) {  // the rank among the processes that share this node's memory
      MPI_Comm node;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
      MPI_Comm_rank(node, &local_rank_);
      MPI_Comm_free(&node);
    }
  }
  ~MpiTransport() override { MPI_Finalize(); }

  const char* name() const override { return "MPI"; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }

  void Broadcast(void* data, size_t bytes) override {
    for (size_t done = 0; done < bytes;) {
      const int chunk = static_cast<int>(std::min<size_t>(bytes - done, 1u << 30));
      Check(MPI_Bcast(static_cast<char*>(data) + done, chunk, MPI_BYTE, 0, MPI_COMM_WORLD),
            "MPI_Bcast");
      done += chunk;
    }
  }
  void SumFloats(float* data, int64_t count) override { Sum(data, count, MPI_FLOAT); }
  void SumDoubles(double* data, int64_t count) override { Sum(data, count, MPI_DOUBLE); }

  [[noreturn]] void Abort(const std::string& message) override {
    LOG(ERROR) << "rank " << rank_ << " of " << world_ << " failed: " << message
               << "; aborting all ranks (MPI_Abort)";
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

 private:
  void Check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    CREMA_THROW_RUNTIME(what, " failed: ", std::string(text, length));
  }
  template <typename T>
  void Sum(T* data, int64_t count, MPI_Datatype type) {
    for (int64_t done = 0; done < count;) {
      const int chunk = static_cast<int>(std::min<int64_t>(count - done, 1 << 30));
      Check(MPI_Allreduce(MPI_IN_PLACE, data + done, chunk, type, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      done += chunk;
    }
  }

  int rank_ = 0, world_ = 1, local_rank_ = 0;
};

}  // namespace

std::unique_ptr<Transport> JoinMpi() {
  if (!LaunchedByMpi()) return nullptr;
  return std::make_unique<MpiTransport>();
}
#else
std::unique_ptr<Transport> JoinMpi() { return nullptr; }
#endif

}  // namespace crema::dist
