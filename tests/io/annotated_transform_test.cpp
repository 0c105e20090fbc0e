#include "io/annotated_transform.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"

namespace crema {
namespace {

using boxes::Box;

Box B(float xmin, float ymin, float xmax, float ymax) { return Box{xmin, ymin, xmax, ymax}; }

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

void ExpectBox(const Box& actual, const Box& expected, float tolerance = 1e-6f) {
  EXPECT_NEAR(actual.xmin, expected.xmin, tolerance);
  EXPECT_NEAR(actual.ymin, expected.ymin, tolerance);
  EXPECT_NEAR(actual.xmax, expected.xmax, tolerance);
  EXPECT_NEAR(actual.ymax, expected.ymax, tolerance);
}

// A height x width x channels picture whose pixel (y, x, c) is Value(y, x, c).
uint8_t Value(int y, int x, int c) { return static_cast<uint8_t>((y * 31 + x * 7 + c * 50) % 256); }
Picture MakePicture(int height, int width, int channels) {
  Picture picture;
  picture.height = height;
  picture.width = width;
  picture.channels = channels;
  picture.pixels.resize(static_cast<size_t>(height) * width * channels);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) picture.at(y, x)[c] = Value(y, x, c);
  return picture;
}

TEST(AnnotatedTransformTest, SampleBoxKeepsScaleAndAspectInRange) {
  const Sampler sampler =
      Parse<Sampler>("min_scale: 0.3 max_scale: 0.9 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0");
  std::mt19937 rng(7);
  float smallest = 1, largest = 0;
  for (int i = 0; i < 2000; ++i) {
    const Box box = augment::SampleBox(sampler, &rng);
    const float width = box.xmax - box.xmin, height = box.ymax - box.ymin;
    const float scale = std::sqrt(width * height), aspect = width / height;
    ASSERT_GE(box.xmin, 0);
    ASSERT_GE(box.ymin, 0);
    ASSERT_LE(box.xmax, 1 + 1e-6f);
    ASSERT_LE(box.ymax, 1 + 1e-6f);
    ASSERT_GE(scale, 0.3f - 1e-4f);
    ASSERT_LE(scale, 0.9f + 1e-4f);
    // SSD's clamp: the aspect ratio lies in [max(0.5, s^2), min(2, 1 / s^2)].
    ASSERT_GE(aspect, std::max(0.5f, scale * scale) - 1e-3f);
    ASSERT_LE(aspect, std::min(2.f, 1 / (scale * scale)) + 1e-3f);
    smallest = std::min(smallest, scale);
    largest = std::max(largest, scale);
  }
  EXPECT_LT(smallest, 0.35f);
  EXPECT_GT(largest, 0.85f);
  // The defaults sample the whole image.
  ExpectBox(augment::SampleBox(Sampler(), &rng), B(0, 0, 1, 1));
}

TEST(AnnotatedTransformTest, SampleConstraints) {
  const Box sample = B(0, 0, 0.5, 0.5);
  const Box same = sample;                    // jaccard 1, both coverages 1
  const Box inner = B(0.1, 0.1, 0.3, 0.3);    // jaccard 0.16, sample coverage 0.16, object 1
  const Box shifted = B(0.25, 0, 0.75, 0.5);  // jaccard 1/3, coverages 0.5
  const Box outside = B(0.6, 0.6, 0.9, 0.9);  // no overlap
  using augment::SatisfySampleConstraint;
  EXPECT_TRUE(SatisfySampleConstraint(sample, {}, SampleConstraint()));
  EXPECT_TRUE(SatisfySampleConstraint(sample, {outside}, SampleConstraint()));
  const auto constraint = [](const std::string& text) { return Parse<SampleConstraint>(text); };
  EXPECT_FALSE(SatisfySampleConstraint(sample, {}, constraint("min_jaccard_overlap: 0.1")));
  EXPECT_TRUE(
      SatisfySampleConstraint(sample, {outside, same}, constraint("min_jaccard_overlap: 0.9")));
  EXPECT_FALSE(
      SatisfySampleConstraint(sample, {outside, shifted}, constraint("min_jaccard_overlap: 0.5")));
  EXPECT_TRUE(SatisfySampleConstraint(sample, {shifted}, constraint("min_jaccard_overlap: 0.3")));
  EXPECT_FALSE(SatisfySampleConstraint(sample, {same}, constraint("max_jaccard_overlap: 0.9")));
  EXPECT_TRUE(SatisfySampleConstraint(sample, {inner}, constraint("min_object_coverage: 1")));
  EXPECT_FALSE(SatisfySampleConstraint(sample, {inner}, constraint("min_sample_coverage: 0.5")));
  EXPECT_TRUE(SatisfySampleConstraint(
      sample, {shifted}, constraint("min_sample_coverage: 0.5 max_sample_coverage: 0.5")));
  // One box must meet every bound: `inner` meets the object coverage, `shifted` the jaccard
  // overlap, neither both.
  const SampleConstraint both = constraint("min_jaccard_overlap: 0.3 min_object_coverage: 0.9");
  EXPECT_FALSE(SatisfySampleConstraint(sample, {inner, shifted}, both));
  EXPECT_TRUE(SatisfySampleConstraint(sample, {inner, shifted, same}, both));
}

TEST(AnnotatedTransformTest, GenerateBatchSamples) {
  const std::vector<Box> objects = {B(0.2, 0.2, 0.4, 0.4)};
  const auto samplers = [](const std::string& text) {
    return std::vector<BatchSampler>{Parse<BatchSampler>(text)};
  };
  std::mt19937 rng(3);
  // The default sampler: the whole image, once per trial.
  EXPECT_EQ(augment::GenerateBatchSamples(objects, {BatchSampler()}, &rng).size(), 100u);
  EXPECT_EQ(augment::GenerateBatchSamples(objects, samplers("max_sample: 1"), &rng).size(), 1u);
  EXPECT_EQ(augment::GenerateBatchSamples(objects, samplers("max_trials: 7"), &rng).size(), 7u);
  EXPECT_TRUE(
      augment::GenerateBatchSamples(objects, samplers("use_original_image: false"), &rng).empty());
  // An overlap no box of this size can have with the sampled 0.3-scale boxes.
  EXPECT_TRUE(
      augment::GenerateBatchSamples(objects,
                                    samplers("sampler { min_scale: 0.9 max_scale: 1 } "
                                             "sample_constraint { min_jaccard_overlap: 0.5 }"),
                                    &rng)
          .empty());
  const SampleConstraint constraint = Parse<SampleConstraint>("min_jaccard_overlap: 0.3");
  const std::vector<Box> samples = augment::GenerateBatchSamples(
      objects,
      samplers("sampler { min_scale: 0.1 max_scale: 0.5 min_aspect_ratio: 0.5 "
               "max_aspect_ratio: 2 } sample_constraint { min_jaccard_overlap: 0.3 } "
               "max_sample: 5 max_trials: 1000"),
      &rng);
  EXPECT_EQ(samples.size(), 5u);
  for (const Box& sample : samples)
    EXPECT_TRUE(augment::SatisfySampleConstraint(sample, objects, constraint));
  // Two samplers: their samples in sampler order.
  std::vector<BatchSampler> two = {Parse<BatchSampler>("max_sample: 1"),
                                   Parse<BatchSampler>("max_sample: 2")};
  EXPECT_EQ(augment::GenerateBatchSamples(objects, two, &rng).size(), 3u);
}

TEST(AnnotatedTransformTest, ProjectAndEmit) {
  Box out;
  ASSERT_TRUE(augment::ProjectBox(B(0.5, 0, 1, 1), B(0.6, 0.2, 0.8, 0.4), &out));
  ExpectBox(out, B(0.2, 0.2, 0.6, 0.4));
  ASSERT_TRUE(augment::ProjectBox(B(0.5, 0.5, 1, 1), B(0.25, 0.25, 0.75, 0.75), &out));
  ExpectBox(out, B(0, 0, 0.5, 0.5));  // clipped
  EXPECT_FALSE(augment::ProjectBox(B(0.5, 0.5, 1, 1), B(0, 0, 0.5, 0.4), &out));
  // A frame larger than the image (expansion): boxes shrink into it.
  ASSERT_TRUE(augment::ProjectBox(B(-1, 0, 1, 2), B(0, 0, 1, 1), &out));
  ExpectBox(out, B(0.5, 0, 1, 0.5));

  const EmitConstraint center = Parse<EmitConstraint>("emit_type: CENTER");
  const EmitConstraint overlap = Parse<EmitConstraint>("emit_type: MIN_OVERLAP emit_overlap: 0.5");
  const Box crop = B(0.5, 0, 1, 1);
  EXPECT_TRUE(augment::MeetEmitConstraint(crop, B(0.4, 0, 0.7, 0.5), center));
  EXPECT_FALSE(augment::MeetEmitConstraint(crop, B(0.2, 0, 0.7, 0.5), center));
  EXPECT_TRUE(augment::MeetEmitConstraint(crop, B(0.3, 0, 0.9, 0.5), overlap));   // 2/3 inside
  EXPECT_FALSE(augment::MeetEmitConstraint(crop, B(0.1, 0, 0.7, 0.5), overlap));  // 1/3 inside

  std::vector<ObjectBox> objects(3);
  objects[0].box = B(0.4, 0, 0.7, 0.5);  // centre inside
  objects[0].instance_id = 1;
  objects[1].box = B(0.2, 0, 0.7, 0.5);  // centre outside, overlaps
  objects[2].box = B(0, 0, 0.4, 0.5);    // outside
  objects[2].instance_id = 3;
  EXPECT_EQ(augment::ProjectObjects(objects, crop, nullptr).size(), 2u);
  const std::vector<ObjectBox> kept = augment::ProjectObjects(objects, crop, &center);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].instance_id, 1);
  ExpectBox(kept[0].box, B(0, 0, 0.4, 0.5));
  std::vector<ObjectBox> mirrored = kept;
  augment::Mirror(&mirrored);
  ExpectBox(mirrored[0].box, B(0.6, 0, 1, 0.5));
}

