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
// For decoding on several threads the work splits in three: Decode and Transform(Image, Draws)
// are const and may run concurrently (each with its own pixel buffer); NextDraws takes one item's
// raw random words from the generator, in Caffe's order, and is called sequentially in item order.
// The number of words an item takes depends only on the parameters (not on the image size), so
// drawing them ahead gives the same choices as drawing them while transforming.
// Errors: inconsistent parameters and mean or crop sizes that don't fit the image -> ConfigError;
// a corrupt record -> RuntimeError naming it (the `what` argument, e.g. "record 00000042 of X").
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto.hpp"
#include "io/input_checks.hpp"
#include "io/prefetch_pool.hpp"

namespace crema {

class DataTransformer {
 public:
  // Reads mean_file (RuntimeError when it can't be read) and checks the parameters.
  DataTransformer(const TransformationParameter& param, Phase phase);

  // Whether Transform draws random numbers (mirror, or a crop in TRAIN); Caffe seeds only then.
  bool NeedsRandom() const;
  void InitRand(uint32_t seed) { rng_.seed(seed); }
  // The generator's state in its text form, and back (for resuming: RuntimeError when `state`
  // is not one).
  std::string RandState() const;
  void SetRandState(const std::string& state);

  // A record's pixels, uint8 or float, pointing into the Datum or a pixel buffer: C x H x W
  // planes (Datum's layout), or H x W x C interleaved (OpenCV's, for decoded images).
  struct Image {
    int channels = 0, height = 0, width = 0;
    const uint8_t* bytes = nullptr;
    const float* floats = nullptr;
    bool interleaved = false;
  };
  // The raw random words of one item (mirror, row offset, column offset, as needed).
  struct Draws {
    uint32_t words[3] = {0, 0, 0};
  };
  // Checks the record and decodes an encoded one into *pixels; RuntimeError naming `what` for a
  // corrupt record or an undecodable image.
  Image Decode(const Datum& datum, std::vector<uint8_t>* pixels, const std::string& what) const;
  // {1, C, H', W'} of a decoded image; ConfigError when crop or mean don't fit it.
  std::vector<int> ShapeOf(const Image& image, const std::string& what = "") const;
  Draws NextDraws();
  // The part of a height x width image that Transform writes with `draws`, and whether it is
  // mirrored (for AnnotatedData, which moves its boxes with the pixels).
  struct Window {
    bool mirror = false;
    int h_off = 0, w_off = 0, height = 0, width = 0;
  };
  Window Choose(int height, int width, const Draws& draws) const;
  // Writes the C x H' x W' values of a decoded image (checked by ShapeOf) to `out`.
  template <typename T>
  void Transform(const Image& image, const Draws& draws, T* out) const;
  // A batch on `pool`: reshapes `blob` to N x C x H' x W' from images[0] (as Caffe shapes a batch
  // from its first record), draws the random words in item order, then transforms image k into
  // item k. RuntimeError naming what(k) when image k's size differs from the first's.
  void TransformBatch(const std::vector<const Image*>& images,
                      const std::function<std::string(int)>& what, WorkerPool* pool, Blob* blob);

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
  void CheckFits(const Image& image, const std::string& what) const;

  TransformationParameter param_;
  Phase phase_;
  std::vector<double> mean_;  // mean_file values, C x H x W
  int mean_channels_ = 0, mean_height_ = 0, mean_width_ = 0;
  std::vector<double> mean_values_;
  std::vector<uint8_t> decoded_;  // CHW pixels of the last encoded record
  std::mt19937 rng_;
};

// Encodes C x H x W uint8 planes (BGR for 3 channels, as decoding gives them) as `extension`
// (".jpg", ".png") with OpenCV, the inverse of decoding an encoded Datum (for tools and tests);
// RuntimeError when OpenCV fails or this crema was built without it.
std::string EncodeImage(const uint8_t* planes, int channels, int height, int width,
                        const std::string& extension, int jpeg_quality = 95);

// Caffe's CVMatToDatum: `rows` x `cols` pixels of `channels` interleaved uint8 values (row r at
// pixels + r * row_bytes, as an OpenCV Mat holds them) become raw C x H x W planes in `datum`:
// data, channels, height and width set, float_data cleared, encoded false; the label is kept.
void InterleavedToDatum(const uint8_t* pixels, size_t row_bytes, int channels, int rows, int cols,
                        Datum* datum);

// Parses a serialized Datum; RuntimeError "<what>: not a valid Datum ..." otherwise.
void ParseDatum(const std::string& bytes, Datum* datum, const std::string& what);

}  // namespace crema
