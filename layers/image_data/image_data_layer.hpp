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
// Images are loaded in Forward (no prefetch thread). The legacy transform fields of
// image_data_param are moved to transform_param by the net upgrade.
// Errors: the list can't be read, is empty or has a line without label -> RuntimeError naming
// the file; an image that can't be read or decoded -> RuntimeError naming its path; rand_skip
// not smaller than the list, or new_height/new_width set alone -> ConfigError. No backward.
// Params: image_data_param { source, root_folder, batch_size (default 1), shuffle, rand_skip,
// new_height, new_width, is_color (default true) }.
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "crema/layer.hpp"
#include "io/data_transformer.hpp"

namespace crema {

class ImageDataLayer final : public Layer {
 public:
  using Layer::Layer;
  ~ImageDataLayer() override;
  const char* type() const override { return "ImageData"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  // Tops are shaped by Forward, from the batch it reads.
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  // Decodes line `index` into a Datum of raw C x H x W pixels (RuntimeError naming the path).
  void ReadImage(int index, Datum* datum) const;
  void ShuffleLines();

  std::vector<std::pair<std::string, int>> lines_;
  int line_id_ = 0;
  int batch_size_ = 0;
  std::string source_, root_folder_;
  int new_height_ = 0, new_width_ = 0;
  bool is_color_ = true;
  bool shuffle_ = false;
  std::mt19937 shuffle_rng_;
  std::unique_ptr<DataTransformer> transformer_;
};

}  // namespace crema