TEST(AnnotatedTransformTest, CropCutsThePixelsOfTheBox) {
  const Picture picture = MakePicture(10, 20, 3);
  Picture out;
  const Box cut = augment::Crop(picture, B(0.25, 0.3, 0.75, 0.9), &out);
  ASSERT_EQ(out.height, 6);
  ASSERT_EQ(out.width, 10);
  ExpectBox(cut, B(0.25, 0.3, 0.75, 0.9));
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 10; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(out.at(y, x)[c], Value(y + 3, x + 5, c));
  // Truncated corners; the returned box is the one actually cut.
  const Box odd = augment::Crop(picture, B(0.12, 0.05, 0.56, 1.3), &out);
  EXPECT_EQ(out.width, 9);    // columns 2 (0.12 * 20 = 2.4) to 11 (0.56 * 20 = 11.2)
  EXPECT_EQ(out.height, 10);  // rows 0 to 10 (clipped)
  ExpectBox(odd, B(2 / 20.f, 0, 11 / 20.f, 1));
  EXPECT_EQ(out.at(0, 0)[1], Value(0, 2, 1));
  // A box thinner than a pixel still cuts one.
  augment::Crop(picture, B(0.5, 0.5, 0.51, 0.52), &out);
  EXPECT_EQ(out.width, 1);
  EXPECT_EQ(out.height, 1);
  EXPECT_EQ(out.at(0, 0)[0], Value(5, 10, 0));
}

