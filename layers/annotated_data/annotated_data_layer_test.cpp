#include "layers/annotated_data/annotated_data_layer.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/layer_registry.hpp"
#include "io/annotated_transform.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "support/requires.hpp"

namespace crema {
namespace {

constexpr int kH = 24, kW = 32;
constexpr uint8_t kDark = 20, kBright = 240;

// A record: a dark kH x kW picture with bright rectangles exactly where its boxes say (pixel
// rectangles [x0, x1) x [y0, y1)), one group per rectangle (label 1 + its index), instance id
// 10 + its index.
struct Rect {
  int x0, y0, x1, y1;
};
struct Record {
  std::vector<Rect> rects;
  int label = 0;
  bool typed = true;
  bool corrupt = false;
};

std::string Key(int i) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08d", i);
  return buffer;
}

std::vector<uint8_t> Planes(const Record& record) {
  std::vector<uint8_t> planes(3 * kH * kW, kDark);
  for (const Rect& r : record.rects)
    for (int c = 0; c < 3; ++c)
      for (int y = r.y0; y < r.y1; ++y)
        for (int x = r.x0; x < r.x1; ++x) planes[(c * kH + y) * kW + x] = kBright;
  return planes;
}

std::string WriteDb(const std::string& name, const std::vector<Record>& records, bool encode) {
  const std::string path = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(path);
  auto db = db::OpenDB(db::Backend::kLmdb, path, db::Mode::kNew);
  auto txn = db->NewTransaction();
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& record = records[i];
    if (record.corrupt) {
      txn->Put(Key(static_cast<int>(i)), "\xff\xff\xff not a record");
      continue;
    }
    AnnotatedDatum annotated;
    Datum* datum = annotated.mutable_datum();
    const std::vector<uint8_t> planes = Planes(record);
    if (encode) {
      datum->set_data(EncodeImage(planes.data(), 3, kH, kW, ".png"));
      datum->set_encoded(true);
    } else {
      datum->set_channels(3);
      datum->set_height(kH);
      datum->set_width(kW);
      datum->set_data(std::string(planes.begin(), planes.end()));
    }
    datum->set_label(record.label);
    if (record.typed) annotated.set_type(AnnotatedDatum::BBOX);
    for (size_t k = 0; k < record.rects.size(); ++k) {
      const Rect& r = record.rects[k];
      AnnotationGroup* group = annotated.add_annotation_group();
      group->set_group_label(1 + static_cast<int>(k));
      Annotation* annotation = group->add_annotation();
      annotation->set_instance_id(10 + static_cast<int>(k));
      NormalizedBBox* box = annotation->mutable_bbox();
      box->set_xmin(static_cast<float>(r.x0) / kW);
      box->set_ymin(static_cast<float>(r.y0) / kH);
      box->set_xmax(static_cast<float>(r.x1) / kW);
      box->set_ymax(static_cast<float>(r.y1) / kH);
      box->set_difficult(k == 1);
    }
    txn->Put(Key(static_cast<int>(i)), annotated.SerializeAsString());
  }
  txn->Commit();
  return path;
}

// Records with one or two rectangles at varied spots.
std::vector<Record> Objects(int n) {
  std::vector<Record> records;
  for (int i = 0; i < n; ++i) {
    Record record;
    record.label = 100 + i;
    const int x = 2 + (i * 5) % 14, y = 2 + (i * 3) % 10;
    record.rects.push_back({x, y, x + 10, y + 8});
    if (i % 2 == 1) record.rects.push_back({22, 14, 30, 22});
    records.push_back(record);
  }
  return records;
}

struct Harness {
  explicit Harness(const std::string& text, Phase phase = TRAIN) {
    LayerParameter param;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
    param.set_phase(phase);
    layer = LayerRegistry::Create(param);
  }
  void SetUp() { layer->SetUp({}, top()); }
  void Forward() { layer->Forward({}, top()); }
  BlobVec top() { return {&data, &label}; }
  std::unique_ptr<Layer> layer;
  Blob data, label;
};

