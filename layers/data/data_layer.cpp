#include "layers/data/data_layer.hpp"

#include <glog/logging.h>
#include <sys/stat.h>

#include <cstring>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"

namespace crema {

DataLayer::~DataLayer() { StopPrefetch(); }

void DataLayer::StopPrefetch() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DataParameter& param = layer_param_.data_param();
  source_ = param.source();
  CREMA_CHECK_PARAM(!source_.empty(), "data_param.source", "is required (the DB to read)");
  CREMA_CHECK_PARAM(param.batch_size() > 0, "data_param.batch_size", "must be > 0, got ",
                    param.batch_size());
  CREMA_CHECK_PARAM(param.prefetch() > 0, "data_param.prefetch", "must be > 0, got ",
                    param.prefetch());
  batch_size_ = static_cast<int>(param.batch_size());
  output_labels_ = top.size() > 1;

  const db::Backend backend = db::FromProto(param.backend());
  if (backend == db::Backend::kLevelDb) {
    // LEVELDB is Caffe's default, so an LMDB source with the backend unset is a common slip.
    struct stat st;
    const bool looks_lmdb = stat((source_ + "/data.mdb").c_str(), &st) == 0;
    if (looks_lmdb || !db::HasLevelDb())
      throw RuntimeError(
          ErrorPrefix("data_param.backend") +
          StrCat("data_param.backend is LEVELDB",
                 param.has_backend() ? "" : " (Caffe's default when unset)",
                 db::HasLevelDb() ? "" : ", but this crema was built without LevelDB",
                 looks_lmdb ? StrCat("; '", source_, "' is an LMDB: add backend: LMDB") : ""));
  }
  try {
    db_ = db::OpenDB(backend, source_, db::Mode::kRead);
    cursor_ = db_->NewCursor();
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("data_param.source") + e.what());
  }
  if (!cursor_->valid())
    throw RuntimeError(ErrorPrefix("data_param.source") +
                       StrCat("data_param.source '", source_, "' holds no records"));

  try {
    transformer_ = std::make_unique<DataTransformer>(layer_param_.transform_param(), phase_);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("transform_param") + e.what());
  }
  // Random numbers are drawn only when needed, as Caffe, so adding a plain Data layer does not
  // shift the random stream the rest of the net sees.
  if (transformer_->NeedsRandom()) transformer_->InitRand(NextSeed());
  if (param.rand_skip() > 0) {
    uint32_t skip = static_cast<uint32_t>(ThreadRng()()) % param.rand_skip();
    LOG(INFO) << "Data layer \"" << name() << "\" skips the first " << skip << " records";
    while (skip-- > 0) NextRecord();
  }

  // The first record gives the shape (and its problems are reported here, not at Forward).
  Datum datum;
  std::vector<int> shape;
  try {
    ParseDatum(cursor_->value(), &datum, RecordName());
    shape = transformer_->InferBlobShape(datum, RecordName());
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix() + e.what());
  }
  shape[0] = batch_size_;
  top[0]->Reshape(shape);
  if (output_labels_) top[1]->Reshape(std::vector<int>{batch_size_});
  LOG(INFO) << "Data layer \"" << name() << "\": " << source_ << ", output "
            << top[0]->shape_string();

  for (uint32_t i = 0; i < param.prefetch(); ++i) {
    batches_.push_back(std::make_unique<Batch>(dtype_));
    batches_.back()->data.Reshape(shape);
    if (output_labels_) batches_.back()->label.Reshape(std::vector<int>{batch_size_});
    free_.push_back(batches_.back().get());
  }
  thread_ = std::thread(&DataLayer::PrefetchLoop, this);
}

std::string DataLayer::RecordName() const {
  return StrCat("record '", cursor_->key(), "' of '", source_, "'");
}

void DataLayer::NextRecord() {
  cursor_->Next();
  if (!cursor_->valid()) {
    DLOG(INFO) << "Data layer \"" << name() << "\" restarts from the first record";
    cursor_->SeekToFirst();
  }
}

void DataLayer::LoadBatch(Batch* batch) {
  Datum datum;
  for (int item = 0; item < batch_size_; ++item) {
    const std::string record = RecordName();
    ParseDatum(cursor_->value(), &datum, record);
    if (item == 0) {
      // Caffe shapes each batch from its first record.
      std::vector<int> shape = transformer_->InferBlobShape(datum, record);
      shape[0] = batch_size_;
      batch->data.Reshape(shape);
    }
    transformer_->Transform(datum, &batch->data, item, record);
    if (output_labels_) {
      CREMA_DISPATCH_FLOAT(
          batch->label.dtype(), T,
          batch->label.mutable_cpu_data<T>()[item] = static_cast<T>(datum.label()));
    }
    NextRecord();
  }
}

void DataLayer::PrefetchLoop() {
  for (;;) {
    Batch* batch = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || !free_.empty(); });
      if (stop_) return;
      batch = free_.front();
      free_.pop_front();
    }
    try {
      LoadBatch(batch);
    } catch (...) {
      batch->error = std::current_exception();
    }
    const bool failed = batch->error != nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      full_.push_back(batch);
    }
    changed_.notify_all();
    if (failed) return;  // the cursor's position is unknown; Forward reports the error
  }
}

void DataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  if (error_) std::rethrow_exception(error_);
  Batch* batch = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !full_.empty(); });
    batch = full_.front();
    full_.pop_front();
  }
  if (batch->error) {
    error_ = batch->error;
    std::rethrow_exception(error_);
  }
  for (int i = 0; i < static_cast<int>(top.size()); ++i)
    if (top[i]->dtype() != dtype_) top[i]->set_dtype(dtype_);
  top[0]->ReshapeLike(batch->data);
  std::memcpy(top[0]->data()->mutable_cpu_data(), batch->data.data()->cpu_data(),
              batch->data.count() * SizeOf(batch->data.dtype()));
  if (output_labels_) {
    top[1]->ReshapeLike(batch->label);
    std::memcpy(top[1]->data()->mutable_cpu_data(), batch->label.data()->cpu_data(),
                batch->label.count() * SizeOf(batch->label.dtype()));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(batch);
  }
  changed_.notify_all();
}

CREMA_REGISTER_LAYER(Data, DataLayer);

}  // namespace crema
