#include "solvers/distributed.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "crema/blob.hpp"
#include "crema/error.hpp"

#ifdef CREMA_WITH_MPI
// The C API only (Open MPI's and MPICH's deprecated C++ bindings warn).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace crema::dist {
namespace {

int rank_ = 0;
int world_ = 1;
[[maybe_unused]] bool joined_ = false;

#ifdef CREMA_WITH_MPI
// Whether an MPI launcher started this process (Open MPI, PMIx, MPICH/Hydra, Slurm's PMI).
bool LaunchedByMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

void Check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  AbortJob(StrCat(what, " failed: ", std::string(text, length)));
}

// In-place sum over the ranks of `count` elements of `buffer`, then the scale 1 / world.
template <typename T>
void AllreduceMean(T* buffer, int64_t count) {
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  const T scale = T(1) / static_cast<T>(world_);
  for (int64_t done = 0; done < count;) {
    const int chunk = static_cast<int>(std::min<int64_t>(count - done, 1 << 30));
    Check(MPI_Allreduce(MPI_IN_PLACE, buffer + done, chunk, type, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce of the gradients");
    done += chunk;
  }
  for (int64_t i = 0; i < count; ++i) buffer[i] *= scale;
}

// Averages the diffs of `blobs` (all of type T) through buckets of about `bucket_bytes`.
template <typename T>
void AverageTyped(const std::vector<Blob*>& blobs, size_t bucket_bytes) {
  const int64_t capacity = std::max<int64_t>(1, static_cast<int64_t>(bucket_bytes / sizeof(T)));
  std::vector<T> bucket;
  std::vector<Blob*> members;
  auto flush = [&] {
    if (bucket.empty()) return;
    AllreduceMean(bucket.data(), static_cast<int64_t>(bucket.size()));
    size_t offset = 0;
    for (Blob* blob : members) {
      std::memcpy(blob->mutable_cpu_diff<T>(), bucket.data() + offset, blob->count() * sizeof(T));
      offset += blob->count();
    }
    bucket.clear();
    members.clear();
  };
  for (Blob* blob : blobs) {
    if (blob->count() == 0) continue;
    if (blob->count() >= capacity) {  // a big blob is its own bucket, reduced in place
      flush();
      AllreduceMean(blob->mutable_cpu_diff<T>(), blob->count());
      continue;
    }
    if (static_cast<int64_t>(bucket.size()) + blob->count() > capacity) flush();
    const T* diff = blob->cpu_diff<T>();
    bucket.insert(bucket.end(), diff, diff + blob->count());
    members.push_back(blob);
  }
  flush();
}
#endif

}  // namespace

void Init() {
#ifdef CREMA_WITH_MPI
  if (joined_ || !LaunchedByMpi()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS)
    CREMA_THROW_RUNTIME("MPI_Init failed (started by an MPI launcher, but cannot join its job)");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  joined_ = true;
#endif
}

void Finalize() {
#ifdef CREMA_WITH_MPI
  if (!joined_) return;
  MPI_Finalize();
  joined_ = false;
  rank_ = 0;
  world_ = 1;
#endif
}

int Rank() { return rank_; }
int WorldSize() { return world_; }

void AverageDiffs(const std::vector<Blob*>& blobs, size_t bucket_bytes) {
  if (world_ <= 1) return;
#ifdef CREMA_WITH_MPI
  std::vector<Blob*> floats, doubles;
  for (Blob* blob : blobs) {
    if (blob->dtype() == DataType::kFloat32)
      floats.push_back(blob);
    else if (blob->dtype() == DataType::kFloat64)
      doubles.push_back(blob);
    else
      CREMA_THROW_CONFIG(
          "multi-process training averages float and double parameters only, "
          "not ",
          DataTypeName(blob->dtype()));
  }
  AverageTyped<float>(floats, bucket_bytes);
  AverageTyped<double>(doubles, bucket_bytes);
#endif
}

void BroadcastData(const std::vector<Blob*>& blobs) {
  if (world_ <= 1) return;
#ifdef CREMA_WITH_MPI
  for (Blob* blob : blobs) {
    if (blob->count() == 0) continue;
    void* data = nullptr;
    MPI_Datatype type = MPI_BYTE;
    int64_t bytes = blob->count() * static_cast<int64_t>(SizeOf(blob->dtype()));
    if (blob->dtype() == DataType::kFloat32)
      data = blob->mutable_cpu_data<float>();
    else if (blob->dtype() == DataType::kFloat64)
      data = blob->mutable_cpu_data<double>();
    else
      CREMA_THROW_CONFIG(
          "multi-process training broadcasts float and double parameters only, "
          "not ",
          DataTypeName(blob->dtype()));
    for (int64_t done = 0; done < bytes;) {
      const int chunk = static_cast<int>(std::min<int64_t>(bytes - done, 1 << 30));
      Check(MPI_Bcast(static_cast<char*>(data) + done, chunk, type, 0, MPI_COMM_WORLD),
            "MPI_Bcast of the weights");
      done += chunk;
    }
  }
#endif
}

void Broadcast(std::vector<double>* values) {
  if (world_ <= 1) return;
#ifdef CREMA_WITH_MPI
  Check(MPI_Bcast(values->data(), static_cast<int>(values->size()), MPI_DOUBLE, 0, MPI_COMM_WORLD),
        "MPI_Bcast of rank 0's decisions");
#endif
}

double Mean(double value) {
  if (world_ <= 1) return value;
#ifdef CREMA_WITH_MPI
  double sum = 0;
  Check(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce of the loss");
  return sum / world_;
#else
  return value;
#endif
}

void AbortJob(const std::string& message) {
  if (world_ <= 1) return;
#ifdef CREMA_WITH_MPI
  LOG(ERROR) << "rank " << rank_ << " of " << world_ << " failed: " << message
             << "; aborting all ranks (MPI_Abort)";
  google::FlushLogFiles(google::GLOG_INFO);
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
#endif
}

}  // namespace crema::dist
