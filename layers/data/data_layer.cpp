#include "layers/data/data_layer.hpp"

#include <glog/logging.h>
#include <sys/stat.h>

#include <cstring>
#include <utility>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"

namespace crema {
namespace {

// Bad records warned about one by one (on_bad_record: SKIP); later ones are only counted.
constexpr int64_t kWarnedBadRecords = 10;

std::string Message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Runs `fn`, adding `prefix` (the layer's location) to the message of what it throws.
template <typename Fn>
void WithPrefix(const std::string& prefix, Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    throw ConfigError(prefix + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(prefix + e.what());
  }
}

}  // namespace

DataLayer::~DataLayer() {
  prefetcher_.reset();
  if (skipped_ > 0)
    LOG(WARNING) << prefix_ << "skipped " << skipped_ << " bad records of '" << source_
                 << "' in all";
}

void DataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DataParameter& param = layer_param_.data_param();
  source_ = param.source();
  prefix_ = ErrorPrefix();
  CREMA_CHECK_PARAM(!source_.empty(), "data_param.source", "is required (the DB to read)");
  CREMA_CHECK_PARAM(param.batch_size() > 0 && param.batch_size() <= INT32_MAX,
                    "data_param.batch_size", "must be > 0, got ", param.batch_size());
  CREMA_CHECK_PARAM(param.prefetch() > 0 && param.prefetch() <= 1024, "data_param.prefetch",
                    "must be in [1, 1024], got ", param.prefetch());
  CREMA_CHECK_PARAM(param.decode_threads() <= 1024, "data_param.decode_threads",
                    "must be in [0, 1024] (0: auto), got ", param.decode_threads());
  CREMA_CHECK_PARAM(param.num_shards() > 0, "data_param.num_shards", "must be > 0, got ",
                    param.num_shards());
  CREMA_CHECK_PARAM(param.shard_id() < param.num_shards(), "data_param.shard_id",
                    "must be < num_shards (", param.num_shards(), "), got ", param.shard_id());
  batch_size_ = static_cast<int>(param.batch_size());
  output_labels_ = top.size() > 1;
  skip_bad_ = param.on_bad_record() == DataParameter::SKIP;
  shard_id_ = param.shard_id();
  num_shards_ = param.num_shards();

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

  SetUpTransform();

  WithPrefix(prefix_, [&] {
    position_ = 0;
    if (InShard())
      records_seen_ = 1;
    else
      NextRecord();
    if (param.rand_skip() > 0) {
      uint32_t skip = static_cast<uint32_t>(ThreadRng()()) % param.rand_skip();
      LOG(INFO) << type() << " layer \"" << name() << "\" skips the first " << skip << " records";
      while (skip-- > 0) NextRecord();
    }
    // The first good record gives the shape, and its problems are reported here, not at
    // Forward. Bad records before it are skipped for good (with SKIP).
    std::unique_ptr<Item> item = NewItem();
    for (;;) {
      item->key = cursor_->key();
      item->value = cursor_->value();
      try {
        Decode(item.get());
      } catch (const RuntimeError&) {
        OnBadRecord(*item, std::current_exception());
        NextRecord();
        continue;
      }
      break;
    }
    consecutive_bad_ = 0;
    ShapeTops(*item, top);
  });
  const int threads = DecodeThreads(param.decode_threads());
  LOG(INFO) << type() << " layer \"" << name() << "\": " << source_
            << (num_shards_ > 1 ? StrCat(" (shard ", shard_id_, " of ", num_shards_, ")") : "")
            << ", output " << top[0]->shape_string() << ", " << threads << " decode threads";

