#pragma once
// Data: reads Datum records from a DB in key order and emits batches, as Caffe's DataLayer.
// Tops: data (batch_size x C x H' x W', transformed by transform_param, see
// io/data_transformer.hpp) and, optionally, label (batch_size). The shape comes from the first
// record of each batch; all records of a batch must have the same size. After the last record
// reading restarts from the first. No bottoms, no backward.
// Params: data_param { source, batch_size, backend (LEVELDB, Caffe's default, or LMDB; an LMDB
// source with backend LEVELDB is reported with a hint), rand_skip (skip a random number of
// records in [0, rand_skip) at start), prefetch (batches loaded ahead, default 4) }. The legacy
// transform fields inside data_param are moved to transform_param by the net upgrade.
// crema-only: decode_threads (0: auto, see io/prefetch_pool.hpp), on_bad_record (STOP: a record
// that can't be parsed or decoded is a RuntimeError naming its key and the source; SKIP: it is
// replaced by the next record, warned about the first few times and counted, with a summary
// after each pass and at the end), shard_id / num_shards (read only the records at positions
// i with i % num_shards == shard_id, counted from the first record of the DB: the shards of one
// DB are disjoint and together cover every record once per pass; rand_skip skips records of the
// shard; Caffe's multi-GPU reader also strides, but by a count that runs on across passes).
// Loading (io/prefetch_pool.hpp): a background thread keeps `prefetch` batches ready; it reads
// the records of a batch in cursor order, then decode_threads threads decode and transform them.
// Errors it meets are thrown by the next Forward. Randomness (rand_skip, crop offsets, mirror) is
// drawn from a seed taken from the calling thread's generator at set-up; the random words of the
// items are drawn in batch order, as one thread would (Caffe's sequence), so batches depend on
// the seed only, not on the number of threads or on timing.
// Resuming (SaveDataState / RestoreDataState): each batch carries the reader's state after it
// (cursor position, pass counters, the transformer's generator); the state saved is that of the
// last batch Forward handed out, so batches prefetched but not consumed are read again after a
// restore. NumRecords: the records of the shard in one pass (LMDB's statistics; LevelDB counts
// its keys once), bad records included.
// The SSD branch's transform_param fields (resize_param, noise_param, emit_constraint,
// distort_param, expand_param) belong to AnnotatedData: ConfigError here.
// Other record types: a subclass (AnnotatedData) keeps the reader, the threads and the resuming,
// and overrides the hooks below that parse, shape and transform.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "io/prefetch_pool.hpp"

namespace crema {

class DataLayer : public Layer {
 public:
  // Device-neutral: records are decoded and transformed on the host by design (as Caffe); the
  // next layer's gpu_data() uploads the batch.
  bool HasGpuKernels() const override { return true; }
  explicit DataLayer(const LayerParameter& param) : Layer(param) {}
  ~DataLayer() override;
  const char* type() const override { return "Data"; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Tops are shaped by Forward, from the batch it hands out.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  // Bad records skipped (on_bad_record: SKIP) up to the end of the last batch handed out.
  int64_t skipped_records() const { return handed_.skipped(); }

  int64_t NumRecords() const override;
  int64_t BatchSize() const override { return batch_size_; }
  bool SaveDataState(DataLayerState* state) const override;
  void RestoreDataState(const DataLayerState& state) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

  struct Batch {
    explicit Batch(DataType type) : data(type), label(type) {}
    Blob data;
    Blob label;
    DataLayerState end;  // the reader's state after this batch
  };
  // One record on its way into a batch; owned by the loading thread and its workers. A subclass
  // derives its own (NewItem) to carry what its records hold besides the Datum.
  struct Item {
    virtual ~Item() = default;
    std::string key, value;
    Datum datum;
    std::vector<uint8_t> pixels;
    DataTransformer::Image image;
  };

  // The hooks. NewItem: an empty item. SetUpTransform: checks transform_param, builds the
  // transformer and seeds its generator (from NextSeed, only when it draws). Decode (worker
  // threads, concurrently): parses and decodes; RuntimeError naming the record when it is bad.
  // ShapeTops: shapes the tops from the first good record (at set-up; Forward reshapes them like
  // each batch). FillBatch (loading thread): the batch from its good items in cursor order; it may
  // use workers() and must draw random numbers in item order. NeedsRandom / RandState /
  // SetRandState: the transform's generator, saved with the reader's state.
  virtual std::unique_ptr<Item> NewItem() const { return std::make_unique<Item>(); }
  virtual void SetUpTransform();
  virtual void Decode(Item* item) const;
  virtual void ShapeTops(const Item& first, const BlobVec& top);
  virtual void FillBatch(const std::vector<Item*>& items, Batch* batch);
  virtual bool NeedsRandom() const { return transformer_->NeedsRandom(); }
  virtual std::string RandState() const { return transformer_->RandState(); }
  virtual void SetRandState(const std::string& state) { transformer_->SetRandState(state); }

  std::string RecordName(const std::string& key) const;
  // Stops the loading thread; a subclass's destructor calls it first, as the thread calls its
  // hooks.
  void StopPrefetch() { prefetcher_.reset(); }
  WorkerPool* workers() const { return workers_.get(); }
  int batch_size() const { return batch_size_; }
  bool output_labels() const { return output_labels_; }

 private:
  void LoadBatch(Batch* batch);
  // Reads the cursor's record into `item` and moves the cursor on.
  void Fetch(Item* item);
  // Applies on_bad_record to a record that failed with `error`.
  void OnBadRecord(const Item& item, const std::exception_ptr& error);
  // Moves the cursor to the next record of the shard, back to the first after the last.
  void NextRecord();
  bool InShard() const { return position_ % num_shards_ == shard_id_; }
  // The reader's state now (loading thread, or with the prefetcher stopped).
  DataLayerState ReaderState() const;
  void StartPrefetch();

  std::string source_;
  std::string prefix_;  // ErrorPrefix(), computed at set-up for the loading thread
  int batch_size_ = 0;
  bool output_labels_ = false;
  bool skip_bad_ = false;
  std::unique_ptr<db::DB> db_;
  std::unique_ptr<db::Cursor> cursor_;
  std::unique_ptr<DataTransformer> transformer_;

  uint64_t shard_id_ = 0, num_shards_ = 1;
  uint64_t position_ = 0;             // of the cursor's record in the DB
  int64_t records_seen_ = 0;          // records of the shard met before the first wrap
  int64_t pass_size_ = -1;            // records of the shard in one pass, once known
  int64_t consecutive_bad_ = 0;       // bad records since the last good one
  int64_t skipped_ = 0;               // by the loading thread
  int64_t reported_skipped_ = 0;      // the count in the last summary
  DataLayerState handed_;             // the reader's state after the last batch handed out
  mutable int64_t num_records_ = -1;  // of the shard, counted on first use

  std::vector<std::unique_ptr<Item>> items_;
  std::vector<std::unique_ptr<Batch>> batches_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace crema