TEST(AnnotatedTransformTest, ExpandPlacesThePictureOnAMeanCanvas) {
  const ExpansionParameter param = Parse<ExpansionParameter>("prob: 1 max_expand_ratio: 3");
  std::set<int> sizes;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    std::mt19937 rng(seed);
    Picture picture = MakePicture(8, 12, 3);
    std::vector<ObjectBox> objects(1);
    objects[0].box = B(0, 0, 1, 1);  // the whole picture
    augment::Expand(param, {10, 20, 30}, nullptr, &rng, &picture, &objects);
    ASSERT_GE(picture.height, 8);
    ASSERT_LE(picture.height, 24);
    sizes.insert(picture.width);
    ASSERT_EQ(objects.size(), 1u);
    // The box is where the original pixels went; everything else is the mean.
    const Box& box = objects[0].box;
    const int x0 = static_cast<int>(std::lround(box.xmin * picture.width));
    const int y0 = static_cast<int>(std::lround(box.ymin * picture.height));
    EXPECT_NEAR((box.xmax - box.xmin) * picture.width, 12, 1e-3);
    EXPECT_NEAR((box.ymax - box.ymin) * picture.height, 8, 1e-3);
    for (int y = 0; y < picture.height; ++y)
      for (int x = 0; x < picture.width; ++x)
        for (int c = 0; c < 3; ++c) {
          const bool inside = y >= y0 && y < y0 + 8 && x >= x0 && x < x0 + 12;
          ASSERT_EQ(picture.at(y, x)[c], inside ? Value(y - y0, x - x0, c) : 10 * (c + 1))
              << seed << " " << y << " " << x;
        }
  }
  EXPECT_GT(sizes.size(), 3u);
  // prob 0: nothing changes.
  std::mt19937 rng(1);
  Picture picture = MakePicture(8, 12, 3);
  std::vector<ObjectBox> objects(1);
  augment::Expand(Parse<ExpansionParameter>("prob: 0 max_expand_ratio: 3"), {}, nullptr, &rng,
                  &picture, &objects);
  EXPECT_EQ(picture.pixels, MakePicture(8, 12, 3).pixels);
}

