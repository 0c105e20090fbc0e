#pragma once
// The SSD branch's data augmentation for AnnotatedDatum records (the AnnotatedData layer): an
// 8-bit picture and its boxes go through, in SSD's order,
//   distort_param   photometric distortion (OpenCV): brightness (+delta, delta uniform in
//                   [-brightness_delta, brightness_delta]), contrast (x factor in [contrast_lower,
//                   contrast_upper]), saturation and hue (in OpenCV's 8-bit HSV: S x factor,
//                   H + delta, saturated), a random channel order; each applied with its own
//                   probability; contrast comes first (after brightness) or last, 50/50.
//   expand_param    with probability prob: a canvas ratio times the size, ratio uniform in
//                   [1, max_expand_ratio], filled with mean_value (0 without), the picture at a
//                   uniform random spot of it; boxes rescaled into the canvas.
//   batch_sampler   (annotated_data_param) GenerateBatchSamples: for each sampler up to
//                   max_trials random boxes (SampleBox) that satisfy its constraint, at most
//                   max_sample; one of all of them, uniformly, becomes the crop.
//   resize_param    with probability prob: WARP (to height x width), FIT_SMALL_SIZE (keeps the
//                   aspect ratio, the smaller side fits), FIT_LARGE_SIZE_AND_PAD (keeps it, the
//                   larger side fits, centred on a height x width canvas padded with pad_mode,
//                   pad_value); interpolation drawn uniformly among interp_mode (LINEAR without).
//   then DataTransformer's crop_size (random in TRAIN, centred in TEST), mirror, mean, scale.
// After each crop (the sampled box, the expansion canvas, the final window) the boxes are projected
// into it (ProjectBox): those outside dropped, the rest clipped to it; with
// transform_param.emit_constraint, first only the boxes that meet it are kept (CENTER: centre
// inside the crop; MIN_OVERLAP: more than emit_overlap of the box inside). Mirroring flips them.
// Differences from the SSD branch, all towards boxes that match the pixels: crops and the
// expansion canvas project the boxes through the pixel rectangle actually cut (SSD truncates
// the pixels but projects through the unrounded box); the padding of FIT_LARGE_SIZE_AND_PAD
// moves the boxes by the pixels actually added; a sample constraint holds when one ground-truth
// box meets all of its bounds (SSD's loop can mix bounds met by different boxes); the picture is
// not re-encoded as JPEG between steps (SSD does, losing quality).
// Random numbers: every draw of one item comes from a generator seeded with one word (Sample's
// `seed`), which the layer draws in item order, so the results depend on the seed only, not on
// the thread that runs the item. Parameters are checked by the layer (CREMA_CHECK_PARAM); here
// they are taken as valid.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "io/boxes.hpp"
#include "io/data_transformer.hpp"

