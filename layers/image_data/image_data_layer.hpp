#pragma once
// ImageData: reads images listed in a text file and emits batches, as Caffe's ImageDataLayer.
// image_data_param.source holds one "path label" per line (the label after the last space;
// blank lines are skipped); root_folder is prepended to each path. Images are decoded with
// OpenCV as BGR (is_color, the default) or grayscale, resized to new_height x new_width
// (bilinear, when both are set), then transformed by transform_param (io/data_transformer.hpp).
// Tops: data (batch_size x C x H' x W', shaped from the first image of each batch) and label
// (batch_size). After the last line reading restarts from the first (reshuffled with shuffle).
// shuffle: the list is shuffled at set-up and after each pass, with Caffe's algorithm (its
// boost::uniform_int Fisher-Yates over an mt19937), so a given seed gives Caffe's order.
// rand_skip: start at a random line in [0, rand_skip). Seeds are drawn from the calling thread's
// generator at set-up in Caffe's order: transformer (when it needs one), shuffle, skip.
// Images are loaded in Forward (no prefetch thread), decoded and transformed by decode_threads
// threads (io/prefetch_pool.hpp); the random words are drawn in item order, so the batches do not
// depend on the number of threads. The legacy transform fields of image_data_param are moved to
// transform_param by the net upgrade.
// Resuming (SaveDataState / RestoreDataState): the next line, the shuffled order of the list,
// the shuffle's and the transformer's generators and the bad-image counters. NumRecords: the
// lines of the list (of the shard).
// Errors: the list can't be read, is empty or has a line without label -> RuntimeError naming
// the file; an image that is missing or can't be read or decoded -> on_bad_record STOP (the
// default): RuntimeError naming its path; SKIP: the next line is used instead, with a warning
// the first few times and a count; rand_skip not smaller than the list, or new_height/new_width
// set alone -> ConfigError. No backward.
// shard_id / num_shards (crema): keep only the lines i (0-based) with i % num_shards == shard_id,
// before shuffling, as the Data layer's shards (one per process of a multi-process run).
// Params: image_data_param { source, root_folder, batch_size (default 1), shuffle, rand_skip,
// new_height, new_width, is_color (default true); crema-only: decode_threads (0: auto),
// on_bad_record (STOP or SKIP), shard_id (default 0), num_shards (default 1) }.
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "crema/layer.hpp"
#include "io/data_transformer.hpp"
#include "io/prefetch_pool.hpp"

namespace crema {

class ImageDataLayer final : public Layer {
 public:
  using Layer::Layer;
  ~ImageDataLayer() override;
  const char* type() const override { return "ImageData"; }
  // Device-neutral: images are decoded and transformed on the host by design (as Caffe); the
  // next layer's gpu_data() uploads the batch.
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Tops are shaped by Forward, from the batch it reads.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }

  // Images skipped (on_bad_record: SKIP) so far.
  int64_t skipped_images() const { return skipped_; }

  int64_t NumRecords() const override { return static_cast<int64_t>(lines_.size()); }
  int64_t BatchSize() const override { return batch_size_; }
  bool SaveDataState(DataLayerState* state) const override;
  void RestoreDataState(const DataLayerState& state) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  // One list line on its way into a batch.
  struct Item {
    std::string path;
    int label = 0;
    int line = 0;  // in the list (of the shard) as read, for messages
    std::vector<uint8_t> pixels;
    DataTransformer::Image image;
  };
  // Copies the current line into `item`.
  void Describe(Item* item) const;
  // Moves to the next line (back to the first, reshuffled with shuffle, after the last).
  void NextLine();
  // Decodes the image into item->pixels and item->image (RuntimeError naming the path);
  // thread-safe.
  void ReadImage(Item* item) const;
  // Applies on_bad_record to an image that failed with `error`.
  void OnBadImage(const std::exception_ptr& error);
  void ShuffleLines();

  std::vector<std::pair<std::string, int>> lines_;
  std::vector<int64_t> order_;  // order_[i]: the index of lines_[i] in the list as read
  int line_id_ = 0;
  int batch_size_ = 0;
  std::string source_, root_folder_;
  int new_height_ = 0, new_width_ = 0;
  bool is_color_ = true;
  bool shuffle_ = false;
  std::mt19937 shuffle_rng_;
  std::unique_ptr<DataTransformer> transformer_;
  std::string prefix_;  // ErrorPrefix(), for the decode threads
  bool skip_bad_ = false;
  int64_t skipped_ = 0, consecutive_bad_ = 0;
  std::vector<Item> items_;
  std::unique_ptr<WorkerPool> workers_;
};

}  // namespace crema
