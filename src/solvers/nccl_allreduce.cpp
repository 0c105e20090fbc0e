// NCCL for gradients on a GPU (allreduce.hpp). One communicator per process (one GPU per rank),
// its unique id made by rank 0 and broadcast over the process group's transport (MPI_Bcast under
// mpirun, the TCP rendezvous under torchrun variables). The reductions run on a stream of their
// own: each bucket first waits (an event) for the work queued so far on crema's stream, which has
// computed its gradients, so backward goes on while the bucket is reduced; Wait() makes crema's
// stream wait for the reductions before the update.
#include "crema/blob.hpp"
#include "crema/error.hpp"
#include "solvers/allreduce.hpp"

#ifdef CREMA_WITH_NCCL
#include <cuda_runtime_api.h>
#include <glog/logging.h>
#include <nccl.h>

#include "core/cuda_context.hpp"
#endif

namespace crema::dist {

#ifdef CREMA_WITH_NCCL
namespace {

void NcclCheck(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  CREMA_THROW_RUNTIME(what, " failed: ", ncclGetErrorString(status),
                      " (NCCL_DEBUG=INFO says more)");
}

class NcclAllReduce final : public AllReduce {
 public:
  NcclAllReduce(Transport* transport, const Device& device) {
    SetCudaDevice(device.id);
    ncclUniqueId id{};
    if (transport->rank() == 0) NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
    transport->Broadcast(&id, sizeof(id));
    NcclCheck(ncclCommInitRank(&comm_, transport->world(), id, transport->rank()),
              "ncclCommInitRank");
    CREMA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CREMA_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
    CREMA_CUDA_CHECK(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
    LOG(INFO) << "NCCL " << NCCL_MAJOR << "." << NCCL_MINOR << ": rank " << transport->rank()
              << " of " << transport->world() << " on cuda:" << device.id;
  }
  ~NcclAllReduce() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(computed_);
    cudaEventDestroy(reduced_);
    cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "NCCL"; }
  bool host_memory() const override { return false; }

  void AverageDiffs(const std::vector<Blob*>& bucket) override {
    if (bucket.empty()) return;
    std::vector<void*> diffs;  // before the event: the pointers may sync data onto the GPU
    for (Blob* blob : bucket)
      diffs.push_back(blob->dtype() == DataType::kFloat32
                          ? static_cast<void*>(blob->mutable_gpu_diff<float>())
                          : static_cast<void*>(blob->mutable_gpu_diff<double>()));
    CREMA_CUDA_CHECK(cudaEventRecord(computed_, gpu::Stream()));
    CREMA_CUDA_CHECK(cudaStreamWaitEvent(stream_, computed_, 0));
    NcclCheck(ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < bucket.size(); ++i) {
      const ncclDataType_t type =
          bucket[i]->dtype() == DataType::kFloat32 ? ncclFloat32 : ncclFloat64;
      NcclCheck(ncclAllReduce(diffs[i], diffs[i], static_cast<size_t>(bucket[i]->count()), type,
                              ncclAvg, comm_, stream_),
                "ncclAllReduce of the gradients");
    }
    NcclCheck(ncclGroupEnd(), "ncclGroupEnd");
  }

  void Wait() override {
    CREMA_CUDA_CHECK(cudaEventRecord(reduced_, stream_));
    CREMA_CUDA_CHECK(cudaStreamWaitEvent(gpu::Stream(), reduced_, 0));
    ncclResult_t async = ncclSuccess;
    NcclCheck(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    NcclCheck(async, "an NCCL reduction");
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t computed_ = nullptr, reduced_ = nullptr;
};

}  // namespace

std::unique_ptr<AllReduce> MakeNccl(Transport* transport, const Device& device) {
  return std::make_unique<NcclAllReduce>(transport, device);
}
#else
std::unique_ptr<AllReduce> MakeNccl(Transport*, const Device&) { return nullptr; }
#endif

}  // namespace crema::dist