namespace crema {

// 8-bit pixels, H x W x C interleaved (OpenCV's layout; BGR for 3 channels).
struct Picture {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
  uint8_t* at(int y, int x) {
    return pixels.data() + (static_cast<size_t>(y) * width + x) * channels;
  }
  const uint8_t* at(int y, int x) const {
    return pixels.data() + (static_cast<size_t>(y) * width + x) * channels;
  }
};

// One ground-truth box of a record, with the annotation it came from.
struct ObjectBox {
  int group_label = 0;
  int instance_id = 0;
  boxes::Box box;
  bool difficult = false;
};
std::vector<ObjectBox> ObjectBoxes(const AnnotatedDatum& record);

namespace augment {

// Uniform in [a, b) from one 32-bit word (a when b <= a).
float Uniform(std::mt19937* rng, float a, float b);

// Coverage of `a` by `b`: the area of their intersection over a's area (0 without area).
float Coverage(const boxes::Box& a, const boxes::Box& b);
// SSD's SampleBox: scale s uniform in [min_scale, max_scale], aspect ratio uniform in
// [max(min_aspect_ratio, s^2), min(max_aspect_ratio, 1 / s^2)] (so the box fits the image), width
// s sqrt(ar), height s / sqrt(ar), the top-left corner uniform where the box fits.
boxes::Box SampleBox(const Sampler& sampler, std::mt19937* rng);
// Whether some object box meets every bound the constraint gives (jaccard overlap with the
// sample, coverage of the sample by it, coverage of it by the sample); true without bounds.
bool SatisfySampleConstraint(const boxes::Box& sample, const std::vector<boxes::Box>& objects,
                             const SampleConstraint& constraint);
// The samples of every sampler with use_original_image, in sampler order.
std::vector<boxes::Box> GenerateBatchSamples(const std::vector<boxes::Box>& objects,
                                             const std::vector<BatchSampler>& samplers,
                                             std::mt19937* rng);
bool MeetEmitConstraint(const boxes::Box& crop, const boxes::Box& box,
                        const EmitConstraint& constraint);
// `box` in the coordinates of `crop` (whose [0, 1] square is the crop), clipped; false when it
// does not overlap the crop or nothing of it is left.
bool ProjectBox(const boxes::Box& crop, const boxes::Box& box, boxes::Box* projected);
// The objects that meet `emit` (when given) and project into `crop`, projected.
std::vector<ObjectBox> ProjectObjects(const std::vector<ObjectBox>& objects, const boxes::Box& crop,
                                      const EmitConstraint* emit);

// The pixel rectangle of a normalized box (clipped, at least one pixel) in a height x width
// picture, and the picture cut to it; returns the rectangle as a normalized box.
boxes::Box Crop(const Picture& picture, const boxes::Box& box, Picture* out);
// Mirrors boxes horizontally.
void Mirror(std::vector<ObjectBox>* objects);

// Whether this crema can run distortion and resizing (they need OpenCV).
bool HasOpenCv();
// Photometric distortion, in place (3-channel pictures; a 1-channel one gets brightness and
// contrast only).
void Distort(const DistortionParameter& param, std::mt19937* rng, Picture* picture);
// Expansion, in place; `fill` holds mean_value (empty, one, or one per channel).
void Expand(const ExpansionParameter& param, const std::vector<float>& fill,
            const EmitConstraint* emit, std::mt19937* rng, Picture* picture,
            std::vector<ObjectBox>* objects);
// Resizing, in place (the draw of prob and interp_mode included). ConfigError when pad_value
// holds neither one value nor one per channel.
void Resize(const ResizeParameter& param, std::mt19937* rng, Picture* picture,
            std::vector<ObjectBox>* objects);

}  // namespace augment

class AnnotatedTransformer {
 public:
  // ConfigError / RuntimeError as DataTransformer (mean_file, mean_value, force_*).
  AnnotatedTransformer(const TransformationParameter& param,
                       const AnnotatedDataParameter& data_param, Phase phase);

  // Whether any step draws random numbers (then the layer seeds and saves a generator).
  bool NeedsRandom() const;
  // Decoding of the record's Datum (DataTransformer::Decode: encoded or raw uint8), as a
  // Picture; RuntimeError naming `what` for float_data records.
  Picture Decode(const Datum& datum, std::vector<uint8_t>* pixels, const std::string& what) const;

  // One item after every step but the last (crop_size, mirror, mean, scale): the picture, its
  // boxes after all the steps, the words for the last step and the output's shape {1, C, H', W'}.
  // ConfigError naming `what` when crop or mean don't fit the picture.
  struct Sample {
    Picture picture;
    std::vector<ObjectBox> objects;
    DataTransformer::Draws draws;
    std::vector<int> shape;
  };
  Sample Apply(Picture picture, std::vector<ObjectBox> objects, uint32_t seed,
               const std::string& what) const;
  // The C x H' x W' values of the output.
  template <typename T>
  void Write(const Sample& sample, T* out) const;

 private:
  TransformationParameter param_;
  std::vector<BatchSampler> samplers_;
  Phase phase_;
  DataTransformer base_;
  std::vector<float> fill_;
};

}  // namespace crema