std::string Param(const std::string& source, int batch, const std::string& transform = "",
                  const std::string& annotated = "", const std::string& data_extra = "") {
  return "name: 'data' type: 'AnnotatedData' top: 'data' top: 'label' data_param { source: '" +
         source + "' batch_size: " + std::to_string(batch) + " backend: LMDB " + data_extra +
         "} transform_param { " + transform + " } annotated_data_param { " + annotated + " }";
}

struct Row {
  int item, group, instance;
  float xmin, ymin, xmax, ymax;
  int difficult;
};
std::vector<Row> Rows(const Blob& label) {
  EXPECT_EQ(label.num_axes(), 4);
  EXPECT_EQ(label.shape(3), 8);
  std::vector<Row> rows;
  for (int r = 0; r < label.shape(2); ++r) {
    const auto at = [&](int k) { return label.data_at(r * 8 + k); };
    rows.push_back({static_cast<int>(at(0)), static_cast<int>(at(1)), static_cast<int>(at(2)),
                    static_cast<float>(at(3)), static_cast<float>(at(4)), static_cast<float>(at(5)),
                    static_cast<float>(at(6)), static_cast<int>(at(7))});
  }
  return rows;
}

TEST(AnnotatedDataLayerTest, LabelLayoutAndPixelsWithoutAugmentation) {
  const std::vector<Record> records = Objects(5);
  for (bool encode : {false, true}) {
    if (encode && !augment::HasOpenCv()) continue;  // encoded records need OpenCV
    const std::string source = WriteDb(encode ? "plain_png" : "plain_raw", records, encode);
    Harness h(Param(source, 3, "scale: 0.5"), TEST);
    h.SetUp();
    EXPECT_EQ(h.data.shape(), (std::vector<int>{3, 3, kH, kW}));
    for (int b = 0; b < 3; ++b) {
      h.Forward();
      ASSERT_EQ(h.data.shape(), (std::vector<int>{3, 3, kH, kW}));
      std::vector<Row> expected;
      for (int k = 0; k < 3; ++k) {
        const Record& record = records[(b * 3 + k) % 5];
        const std::vector<uint8_t> planes = Planes(record);
        for (size_t i = 0; i < planes.size(); ++i)
          ASSERT_EQ(h.data.data_at(k * planes.size() + i), planes[i] * 0.5) << b << " " << k;
        for (size_t r = 0; r < record.rects.size(); ++r) {
          const Rect& rect = record.rects[r];
          expected.push_back({k, 1 + static_cast<int>(r), 10 + static_cast<int>(r),
                              static_cast<float>(rect.x0) / kW, static_cast<float>(rect.y0) / kH,
                              static_cast<float>(rect.x1) / kW, static_cast<float>(rect.y1) / kH,
                              r == 1 ? 1 : 0});
        }
      }
      const std::vector<Row> rows = Rows(h.label);
      ASSERT_EQ(rows.size(), expected.size());
      for (size_t r = 0; r < rows.size(); ++r) {
        EXPECT_EQ(rows[r].item, expected[r].item);
        EXPECT_EQ(rows[r].group, expected[r].group);
        EXPECT_EQ(rows[r].instance, expected[r].instance);
        EXPECT_FLOAT_EQ(rows[r].xmin, expected[r].xmin);
        EXPECT_FLOAT_EQ(rows[r].ymin, expected[r].ymin);
        EXPECT_FLOAT_EQ(rows[r].xmax, expected[r].xmax);
        EXPECT_FLOAT_EQ(rows[r].ymax, expected[r].ymax);
        EXPECT_EQ(rows[r].difficult, expected[r].difficult);
      }
    }
  }
}

