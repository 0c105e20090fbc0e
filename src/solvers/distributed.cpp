#include "solvers/distributed.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "crema/blob.hpp"
#include "crema/error.hpp"
#include "crema/net.hpp"
#include "solvers/allreduce.hpp"

namespace crema::dist {
namespace {

std::unique_ptr<Transport> transport_;

template <typename T>
void Pack(const std::vector<Blob*>& blobs, std::vector<T>* buffer) {
  buffer->clear();
  for (Blob* blob : blobs) {
    const T* diff = blob->cpu_diff<T>();
    buffer->insert(buffer->end(), diff, diff + blob->count());
  }
}

template <typename T>
void Unpack(const std::vector<T>& buffer, const std::vector<Blob*>& blobs) {
  size_t offset = 0;
  for (Blob* blob : blobs) {
    std::memcpy(blob->mutable_cpu_diff<T>(), buffer.data() + offset, blob->count() * sizeof(T));
    offset += blob->count();
  }
}

template <typename T>
void Scale(T* data, int64_t count, int world) {
  const T scale = T(1) / static_cast<T>(world);
  for (int64_t i = 0; i < count; ++i) data[i] *= scale;
}

void CheckAveraged(const Blob& blob) {
  if (blob.dtype() != DataType::kFloat32 && blob.dtype() != DataType::kFloat64)
    CREMA_THROW_CONFIG("multi-process training averages float and double parameters only, not ",
                       DataTypeName(blob.dtype()));
}

}  // namespace

// ---- Transport: host-memory gradients ----

void Transport::AverageDiffs(const std::vector<Blob*>& bucket) {
  if (bucket.empty()) return;
  const bool is_float = bucket[0]->dtype() == DataType::kFloat32;
  if (bucket.size() == 1) {  // one blob (often a big one): reduced in place
    Blob* blob = bucket[0];
    if (is_float) {
      SumFloats(blob->mutable_cpu_diff<float>(), blob->count());
      Scale(blob->mutable_cpu_diff<float>(), blob->count(), world());
    } else {
      SumDoubles(blob->mutable_cpu_diff<double>(), blob->count());
      Scale(blob->mutable_cpu_diff<double>(), blob->count(), world());
    }
    return;
  }
  if (is_float) {
    Pack(bucket, &floats_);
    SumFloats(floats_.data(), static_cast<int64_t>(floats_.size()));
    Scale(floats_.data(), static_cast<int64_t>(floats_.size()), world());
    Unpack(floats_, bucket);
  } else {
    Pack(bucket, &doubles_);
    SumDoubles(doubles_.data(), static_cast<int64_t>(doubles_.size()));
    Scale(doubles_.data(), static_cast<int64_t>(doubles_.size()), world());
    Unpack(doubles_, bucket);
  }
}

// ---- the process group ----

void Init() {
  if (transport_) return;
  transport_ = JoinMpi();
  if (!transport_) transport_ = JoinTcp();
}

bool StartedAsRank() {
  return LaunchedByMpi() || std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr;
}

void Finalize() { transport_.reset(); }

int Rank() { return transport_ ? transport_->rank() : 0; }
int WorldSize() { return transport_ ? transport_->world() : 1; }
int LocalRank() { return transport_ ? transport_->local_rank() : 0; }
const char* TransportName() { return transport_ ? transport_->name() : "none"; }

void BroadcastData(const std::vector<Blob*>& blobs) {
  if (!Active()) return;
  for (Blob* blob : blobs) {
    if (blob->count() == 0) continue;
    CheckAveraged(*blob);
    void* data = blob->dtype() == DataType::kFloat32
                     ? static_cast<void*>(blob->mutable_cpu_data<float>())
                     : static_cast<void*>(blob->mutable_cpu_data<double>());
    transport_->Broadcast(data, blob->count() * SizeOf(blob->dtype()));
  }
}

void Broadcast(std::vector<double>* values) {
  if (!Active()) return;
  transport_->Broadcast(values->data(), values->size() * sizeof(double));
}

double Mean(double value) {
  if (!Active()) return value;
  transport_->SumDoubles(&value, 1);
  return value / WorldSize();
}

void AbortJob(const std::string& message) {
  if (!Active()) return;
  transport_->Abort(message);
}

// ---- GradientReducer ----

GradientReducer::GradientReducer(const Net& net, size_t bucket_bytes, bool overlap) {
  CREMA_ASSERT(transport_ != nullptr, "GradientReducer without a process group");
  // The layer after whose backward each learnable blob's gradient is complete: its first user.
  std::map<const Blob*, int> ready;
  const auto& params = net.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const int owner = net.param_owners()[i] < 0 ? static_cast<int>(i) : net.param_owners()[i];
    const Blob* blob = params[owner].get();
    const int layer = net.param_layer_indices()[i].first;
    auto it = ready.find(blob);
    if (it == ready.end())
      ready.emplace(blob, layer);
    else
      it->second = std::min(it->second, layer);
  }
  std::vector<Blob*> order;
  for (Blob* blob : net.learnable_params()) {
    if (blob->count() == 0) continue;
    CheckAveraged(*blob);
    order.push_back(blob);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](Blob* a, Blob* b) { return ready.at(a) > ready.at(b); });
  size_t bytes = 0;
  for (Blob* blob : order) {
    const size_t size = blob->count() * SizeOf(blob->dtype());
    if (buckets_.empty() || buckets_.back().blobs[0]->dtype() != blob->dtype() ||
        bytes + size > bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().blobs.push_back(blob);
    buckets_.back().ready_layer = ready.at(blob);
    bytes += size;
  }

  allreduce_ = transport_.get();
  if (net.device().is_cuda()) {
    device_allreduce_ = MakeNccl(transport_.get(), net.device());
    if (device_allreduce_) allreduce_ = device_allreduce_.get();
  }
  // Host memory of a GPU net is reached through the net's thread only: no overlap there.
  overlap_ = overlap && (allreduce_->host_memory() ? net.device().is_cpu() : true);
  if (overlap_ && allreduce_->host_memory()) thread_ = std::thread([this] { CommLoop(); });
  LOG(INFO) << "Gradients averaged with " << allreduce_->name() << " in " << buckets_.size()
            << " bucket(s) of at most " << bucket_bytes / double(1 << 20) << " MB"
            << (overlap_ ? ", overlapped with backward" : ", after backward");
  if (overlap && !overlap_)
    LOG(INFO) << "(no overlap: the gradients of a GPU net go through host memory without NCCL)";
}

