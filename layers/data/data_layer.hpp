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
// A background thread fills `prefetch` batches ahead; errors it meets (a corrupt record) are
// thrown by the next Forward. Randomness (rand_skip, crop offsets, mirror) is drawn from a seed
// taken from the calling thread's generator at set-up, so it does not depend on timing.
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crema/layer.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"

namespace crema {

class DataLayer final : public Layer {
 public:
  explicit DataLayer(const LayerParameter& param) : Layer(param) {}
  ~DataLayer() override;
  const char* type() const override { return "Data"; }

  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Tops are shaped by Forward, from the batch it hands out.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  struct Batch {
    explicit Batch(DataType type) : data(type), label(type) {}
    Blob data;
    Blob label;
    std::exception_ptr error;
  };

  void StopPrefetch();
  void PrefetchLoop();
  void LoadBatch(Batch* batch);
  // Moves the cursor one record on, back to the first after the last.
  void NextRecord();
  std::string RecordName() const;

  std::string source_;
  int batch_size_ = 0;
  bool output_labels_ = false;
  std::unique_ptr<db::DB> db_;
  std::unique_ptr<db::Cursor> cursor_;
  std::unique_ptr<DataTransformer> transformer_;

  std::vector<std::unique_ptr<Batch>> batches_;
  std::deque<Batch*> free_, full_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::exception_ptr error_;  // the first prefetch error, thrown by every later Forward
  std::thread thread_;
};

}  // namespace crema