TEST(AnnotatedDataLayerTest, BatchWithoutBoxes) {
  std::vector<Record> records(3);
  records[1].rects.push_back({1, 1, 5, 5});
  const std::string source = WriteDb("empty", records, false);
  Harness h(Param(source, 1), TEST);
  h.SetUp();
  EXPECT_EQ(h.label.shape(), (std::vector<int>{1, 1, 1, 8}));
  for (int b = 0; b < 3; ++b) {
    h.Forward();
    ASSERT_EQ(h.label.shape(), (std::vector<int>{1, 1, 1, 8}));
    if (b == 1) {
      EXPECT_EQ(h.label.data_at(1), 1);
      EXPECT_FLOAT_EQ(static_cast<float>(h.label.data_at(5)), 5.f / kW);
    } else {
      for (int k = 0; k < 8; ++k) EXPECT_EQ(h.label.data_at(k), -1) << b;
    }
  }
}

TEST(AnnotatedDataLayerTest, RecordsWithoutTypeGiveDatumLabels) {
  std::vector<Record> records = Objects(4);
  for (Record& record : records) record.typed = false;
  const std::string source = WriteDb("untyped", records, false);
  {
    Harness h(Param(source, 3), TEST);
    h.SetUp();
    EXPECT_EQ(h.label.shape(), (std::vector<int>{3}));
    h.Forward();
    h.Forward();
    for (int k = 0; k < 3; ++k) EXPECT_EQ(h.label.data_at(k), 100 + (3 + k) % 4);
  }
  {
    // anno_type reads them as boxes.
    Harness h(Param(source, 2, "", "anno_type: BBOX"), TEST);
    h.SetUp();
    h.Forward();
    EXPECT_EQ(h.label.shape(), (std::vector<int>{1, 1, 3, 8}));
  }
  // A record without type among typed ones is bad.
  std::vector<Record> mixed = Objects(3);
  mixed[2].typed = false;
  Harness h(Param(WriteDb("mixed", mixed, false), 3), TEST);
  h.SetUp();
  try {
    h.Forward();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("record '00000002'"), std::string::npos) << e.what();
  }
}

// Checks that the boxes of each item cover its bright pixels: every pixel brighter than the
// middle lies within a box (one pixel of slack for interpolation; not checked with an emit
// constraint, which drops boxes whose centre is cut off), and every box that is at least two
// pixels wide and high holds bright pixels.
void ExpectBoxesCoverBrightPixels(const Blob& data, const Blob& label, double scale,
                                  bool all_covered, int* boxes_seen, int* bright_items) {
  const int num = data.shape(0), height = data.shape(2), width = data.shape(3);
  const std::vector<Row> rows = Rows(label);
  for (int n = 0; n < num; ++n) {
    std::vector<Row> mine;
    for (const Row& row : rows) {
      if (row.item != n) continue;
      ASSERT_GE(row.xmin, 0);
      ASSERT_LE(row.xmax, 1);
      ASSERT_LT(row.xmin, row.xmax);
      ASSERT_LT(row.ymin, row.ymax);
      mine.push_back(row);
    }
    *boxes_seen += static_cast<int>(mine.size());
    const auto bright = [&](int y, int x) {
      return data.data_at(data.offset(n, 1, y, x)) / scale > (kDark + kBright) / 2.0;
    };
    bool any = false;
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) {
        if (!bright(y, x)) continue;
        any = true;
        if (!all_covered) continue;
        bool covered = false;
        for (const Row& row : mine)
          covered = covered || (x + 2 >= row.xmin * width && x - 1 <= row.xmax * width &&
                                y + 2 >= row.ymin * height && y - 1 <= row.ymax * height);
        ASSERT_TRUE(covered) << "item " << n << " pixel " << y << "," << x << " of " << height
                             << "x" << width << " outside its " << mine.size() << " boxes";
      }
    *bright_items += any;
    for (const Row& row : mine) {
      const int x0 = static_cast<int>(std::ceil(row.xmin * width)),
                x1 = static_cast<int>(std::floor(row.xmax * width));
      const int y0 = static_cast<int>(std::ceil(row.ymin * height)),
                y1 = static_cast<int>(std::floor(row.ymax * height));
      if (x1 - x0 < 2 || y1 - y0 < 2) continue;
      int inside = 0;
      for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) inside += bright(y, x);
      EXPECT_GT(inside, 0) << "item " << n << " box without bright pixels";
    }
  }
}