TEST(AnnotatedTransformTest, DistortWithZeroProbabilitiesIsIdentity) {
  if (!augment::HasOpenCv()) GTEST_SKIP() << "built without OpenCV";
  const DistortionParameter param = Parse<DistortionParameter>(
      "brightness_prob: 0 brightness_delta: 32 contrast_prob: 0 contrast_lower: 0.5 "
      "contrast_upper: 1.5 hue_prob: 0 hue_delta: 18 saturation_prob: 0 saturation_lower: 0.5 "
      "saturation_upper: 1.5 random_order_prob: 0");
  for (uint32_t seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    Picture picture = MakePicture(9, 7, 3);
    augment::Distort(param, &rng, &picture);
    EXPECT_EQ(picture.height, 9);
    EXPECT_EQ(picture.width, 7);
    EXPECT_EQ(picture.pixels, MakePicture(9, 7, 3).pixels);
  }
}

TEST(AnnotatedTransformTest, DistortSteps) {
  if (!augment::HasOpenCv()) GTEST_SKIP() << "built without OpenCV";
  const Picture original = MakePicture(9, 7, 3);
  {
    // Brightness: one delta for every value, saturated at 0 and 255.
    std::mt19937 rng(5);
    Picture picture = original;
    augment::Distort(Parse<DistortionParameter>("brightness_prob: 1 brightness_delta: 40"), &rng,
                     &picture);
    std::set<int> deltas;
    for (size_t i = 0; i < picture.pixels.size(); ++i)
      if (original.pixels[i] > 40 && original.pixels[i] < 215)
        deltas.insert(picture.pixels[i] - original.pixels[i]);
    ASSERT_EQ(deltas.size(), 1u);
    EXPECT_LE(std::abs(*deltas.begin()), 40);
  }
  {
    // Contrast with a fixed factor 2.
    std::mt19937 rng(5);
    Picture picture = original;
    augment::Distort(
        Parse<DistortionParameter>("contrast_prob: 1 contrast_lower: 2 contrast_upper: 2"), &rng,
        &picture);
    for (size_t i = 0; i < picture.pixels.size(); ++i)
      ASSERT_EQ(picture.pixels[i], std::min(255, 2 * original.pixels[i]));
  }
  {
    // Channel order: every pixel's channels permuted the same way.
    bool permuted = false;
    for (uint32_t seed = 0; seed < 6; ++seed) {
      std::mt19937 rng(seed);
      Picture picture = original;
      augment::Distort(Parse<DistortionParameter>("random_order_prob: 1"), &rng, &picture);
      int order[3];
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < 3; ++k)
          if (picture.at(0, 1)[c] == original.at(0, 1)[k]) order[c] = k;
      for (int y = 0; y < 9; ++y)
        for (int x = 0; x < 7; ++x)
          for (int c = 0; c < 3; ++c) ASSERT_EQ(picture.at(y, x)[c], original.at(y, x)[order[c]]);
      permuted = permuted || order[0] != 0 || order[1] != 1;
    }
    EXPECT_TRUE(permuted);
  }
  {
    // Saturation 0 makes grey pixels (all channels equal, up to HSV rounding).
    std::mt19937 rng(5);
    Picture picture = original;
    augment::Distort(
        Parse<DistortionParameter>("saturation_prob: 1 saturation_lower: 0 saturation_upper: 0"),
        &rng, &picture);
    for (int y = 0; y < 9; ++y)
      for (int x = 0; x < 7; ++x) {
        const uint8_t* p = picture.at(y, x);
        ASSERT_LE(std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}), 1);
      }
  }
}