  for (int i = 0; i < batch_size_; ++i) items_.push_back(NewItem());
  for (uint32_t i = 0; i < param.prefetch(); ++i) {
    batches_.push_back(std::make_unique<Batch>(dtype_));
    batches_.back()->data.ReshapeLike(*top[0]);
    if (output_labels_) batches_.back()->label.ReshapeLike(*top[1]);
  }
  workers_ = std::make_unique<WorkerPool>(threads);
  handed_ = ReaderState();
  StartPrefetch();
}

void DataLayer::SetUpTransform() {
  const TransformationParameter& param = layer_param_.transform_param();
  const std::pair<bool, const char*> ssd_fields[] = {
      {param.has_resize_param(), "resize_param"},
      {param.has_noise_param(), "noise_param"},
      {param.has_emit_constraint(), "emit_constraint"},
      {param.has_distort_param(), "distort_param"},
      {param.has_expand_param(), "expand_param"}};
  for (const auto& [given, field] : ssd_fields)
    CREMA_CHECK_PARAM(!given, StrCat("transform_param.", field),
                      "is the SSD branch's, applied by AnnotatedData layers only (type: "
                      "\"AnnotatedData\"); Data would ignore it");
  try {
    transformer_ = std::make_unique<DataTransformer>(param, phase_);
  } catch (const ConfigError& e) {
    throw ConfigError(ErrorPrefix("transform_param") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("transform_param") + e.what());
  }
  // Random numbers are drawn only when needed, as Caffe, so adding a plain Data layer does not
  // shift the random stream the rest of the net sees.
  if (transformer_->NeedsRandom()) transformer_->InitRand(NextSeed());
}

void DataLayer::ShapeTops(const Item& first, const BlobVec& top) {
  std::vector<int> shape = transformer_->ShapeOf(first.image, RecordName(first.key));
  shape[0] = batch_size_;
  top[0]->Reshape(shape);
  if (output_labels_) top[1]->Reshape(std::vector<int>{batch_size_});
}

void DataLayer::StartPrefetch() {
  prefetcher_ = std::make_unique<Prefetcher>(static_cast<int>(batches_.size()), [this](int slot) {
    WithPrefix(prefix_, [&] { LoadBatch(batches_[slot].get()); });
  });
  prefetcher_->Start();
}

DataLayerState DataLayer::ReaderState() const {
  DataLayerState state;
  state.set_position(static_cast<int64_t>(position_));
  state.set_records_seen(records_seen_);
  state.set_pass_size(pass_size_);
  state.set_skipped(skipped_);
  state.set_consecutive_bad(consecutive_bad_);
  if (NeedsRandom()) state.set_transform_rng(RandState());
  return state;
}

int64_t DataLayer::NumRecords() const {
  if (num_records_ < 0) {
    const int64_t total = db_->Count();
    // Positions i < total with i % num_shards == shard_id.
    const int64_t shards = static_cast<int64_t>(num_shards_), id = static_cast<int64_t>(shard_id_);
    num_records_ = total > id ? (total - id + shards - 1) / shards : 0;
  }
  return num_records_;
}

bool DataLayer::SaveDataState(DataLayerState* state) const {
  *state = handed_;
  state->set_layer(name());
  state->set_type(type());
  return true;
}

void DataLayer::RestoreDataState(const DataLayerState& state) {
  prefetcher_.reset();  // stops the loading thread; its prefetched batches are dropped
  const int64_t position = state.position();
  cursor_->SeekToFirst();
  for (int64_t i = 0; i < position && cursor_->valid(); ++i) cursor_->Next();
  if (position < 0 || !cursor_->valid() ||
      position % static_cast<int64_t>(num_shards_) != static_cast<int64_t>(shard_id_))
    throw RuntimeError(prefix_ + StrCat("cannot resume reading '", source_, "' at record ",
                                        position, ": the source has changed since the snapshot"));
  position_ = static_cast<uint64_t>(position);
  records_seen_ = state.records_seen();
  pass_size_ = state.pass_size();
  skipped_ = reported_skipped_ = state.skipped();
  consecutive_bad_ = state.consecutive_bad();
  if (NeedsRandom()) WithPrefix(prefix_, [&] { SetRandState(state.transform_rng()); });
  handed_ = ReaderState();
  StartPrefetch();
}

std::string DataLayer::RecordName(const std::string& key) const {
  return StrCat("record '", key, "' of '", source_, "'");
}

void DataLayer::NextRecord() {
  do {
    cursor_->Next();
    ++position_;
    if (!cursor_->valid()) {
      if (pass_size_ < 0) pass_size_ = records_seen_;
      if (pass_size_ == 0)
        CREMA_THROW_RUNTIME("data_param.source '", source_, "' holds ", position_,
                            " records, none of them in data_param.shard_id ", shard_id_,
                            " of num_shards ", num_shards_);
      if (skipped_ > reported_skipped_) {
        LOG(WARNING) << prefix_ << "has skipped " << skipped_ << " bad records of '" << source_
                     << "' so far";
        reported_skipped_ = skipped_;
      }
      DLOG(INFO) << type() << " layer \"" << name() << "\" restarts from the first record";
      cursor_->SeekToFirst();
      position_ = 0;
    }
  } while (!InShard());
  if (pass_size_ < 0) ++records_seen_;
}

void DataLayer::Fetch(Item* item) {
  item->key = cursor_->key();
  item->value = cursor_->value();
  NextRecord();
}

void DataLayer::Decode(Item* item) const {
  const std::string what = RecordName(item->key);
  ParseDatum(item->value, &item->datum, what);
  item->image = transformer_->Decode(item->datum, &item->pixels, what);
}

void DataLayer::OnBadRecord(const Item& item, const std::exception_ptr& error) {
  if (!skip_bad_) std::rethrow_exception(error);
  const std::string message = Message(error);
  ++skipped_;
  if (skipped_ <= kWarnedBadRecords)
    LOG(WARNING) << prefix_ << "skipping a bad record (on_bad_record: SKIP): " << message
                 << (skipped_ == kWarnedBadRecords ? "; further ones are only counted" : "");
  ++consecutive_bad_;
  if (pass_size_ > 0 && consecutive_bad_ >= pass_size_)
    CREMA_THROW_RUNTIME(
        "every record of '", source_, "'", num_shards_ > 1 ? StrCat(" in shard ", shard_id_) : "",
        " is bad (on_bad_record: SKIP skipped ", skipped_, "); the last: ", message);
}

void DataLayer::LoadBatch(Batch* batch) {
  const std::vector<int> order = GatherInOrder(
      workers_.get(), batch_size_, [this](int slot) { Fetch(items_[slot].get()); },
      [this](int slot) { Decode(items_[slot].get()); },
      [this](int slot, const std::exception_ptr& error) {
        if (error)
          OnBadRecord(*items_[slot], error);
        else
          consecutive_bad_ = 0;
      });
  std::vector<Item*> items;
  for (int slot : order) items.push_back(items_[slot].get());
  FillBatch(items, batch);
  batch->end = ReaderState();
}

void DataLayer::FillBatch(const std::vector<Item*>& items, Batch* batch) {
  std::vector<const DataTransformer::Image*> images;
  for (const Item* item : items) images.push_back(&item->image);
  transformer_->TransformBatch(
      images, [&](int k) { return RecordName(items[k]->key); }, workers_.get(), &batch->data);
  if (output_labels_) {
    CREMA_DISPATCH_FLOAT(batch->label.dtype(), T, {
      T* labels = batch->label.mutable_cpu_data<T>();
      for (size_t k = 0; k < items.size(); ++k) labels[k] = static_cast<T>(items[k]->datum.label());
    });
  }
}

void DataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  const int slot = prefetcher_->Acquire();
  const Batch& batch = *batches_[slot];
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  top[0]->ReshapeLike(batch.data);
  std::memcpy(top[0]->data()->mutable_cpu_data(), batch.data.data()->cpu_data(),
              batch.data.count() * SizeOf(batch.data.dtype()));
  if (output_labels_) {
    top[1]->ReshapeLike(batch.label);
    std::memcpy(top[1]->data()->mutable_cpu_data(), batch.label.data()->cpu_data(),
                batch.label.count() * SizeOf(batch.label.dtype()));
  }
  handed_ = batch.end;
  prefetcher_->Release(slot);
}

CREMA_REGISTER_LAYER(Data, DataLayer);

}  // namespace crema