const char* kAugment =
    "mirror: true scale: 0.25 mean_value: 0 "
    "resize_param { prob: 1 resize_mode: WARP height: 30 width: 30 interp_mode: LINEAR "
    "interp_mode: NEAREST interp_mode: AREA } "
    "expand_param { prob: 0.5 max_expand_ratio: 2.5 }";
const char* kSamplers =
    "batch_sampler { max_sample: 1 max_trials: 1 } "
    "batch_sampler { sampler { min_scale: 0.3 max_scale: 1 min_aspect_ratio: 0.5 "
    "max_aspect_ratio: 2 } sample_constraint { min_jaccard_overlap: 0.1 } max_sample: 1 "
    "max_trials: 50 } "
    "batch_sampler { sampler { min_scale: 0.3 max_scale: 1 min_aspect_ratio: 0.5 "
    "max_aspect_ratio: 2 } sample_constraint { max_jaccard_overlap: 1 } max_sample: 1 "
    "max_trials: 50 }";

TEST(AnnotatedDataLayerTest, BoxesFollowThePixelsThroughEveryTransform) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  const std::string source = WriteDb("augment", Objects(7), true);
  for (const std::string& crop :
       {std::string(""), std::string("crop_size: 20"),
        std::string("crop_size: 20 emit_constraint { emit_type: CENTER }"),
        std::string("emit_constraint { emit_type: MIN_OVERLAP emit_overlap: 0.3 }")}) {
    const bool emit = crop.find("emit") != std::string::npos;
    SetRandomSeed(11);
    Harness h(Param(source, 4, std::string(kAugment) + " " + crop, kSamplers), TRAIN);
    h.SetUp();
    int boxes = 0, bright_items = 0;
    for (int b = 0; b < 10; ++b) {
      h.Forward();
      ASSERT_EQ(h.data.shape(1), 3);
      ASSERT_EQ(h.data.shape(2), crop.find("crop_size") == std::string::npos ? 30 : 20);
      ExpectBoxesCoverBrightPixels(h.data, h.label, 0.25, !emit, &boxes, &bright_items);
    }
    // Most items keep some object.
    EXPECT_GT(boxes, 20) << crop;
    EXPECT_GT(bright_items, 20) << crop;
  }
}

TEST(AnnotatedDataLayerTest, MirrorFlipsBoxesAndPixels) {
  // One record, one box on the left: mirrored items have it on the right.
  Record record;
  record.rects.push_back({2, 4, 10, 12});
  const std::string source = WriteDb("mirror", {record}, false);
  SetRandomSeed(3);
  Harness h(Param(source, 8, "mirror: true"), TRAIN);
  h.SetUp();
  h.Forward();
  const std::vector<Row> rows = Rows(h.label);
  ASSERT_EQ(rows.size(), 8u);
  int mirrored = 0;
  for (const Row& row : rows) {
    const bool flipped = row.xmin > 0.5f;
    mirrored += flipped;
    EXPECT_FLOAT_EQ(row.xmin, flipped ? 1 - 10.f / kW : 2.f / kW);
    EXPECT_EQ(h.data.data_at(h.data.offset(row.item, 0, 5, flipped ? kW - 1 - 3 : 3)), kBright);
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 8);
}

std::vector<double> RunLayer(const std::string& source, int threads, int batches, int seed,
                             const std::string& transform, const std::string& annotated) {
  SetRandomSeed(seed);
  Harness h(Param(source, 3, transform, annotated,
                  "decode_threads: " + std::to_string(threads) + " prefetch: 2"),
            TRAIN);
  h.SetUp();
  std::vector<double> values;
  for (int b = 0; b < batches; ++b) {
    h.Forward();
    for (int64_t i = 0; i < h.data.count(); ++i) values.push_back(h.data.data_at(i));
    for (int64_t i = 0; i < h.label.count(); ++i) values.push_back(h.label.data_at(i));
  }
  return values;
}

