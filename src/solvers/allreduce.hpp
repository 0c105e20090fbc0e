#pragma once
// The transports of data-parallel training (solvers/distributed.hpp), one implementation each:
//  * Transport (MPI under mpirun/srun, TCP under torchrun-style RANK/WORLD_SIZE variables): the
//    process group itself: rank, size, broadcasts, the loss mean, aborting the job; it also
//    averages gradients held in host memory.
//  * AllReduce: averages a bucket of gradients; a Transport (host memory) or NCCL (device
//    memory, on its own stream, bootstrapped through a Transport's broadcast).
// The solver talks to GradientReducer (distributed.hpp) only; it does not know which one runs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crema/device.hpp"

namespace crema {

class Blob;

namespace dist {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  virtual const char* name() const = 0;
  // Averages the diffs of `bucket` (blobs of one data type) over the ranks, in place: the sum in
  // rank order (rank 0 + rank 1 + ...), then x 1 / world, the same values on every rank. May
  // only enqueue the work (NCCL); Wait() ends it.
  virtual void AverageDiffs(const std::vector<Blob*>& bucket) = 0;
  // Makes the results of every AverageDiffs so far visible to the net's next use of the diffs.
  virtual void Wait() {}
  // Whether AverageDiffs may run on a thread other than the one that runs the net.
  virtual bool host_memory() const { return true; }
};

class Transport : public AllReduce {
 public:
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // The process's rank among those on its node (picks the GPU when --gpu is not given).
  virtual int local_rank() const = 0;
  // Rank 0's `bytes` bytes at `data` on every rank.
  virtual void Broadcast(void* data, size_t bytes) = 0;
  // In-place sum of `count` elements over the ranks, in rank order.
  virtual void SumFloats(float* data, int64_t count) = 0;
  virtual void SumDoubles(double* data, int64_t count) = 0;
  // Ends this rank and makes the others stop with `message` instead of waiting for it.
  [[noreturn]] virtual void Abort(const std::string& message) = 0;
  // Host-memory gradients: packed into one buffer per bucket, summed, scaled.
  void AverageDiffs(const std::vector<Blob*>& bucket) override;

 private:
  std::vector<float> floats_;
  std::vector<double> doubles_;
};

// Whether an MPI launcher started this process (Open MPI, PMIx, MPICH/Hydra, Slurm's PMI), with
// or without MPI in this build.
bool LaunchedByMpi();
// The MPI job this process was started in (mpirun, srun: their environment variables), or null.
std::unique_ptr<Transport> JoinMpi();
// The torchrun-style group (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set), or null
// when RANK and WORLD_SIZE are not both set. Rank 0 listens on MASTER_ADDR:MASTER_PORT (+1 when
// torchrun's agent holds that port: TORCHELASTIC_USE_AGENT_STORE=True; CREMA_MASTER_PORT
// overrides); every other rank connects to it; CREMA_DIST_TIMEOUT (seconds, default 1800) bounds
// the rendezvous and every wait for another rank. ConfigError for bad values, RuntimeError when the
// group cannot form.
std::unique_ptr<Transport> JoinTcp();
// NCCL for gradients held on `device` (a GPU), its unique id broadcast from rank 0 over
// `transport`; null when crema was built without NCCL.
std::unique_ptr<AllReduce> MakeNccl(Transport* transport, const Device& device);

}  // namespace dist
}  // namespace crema