TEST(AnnotatedTransformTest, ResizeModes) {
  if (!augment::HasOpenCv()) GTEST_SKIP() << "built without OpenCV";
  std::mt19937 rng(1);
  std::vector<ObjectBox> objects(1);
  objects[0].box = B(0.25, 0.5, 0.75, 1);
  {
    Picture picture = MakePicture(10, 20, 3);
    std::vector<ObjectBox> moved = objects;
    augment::Resize(Parse<ResizeParameter>("resize_mode: WARP height: 6 width: 9"), &rng, &picture,
                    &moved);
    EXPECT_EQ(picture.height, 6);
    EXPECT_EQ(picture.width, 9);
    ExpectBox(moved[0].box, objects[0].box);
  }
  {
    Picture picture = MakePicture(10, 20, 3);
    std::vector<ObjectBox> moved = objects;
    augment::Resize(Parse<ResizeParameter>("resize_mode: FIT_SMALL_SIZE height: 16 width: 16"),
                    &rng, &picture, &moved);
    EXPECT_EQ(picture.height, 16);
    EXPECT_EQ(picture.width, 32);
    ExpectBox(moved[0].box, objects[0].box);
  }
  {
    // 20 x 10 into 16 x 16: scaled to 16 x 8, 4 rows of padding above and below.
    Picture picture = MakePicture(10, 20, 3);
    std::vector<ObjectBox> moved = objects;
    augment::Resize(Parse<ResizeParameter>("resize_mode: FIT_LARGE_SIZE_AND_PAD height: 16 "
                                           "width: 16 pad_value: 7 interp_mode: NEAREST"),
                    &rng, &picture, &moved);
    ASSERT_EQ(picture.height, 16);
    ASSERT_EQ(picture.width, 16);
    ExpectBox(moved[0].box, B(0.25, 0.5, 0.75, 0.75));
    for (int x = 0; x < 16; ++x)
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(picture.at(0, x)[c], 7);
        EXPECT_EQ(picture.at(3, x)[c], 7);
        EXPECT_EQ(picture.at(12, x)[c], 7);
        EXPECT_EQ(picture.at(15, x)[c], 7);
      }
    // Nearest neighbour: the top-left pixel of the content is the original's.
    EXPECT_EQ(picture.at(4, 0)[2], Value(0, 0, 2));
    std::vector<ObjectBox> none = objects;
    Picture grey = MakePicture(10, 20, 1);
    EXPECT_THROW(augment::Resize(Parse<ResizeParameter>("resize_mode: FIT_LARGE_SIZE_AND_PAD "
                                                        "height: 16 width: 16 pad_value: 1 "
                                                        "pad_value: 2"),
                                 &rng, &grey, &none),
                 ConfigError);
  }
}

TEST(AnnotatedTransformTest, ApplyIsAFunctionOfTheSeed) {
  const TransformationParameter param = Parse<TransformationParameter>(
      "mirror: true mean_value: 5 expand_param { prob: 0.5 max_expand_ratio: 2 } "
      "emit_constraint { emit_type: CENTER }");
  const AnnotatedDataParameter data_param = Parse<AnnotatedDataParameter>(
      "batch_sampler { sampler { min_scale: 0.3 max_scale: 1 min_aspect_ratio: 0.5 "
      "max_aspect_ratio: 2 } sample_constraint { min_jaccard_overlap: 0.1 } max_sample: 1 "
      "max_trials: 50 }");
  const AnnotatedTransformer transformer(param, data_param, TRAIN);
  EXPECT_TRUE(transformer.NeedsRandom());
  std::vector<ObjectBox> objects(1);
  objects[0].box = B(0.2, 0.3, 0.6, 0.7);
  std::set<std::vector<int>> shapes;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto first = transformer.Apply(MakePicture(20, 30, 3), objects, seed, "x");
    const auto again = transformer.Apply(MakePicture(20, 30, 3), objects, seed, "x");
    EXPECT_EQ(first.picture.pixels, again.picture.pixels);
    EXPECT_EQ(first.shape, again.shape);
    ASSERT_EQ(first.objects.size(), again.objects.size());
    for (size_t i = 0; i < first.objects.size(); ++i)
      ExpectBox(first.objects[i].box, again.objects[i].box, 0);
    shapes.insert(first.shape);
  }
  EXPECT_GT(shapes.size(), 5u);
  EXPECT_FALSE(AnnotatedTransformer(TransformationParameter(), AnnotatedDataParameter(), TRAIN)
                   .NeedsRandom());
}

}  // namespace
}  // namespace crema