TEST(AnnotatedDataLayerTest, SameBatchesForAnyNumberOfThreads) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  const std::string source = WriteDb("threads", Objects(5), true);
  const std::string transform =
      std::string(kAugment) +
      " distort_param { brightness_prob: 0.5 brightness_delta: 32 contrast_prob: 0.5 "
      "contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0.5 hue_delta: 18 saturation_prob: 0.5 "
      "saturation_lower: 0.5 saturation_upper: 1.5 random_order_prob: 0.2 }";
  const std::vector<double> one = RunLayer(source, 1, 6, 77, transform, kSamplers);
  EXPECT_EQ(RunLayer(source, 3, 6, 77, transform, kSamplers), one);
  EXPECT_NE(RunLayer(source, 3, 6, 78, transform, kSamplers), one);
}

TEST(AnnotatedDataLayerTest, DistortionWithZeroProbabilitiesChangesNothing) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  const std::string source = WriteDb("distort0", Objects(4), true);
  const std::string distort =
      "distort_param { brightness_prob: 0 brightness_delta: 32 contrast_prob: 0 "
      "contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0 hue_delta: 18 saturation_prob: 0 "
      "saturation_lower: 0.5 saturation_upper: 1.5 random_order_prob: 0 }";
  const std::vector<double> plain = RunLayer(source, 2, 3, 5, "", "");
  EXPECT_EQ(RunLayer(source, 2, 3, 5, distort, ""), plain);
  // And with probability 1 it does change the pixels, not the shapes.
  const std::vector<double> distorted =
      RunLayer(source, 2, 3, 5,
               "distort_param { brightness_prob: 1 brightness_delta: 32 contrast_prob: 1 "
               "contrast_lower: 0.5 contrast_upper: 1.5 }",
               "");
  EXPECT_EQ(distorted.size(), plain.size());
  EXPECT_NE(distorted, plain);
}

TEST(AnnotatedDataLayerTest, SaveAndRestoreResumeTheSameBatches) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  const std::string source = WriteDb("resume", Objects(5), true);
  const std::string param = Param(source, 2, kAugment, kSamplers, "decode_threads: 2");
  SetRandomSeed(21);
  Harness first(param, TRAIN);
  first.SetUp();
  EXPECT_EQ(first.layer->NumRecords(), 5);
  EXPECT_EQ(first.layer->BatchSize(), 2);
  first.Forward();
  first.Forward();
  DataLayerState state;
  ASSERT_TRUE(first.layer->SaveDataState(&state));
  EXPECT_EQ(state.type(), "AnnotatedData");
  std::vector<double> expected;
  for (int b = 0; b < 3; ++b) {
    first.Forward();
    for (int64_t i = 0; i < first.data.count(); ++i) expected.push_back(first.data.data_at(i));
    for (int64_t i = 0; i < first.label.count(); ++i) expected.push_back(first.label.data_at(i));
  }
  SetRandomSeed(999);  // another seed: the state decides
  Harness second(param, TRAIN);
  second.SetUp();
  second.layer->RestoreDataState(state);
  std::vector<double> resumed;
  for (int b = 0; b < 3; ++b) {
    second.Forward();
    for (int64_t i = 0; i < second.data.count(); ++i) resumed.push_back(second.data.data_at(i));
    for (int64_t i = 0; i < second.label.count(); ++i) resumed.push_back(second.label.data_at(i));
  }
  EXPECT_EQ(resumed, expected);
}

