#pragma once
// Data-parallel training across processes: one replica of the net per rank; gradients averaged
// before every update; rank 0's weights and decisions (stop, learning-rate scale) broadcast to
// the others. The process group is an MPI job (`mpirun -np N crema train`, srun; built when CMake
// finds MPI: CREMA_MPI=AUTO|ON|OFF, defines CREMA_WITH_MPI) or, without an MPI launcher, a TCP
// group formed from torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT). Gradients on a GPU go through NCCL when built with it (CREMA_WITH_NCCL). Without
// either, the world is one rank and every call below is a no-op. Transports: allreduce.hpp.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crema/device.hpp"

namespace crema {

class Blob;
class Net;

namespace dist {

class AllReduce;

// Joins the MPI job when the process was started by an MPI launcher (mpirun, srun: detected by
// their environment variables), else the TCP group when RANK and WORLD_SIZE are set; otherwise
// stays a world of one rank. Idempotent.
void Init();
// Whether a launcher made this process a rank, whether or not Init has run: an MPI launcher's
// variables, or torchrun-style RANK / WORLD_SIZE.
bool StartedAsRank();
// Leaves the group (after a normal end); no-op when Init did not join one.
void Finalize();
int Rank();       // 0 alone
int WorldSize();  // 1 alone
// The rank among the processes of this node (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, ...).
int LocalRank();
// "MPI", "TCP" or "none".
const char* TransportName();
inline bool IsRoot() { return Rank() == 0; }
inline bool Active() { return WorldSize() > 1; }

// Overwrites each blob's data with rank 0's.
void BroadcastData(const std::vector<Blob*>& blobs);
// Rank 0's values of `values` on every rank.
void Broadcast(std::vector<double>* values);
// The mean over the ranks of `value`.
double Mean(double value);
// Ends every rank of the job with `message` (MPI_Abort), so the others do not wait forever for
// a rank that failed; returns only when the world is one rank.
void AbortJob(const std::string& message);

// Averages the gradients of a net's learnable parameters over the ranks, in buckets of about
// `bucket_bytes`: the parameters in the order their gradients are complete in Backward (the last
// layer's first; a shared parameter when its first user is done), one data type per bucket.
// With `overlap`, a bucket is reduced as soon as backward has passed all of its layers, while
// backward goes on (host memory: a communication thread; NCCL: its own stream), so the net must
// run Backward layer by layer calling LayerDone; without, everything is reduced in Finish. The
// buckets and the arithmetic are the same either way, so the results are identical.
class GradientReducer {
 public:
  GradientReducer(const Net& net, size_t bucket_bytes, bool overlap);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  bool overlap() const { return overlap_; }
  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<Blob*>& bucket(size_t i) const { return buckets_[i].blobs; }
  int bucket_ready_layer(size_t i) const { return buckets_[i].ready_layer; }
  const char* transport_name() const;
  // Backward of layer `layer` is done (the last iter_size pass): starts the buckets it completes.
  void LayerDone(int layer);
  // Reduces the buckets not started yet and waits for all; then every diff is the mean.
  void Finish();

 private:
  struct Bucket {
    std::vector<Blob*> blobs;
    int ready_layer = 0;  // complete once backward has run this layer
  };
  void Start(size_t bucket);
  void CommLoop();

  std::vector<Bucket> buckets_;
  AllReduce* allreduce_ = nullptr;
  std::unique_ptr<AllReduce> device_allreduce_;  // NCCL, when the net runs on a GPU
  bool overlap_ = false;
  size_t next_ = 0;  // buckets started this iteration
  // The communication thread (host memory with overlap): runs buckets [done_, queued_).
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  size_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace dist
}  // namespace crema