GradientReducer::~GradientReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

const char* GradientReducer::transport_name() const { return allreduce_->name(); }

void GradientReducer::CommLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || done_ < queued_; });
    if (stop_) return;
    const size_t bucket = done_;
    lock.unlock();
    try {
      if (!error_) allreduce_->AverageDiffs(buckets_[bucket].blobs);
    } catch (...) {
      error_ = std::current_exception();  // read by Finish after `idle_`
    }
    lock.lock();
    ++done_;
    idle_.notify_all();
  }
}

void GradientReducer::Start(size_t bucket) {
  if (!thread_.joinable()) {
    allreduce_->AverageDiffs(buckets_[bucket].blobs);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_ = bucket + 1;
  }
  wake_.notify_all();
}

void GradientReducer::LayerDone(int layer) {
  if (!overlap_) return;
  while (next_ < buckets_.size() && buckets_[next_].ready_layer >= layer) Start(next_++);
}

void GradientReducer::Finish() {
  while (next_ < buckets_.size()) Start(next_++);
  next_ = 0;
  if (thread_.joinable()) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return done_ == queued_; });
    done_ = queued_ = 0;
    if (error_) {
      std::exception_ptr error = error_;
      error_ = nullptr;
      std::rethrow_exception(error);
    }
  }
  allreduce_->Wait();
}

}  // namespace crema::dist
