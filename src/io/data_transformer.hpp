#pragma once
// Caffe's DataTransformer for Datum records: out = (pixel - mean) * scale over a crop, maybe
// mirrored. Pixels come from `data` (raw uint8, C x H x W), `float_data`, or an encoded JPEG/PNG
// in `data` (decoded with OpenCV when built with it: BGR as Caffe; force_color makes 3 channels,
// force_gray 1). The mean is mean_file (a BlobProto, 1 x C x H x W, indexed at the uncropped
// position as Caffe) or mean_value (one for all channels or one per channel).
// crop_size: a random window in TRAIN, the centred one in TEST. mirror: a random horizontal flip
// (in both phases, as Caffe). Random numbers come from the transformer's own mt19937 seeded by
// InitRand; Caffe draws Rand(2) for the mirror, then the row offset, then the column offset, each
// as engine() % n, so a given seed gives Caffe's choices.
// Errors: inconsistent parameters and mean or crop sizes that don't fit the image -> ConfigError;
// a corrupt record -> RuntimeError naming it (the `what` argument, e.g. "record 00000042 of X").
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto.hpp"

namespace crema {

class DataTransformer {
 public:
  // Reads mean_file (RuntimeError when it can't be read) and checks the parameters.
  DataTransformer(const TransformationParameter& param, Phase phase);

  // Whether Transform draws random numbers (mirror, or a crop in TRAIN); Caffe seeds only then.
  bool NeedsRandom() const;
  void InitRand(uint32_t seed) { rng_.seed(seed); }

  // Shape of one transformed record: {1, C, H', W'} (H', W' = crop_size when cropping).
  std::vector<int> InferBlobShape(const Datum& datum, const std::string& what = "");
  // Writes C x H' x W' values to `out`; the record must have the shape InferBlobShape gives.
  template <typename T>
  void Transform(const Datum& datum, T* out, const std::string& what = "");
  // Writes item `index` of `blob` (N x C x H' x W', float or double); RuntimeError when the
  // record's shape differs from the blob's.
  void Transform(const Datum& datum, Blob* blob, int index, const std::string& what = "");

  const TransformationParameter& param() const { return param_; }

 private:
  // A record's pixels as C x H x W: uint8 or float, pointing into the Datum or decoded_.
  struct Image {
    int channels = 0, height = 0, width = 0;
    const uint8_t* bytes = nullptr;
    const float* floats = nullptr;
  };
  Image Prepare(const Datum& datum, const std::string& what);
  void CheckFits(const Image& image, const std::string& what) const;
  template <typename T>
  void TransformImage(const Image& image, T* out);
  int Rand(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }

  TransformationParameter param_;
  Phase phase_;
  std::vector<double> mean_;  // mean_file values, C x H x W
  int mean_channels_ = 0, mean_height_ = 0, mean_width_ = 0;
  std::vector<double> mean_values_;
  std::vector<uint8_t> decoded_;  // CHW pixels of the last encoded record
  std::mt19937 rng_;
};

// Parses a serialized Datum; RuntimeError "<what>: not a valid Datum ..." otherwise.
void ParseDatum(const std::string& bytes, Datum* datum, const std::string& what);

}  // namespace crema