TEST(AnnotatedDataLayerTest, FitLargeSizeAndPadMovesTheBoxes) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  // 32 x 24 into 16 x 16: scaled to 16 x 12, 2 rows of padding above and below.
  Record record;
  record.rects.push_back({0, 0, 16, 24});
  const std::string source = WriteDb("pad", {record}, false);
  Harness h(Param(source, 1,
                  "resize_param { resize_mode: FIT_LARGE_SIZE_AND_PAD height: 16 width: 16 "
                  "pad_value: 0 }"),
            TEST);
  h.SetUp();
  h.Forward();
  EXPECT_EQ(h.data.shape(), (std::vector<int>{1, 3, 16, 16}));
  const std::vector<Row> rows = Rows(h.label);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FLOAT_EQ(rows[0].xmin, 0);
  EXPECT_FLOAT_EQ(rows[0].xmax, 0.5f);
  EXPECT_FLOAT_EQ(rows[0].ymin, 2.f / 16);
  EXPECT_FLOAT_EQ(rows[0].ymax, 14.f / 16);
  EXPECT_EQ(h.data.data_at(h.data.offset(0, 0, 0, 3)), 0);  // padding
  EXPECT_EQ(h.data.data_at(h.data.offset(0, 0, 7, 3)), kBright);
  EXPECT_EQ(h.data.data_at(h.data.offset(0, 0, 7, 12)), kDark);
}

void ExpectSetUpError(const std::string& param, const std::string& needle, bool config) {
  Harness h(param, TRAIN);
  try {
    h.SetUp();
    FAIL() << "no error for " << param;
  } catch (const ConfigError& e) {
    EXPECT_TRUE(config) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  } catch (const RuntimeError& e) {
    EXPECT_FALSE(config) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AnnotatedDataLayerTest, Errors) {
  const std::string source = WriteDb("errors", Objects(3), false);
  ExpectSetUpError(Param(source, 1, "noise_param { prob: 0.5 }"), "noise_param.prob", true);
  ExpectSetUpError(Param(source, 1, "", "batch_sampler { sampler { min_scale: 0 } }"),
                   "sampler.min_scale", true);
  ExpectSetUpError(Param(source, 1, "", "batch_sampler { sampler { max_aspect_ratio: 0.5 } }"),
                   "min_aspect_ratio", true);
  ExpectSetUpError(Param(source, 1, "",
                         "batch_sampler { sample_constraint { "
                         "min_jaccard_overlap: 2 } }"),
                   "min_jaccard_overlap", true);
  ExpectSetUpError(Param(source, 1, "expand_param { max_expand_ratio: 0.5 }"), "max_expand_ratio",
                   true);
  ExpectSetUpError(Param(source, 1, "distort_param { brightness_prob: 1.5 }"), "brightness_prob",
                   true);
  ExpectSetUpError(Param(source, 1, "resize_param { height: 0 width: 4 }"), "resize_param.height",
                   true);
  ExpectSetUpError(Param(source, 1, "crop_size: 40"), "crop_size", true);
  ExpectSetUpError(Param(source + "_missing", 1), "_missing", false);
  // The Data layer refuses the SSD fields.
  ExpectSetUpError("name: 'd' type: 'Data' top: 'data' data_param { source: '" + source +
                       "' batch_size: 1 backend: LMDB } transform_param { expand_param { } }",
                   "transform_param.expand_param", true);
}

TEST(AnnotatedDataLayerTest, BadRecords) {
  CREMA_SKIP_WITHOUT_OPENCV();  // encoded records / resizing
  std::vector<Record> records = Objects(6);
  records[2].corrupt = true;
  const std::string source = WriteDb("bad", records, true);
  {
    Harness h(Param(source, 2), TEST);
    h.SetUp();
    h.Forward();
    try {
      h.Forward();
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("record '00000002' of '" + source + "'"), std::string::npos)
          << message;
      EXPECT_NE(message.find("AnnotatedDatum"), std::string::npos) << message;
      EXPECT_NE(message.find("(AnnotatedData)"), std::string::npos) << message;
    }
  }
  Harness h(Param(source, 5, "", "", "on_bad_record: SKIP decode_threads: 3"), TEST);
  h.SetUp();
  h.Forward();
  const std::vector<Row> rows = Rows(h.label);
  // Items 0..4 are records 0, 1, 3, 4, 5; odd records have two boxes.
  int item2 = 0, item3 = 0;
  for (const Row& row : rows) {
    item2 += row.item == 2;
    item3 += row.item == 3;
  }
  EXPECT_EQ(item2, 2);  // record 3: odd, two rectangles
  EXPECT_EQ(item3, 1);
}

}  // namespace
}  // namespace crema
