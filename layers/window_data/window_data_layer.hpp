#pragma once
// WindowData: samples windows (boxes) of images for R-CNN-style detection training, as Caffe's
// WindowDataLayer. The window file (window_data_param.source) repeats, for each image:
//   # image_index          (0, 1, 2, ... in file order)
//   img_path               (root_folder is prepended)
//   channels height width  (channels must be 3: images are decoded as BGR)
//   num_windows
//   class_index overlap x1 y1 x2 y2     (num_windows lines; inclusive pixel corners)
// A window with overlap >= fg_threshold is foreground (its class_index must be > 0); one with
// overlap < bg_threshold is background (label forced to 0); others are dropped.
// Each batch holds batch_size - int(batch_size * fg_fraction) background windows, then the
// foreground ones, each drawn uniformly with replacement. A window is cut out of its image and
// warped (bilinear) to crop_size x crop_size; with context_pad > 0 or crop_mode "square" the
// box is first grown (to a square for "square") so that context_pad pixels of context surround
// it after warping; parts outside the image stay 0 and the rest is placed at the matching
// offset. mirror flips at random (with the padding). Output pixel = (pixel - mean) * scale, the
// mean being mean_file (indexed at the centred crop offset, as Caffe) or mean_value (one or one
// per channel), or none.
// Tops: data (batch_size x 3 x crop_size x crop_size), label (batch_size).
// Params: window_data_param { source, root_folder, batch_size, fg_threshold (0.5), bg_threshold
// (0.5), fg_fraction (0.25), context_pad (0), crop_mode ("warp" | "square"), cache_images
// (keep the encoded files in memory), scale (1) }, transform_param { crop_size (required),
// mirror, mean_file | mean_value, scale (1) }. Caffe reads only window_data_param.scale; crema
// multiplies it by transform_param.scale, so either works (and Caffe's legacy upgrade, which
// moves scale into transform_param, keeps its meaning).
// Random numbers: an mt19937 seeded at set-up from the calling thread's generator; per window
// one draw for the index (engine() % count), then one for the mirror (engine() % 2) when mirror
// is set. A seed is first drawn and dropped when Caffe's transformer would take one (mirror, or
// crop_size in TRAIN), so a given seed gives Caffe's windows.
// Images are loaded in Forward (no prefetch thread). Errors: the window file can't be read or is
// malformed, an image is missing or undecodable, a window lies outside its image ->
// RuntimeError naming the file; inconsistent parameters -> ConfigError. No backward.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class WindowDataLayer final : public Layer {
 public:
  // Device-neutral: images are decoded and cropped on the host by design (as Caffe); the next
  // layer's gpu_data() uploads the batch.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "WindowData"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  struct Window {
    int image = 0;  // index into images_
    int label = 0;
    float overlap = 0;
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  };
  struct Image {
    std::string path;
    int channels = 0, height = 0, width = 0;
    std::string encoded;  // the file's bytes, with cache_images
  };

  void ReadWindowFile();
  void ReadMean();
  template <typename T>
  void Sample(const Window& window, bool mirror, int item, T* top_data) const;

  std::string source_;
  std::vector<Image> images_;
  std::vector<Window> fg_windows_, bg_windows_;
  int batch_size_ = 0, crop_size_ = 0, context_pad_ = 0, channels_ = 3;
  bool square_ = false, mirror_ = false, cache_images_ = false;
  float fg_fraction_ = 0, scale_ = 1;
  std::vector<float> mean_;  // mean_file, C x H x W
  int mean_height_ = 0, mean_width_ = 0;
  std::vector<float> mean_values_;  // one per channel
  std::mt19937 rng_;
};

}  // namespace crema
