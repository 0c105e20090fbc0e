// `crema convert-annoset` end to end: PNGs and their VOC/COCO annotations written to a temporary
// folder, converted, and the AnnotatedDatum records read back (boxes normalized, classes mapped
// through the label map, groups sorted); errors name the list line, file and class, and leave no
// DB behind. Also the synthetic set of data/detection/make_shapes.py through the same path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "support/annotation_checks.hpp"
#include "support/reference.hpp"
#include "support/requires.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

constexpr char kLabelMap[] = R"(item { name: "background" label: 0 }
item { name: "cat" label: 1 display_name: "Cat" }
item { name: "dog" label: 2 }
)";

std::string Voc(int width, int height, const std::string& objects) {
  return "<?xml version=\"1.0\"?>\n<annotation>\n  <size><width>" + std::to_string(width) +
         "</width><height>" + std::to_string(height) + "</height><depth>3</depth></size>\n" +
         objects + "</annotation>\n";
}

std::string Object(const std::string& name, int xmin, int ymin, int xmax, int ymax,
                   int difficult = 0) {
  return "  <object>\n    <name>" + name + "</name>\n    <difficult>" + std::to_string(difficult) +
         "</difficult>\n    <bndbox><xmin>" + std::to_string(xmin) + "</xmin><ymin>" +
         std::to_string(ymin) + "</ymin><xmax>" + std::to_string(xmax) + "</xmax><ymax>" +
         std::to_string(ymax) + "</ymax></bndbox>\n  </object>\n";
}

struct Fixture {
  std::string dir = TempDir();
  std::string root = dir + "/set/";
  std::string list = dir + "/list.txt";
  std::string label_map = dir + "/labelmap.prototxt";
  Fixture() {
    EXPECT_EQ(std::system(("mkdir -p '" + root + "img' '" + root + "xml'").c_str()), 0);
    // a: 10 x 20 (height x width), a dog and two cats; b: 8 x 8, one difficult dog.
    WritePng(root + "img/a.png", 10, 20, 3, std::vector<uint8_t>(10 * 20 * 3, 50));
    WritePng(root + "img/b.png", 8, 8, 3, std::vector<uint8_t>(8 * 8 * 3, 200));
    WriteText(root + "xml/a.xml", Voc(20, 10,
                                      Object("dog", 2, 1, 12, 6) + Object("cat", 0, 0, 20, 10) +
                                          Object("cat", 5, 5, 10, 10)));
    WriteText(root + "xml/b.xml", Voc(8, 8, Object("dog", 2, 4, 6, 8, 1)));
    WriteText(label_map, kLabelMap);
    WriteText(list, "img/a.png xml/a.xml\n\nimg/b.png xml/b.xml\n");
  }
  CremaResult Convert(const std::string& db, const std::string& flags = "") const {
    return RunCrema("convert-annoset '" + root + "' '" + list + "' '" + dir + "/" + db +
                    "' --label_map_file '" + label_map + "' " + flags);
  }
  // Whether anything named `db`* is left in the folder (the DB or its temporary).
  bool Leftovers(const std::string& db) const {
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().filename().string().rfind(db, 0) == 0) return true;
    return false;
  }
};

AnnotatedDatum Parse(const std::string& value) {
  AnnotatedDatum datum;
  EXPECT_TRUE(datum.ParseFromString(value));
  return datum;
}

TEST(ConvertAnnosetTest, VocBoxesNormalizedAndMapped) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  const CremaResult r = f.Convert("db");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 2 records"), std::string::npos) << r.output;
  const auto records = ReadDb(f.dir + "/db");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].first, "00000000_img/a.png");
  EXPECT_EQ(records[1].first, "00000001_img/b.png");

  const AnnotatedDatum a = Parse(records[0].second);
  EXPECT_EQ(a.type(), AnnotatedDatum::BBOX);
  ASSERT_TRUE(a.has_type());
  EXPECT_EQ(a.datum().channels(), 3);
  EXPECT_EQ(a.datum().height(), 10);
  EXPECT_EQ(a.datum().width(), 20);
  EXPECT_FALSE(a.datum().encoded());
  EXPECT_EQ(a.datum().label(), -1);  // as SSD
  EXPECT_EQ(a.datum().data(), std::string(3 * 10 * 20, static_cast<char>(50)));
  ASSERT_EQ(a.annotation_group_size(), 2);
  EXPECT_EQ(a.annotation_group(0).group_label(), 1);  // cats first: sorted by label
  ASSERT_EQ(a.annotation_group(0).annotation_size(), 2);
  ExpectBox(a.annotation_group(0).annotation(0), 0, 0, 0, 1, 1, false);
  ExpectBox(a.annotation_group(0).annotation(1), 1, 0.25f, 0.5f, 0.5f, 1, false);
  EXPECT_EQ(a.annotation_group(1).group_label(), 2);
  ASSERT_EQ(a.annotation_group(1).annotation_size(), 1);
  ExpectBox(a.annotation_group(1).annotation(0), 0, 0.1f, 0.1f, 0.6f, 0.6f, false);

  const AnnotatedDatum b = Parse(records[1].second);
  ASSERT_EQ(b.annotation_group_size(), 1);
  EXPECT_EQ(b.annotation_group(0).group_label(), 2);
  ExpectBox(b.annotation_group(0).annotation(0), 0, 0.25f, 0.5f, 0.75f, 1, true);
}

TEST(ConvertAnnosetTest, EncodedRecordsKeepTheFileAndItsSize) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  const CremaResult r = f.Convert("db", "--encoded --backend lmdb");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(f.dir + "/db");
  ASSERT_EQ(records.size(), 2u);
  const AnnotatedDatum a = Parse(records[0].second);
  EXPECT_TRUE(a.datum().encoded());
  EXPECT_EQ(a.datum().data(), ReadFile(f.root + "img/a.png"));
  // SSD's EncodeCVMatToDatum records the size of encoded images.
  EXPECT_EQ(a.datum().channels(), 3);
  EXPECT_EQ(a.datum().height(), 10);
  EXPECT_EQ(a.datum().width(), 20);
  EXPECT_EQ(a.annotation_group_size(), 2);
  // Resized, the boxes stay normalized by the original size.
  const CremaResult resized = f.Convert("small", "--resize_width 10 --resize_height 5");
  ASSERT_EQ(resized.rc, 0) << resized.output;
  const AnnotatedDatum s = Parse(ReadDb(f.dir + "/small")[0].second);
  EXPECT_EQ(s.datum().height(), 5);
  EXPECT_EQ(s.datum().width(), 10);
  ExpectBox(s.annotation_group(1).annotation(0), 0, 0.1f, 0.1f, 0.6f, 0.6f, false);
  // SSD's --min_dim: the short side scaled up to it, keeping the aspect ratio.
  const CremaResult scaled = f.Convert("scaled", "--min_dim 20");
  ASSERT_EQ(scaled.rc, 0) << scaled.output;
  const AnnotatedDatum m = Parse(ReadDb(f.dir + "/scaled")[0].second);
  EXPECT_EQ(m.datum().height(), 20);
  EXPECT_EQ(m.datum().width(), 40);
}

TEST(ConvertAnnosetTest, UnknownClassNamesTheLineFileAndClassAndLeavesNoDb) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  WriteText(f.root + "xml/b.xml", Voc(8, 8, Object("dgo", 2, 4, 6, 8)));
  const CremaResult r = f.Convert("db");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(f.list + ":3: " + f.root +
                          "xml/b.xml:5: class \"dgo\" is not in the "
                          "label map; did you mean \"dog\"?"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(f.Leftovers("db")) << "a DB was left behind";
}

TEST(ConvertAnnosetTest, MissingAndMalformedFiles) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  // A missing annotation file stops the conversion; a missing image is skipped.
  WriteText(f.list, "img/a.png xml/a.xml\nimg/b.png xml/none.xml\n");
  CremaResult r = f.Convert("db");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.list + ":2: cannot read " + f.root + "xml/none.xml"), std::string::npos)
      << r.output;
  EXPECT_FALSE(f.Leftovers("db"));
  WriteText(f.list, "img/a.png xml/a.xml\nimg/none.png xml/b.xml\n");
  r = f.Convert("db");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("skipping '" + f.root + "img/none.png' (" + f.list + ":2)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(ReadDb(f.dir + "/db").size(), 1u);
  // Malformed XML names its line.
  WriteText(f.root + "xml/b.xml", "<annotation>\n<object>\n</annotation>\n");
  WriteText(f.list, "img/b.png xml/b.xml\n");
  r = f.Convert("db2");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.root + "xml/b.xml:3: malformed XML: </annotation> closes <object>"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(f.Leftovers("db2"));
  // A list line without an annotation, a bad label map, a missing flag, an existing DB.
  WriteText(f.list, "img/b.png\n");
  r = f.Convert("db3");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(f.list + ":1: expected \"image annotation\""), std::string::npos)
      << r.output;
  WriteText(f.label_map, "item { name: \"cat\" label: 1 }\nitem { name: \"dog\" label: 1 }\n");
  r = f.Convert("db3");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(f.label_map + ":2:"), std::string::npos) << r.output;
  r = RunCrema("convert-annoset '" + f.root + "' '" + f.list + "' '" + f.dir + "/db3'");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--label_map_file is required"), std::string::npos) << r.output;
  WriteText(f.label_map, kLabelMap);
  WriteText(f.list, "img/b.png xml/a.xml\n");
  r = f.Convert("db");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("already exists"), std::string::npos) << r.output;
  EXPECT_EQ(ReadDb(f.dir + "/db").size(), 1u);  // untouched
  r = RunCrema("convert-annoset --help");
  EXPECT_EQ(r.rc, 0) << r.output;
  for (const char* flag : {"--label_map_file", "--anno_type", "--label_type", "--coco", "--min_dim",
                           "--max_dim", "--encode_type", "--shuffle", "--backend"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << "\n" << r.output;
}

TEST(ConvertAnnosetTest, CocoInstancesAndClassification) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  WriteText(f.dir + "/instances.json", R"({"images": [
      {"id": 1, "file_name": "a.png", "width": 20, "height": 10},
      {"id": 2, "file_name": "b.png", "width": 8, "height": 8}],
    "annotations": [{"image_id": 2, "category_id": 18, "bbox": [2, 4, 4, 4], "iscrowd": 1}],
    "categories": [{"id": 18, "name": "dog"}]})");
  WriteText(f.list, "img/a.png\nimg/b.png\n");
  CremaResult r = f.Convert("coco", "--coco '" + f.dir + "/instances.json'");
  ASSERT_EQ(r.rc, 0) << r.output;
  auto records = ReadDb(f.dir + "/coco");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(Parse(records[0].second).annotation_group_size(), 0);
  const AnnotatedDatum b = Parse(records[1].second);
  EXPECT_EQ(b.type(), AnnotatedDatum::BBOX);
  ASSERT_EQ(b.annotation_group_size(), 1);
  EXPECT_EQ(b.annotation_group(0).group_label(), 2);
  ExpectBox(b.annotation_group(0).annotation(0), 0, 0.25f, 0.5f, 0.75f, 1, true);

  WriteText(f.list, "img/a.png 4\nimg/b.png 7\n");
  r = RunCrema("convert-annoset '" + f.root + "' '" + f.list + "' '" + f.dir +
               "/cls' --anno_type classification --shuffle");
  ASSERT_EQ(r.rc, 0) << r.output;
  records = ReadDb(f.dir + "/cls");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& record : records) {
    const AnnotatedDatum d = Parse(record.second);
    EXPECT_FALSE(d.has_type());
    EXPECT_EQ(d.annotation_group_size(), 0);
    EXPECT_EQ(d.datum().label(), record.first.find("a.png") != std::string::npos ? 4 : 7);
  }
}

// The synthetic set: every record's boxes are its XML's, divided by the image size.
TEST(ConvertAnnosetTest, SyntheticShapesSet) {
  CREMA_SKIP_WITHOUT_OPENCV();
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
    GTEST_SKIP() << "no /usr/bin/python3 with numpy";
  const std::string dir = TempDir() + "/shapes";
  const std::string script = std::string(CREMA_SOURCE_DIR) + "/data/detection/make_shapes.py";
  CommandResult made = RunCommand("/usr/bin/python3 '" + script + "' --out '" + dir +
                                  "' --num-train 12 --num-test 3 --size 64 --seed 5");
  ASSERT_EQ(made.rc, 0) << made.output;
  // Deterministic: the same seed makes the same files.
  made = RunCommand("/usr/bin/python3 '" + script + "' --out '" + dir +
                    "2' --num-train 12 --num-test 3 --size 64 --seed 5");
  ASSERT_EQ(made.rc, 0) << made.output;
  EXPECT_EQ(ReadFile(dir + "/images/000007.png"), ReadFile(dir + "2/images/000007.png"));
  EXPECT_EQ(ReadFile(dir + "/annotations/000013.xml"), ReadFile(dir + "2/annotations/000013.xml"));
  EXPECT_EQ(ReadFile(dir + "/test_name_size.txt"), "000013 64 64\n000014 64 64\n000015 64 64\n");

  const CremaResult r =
      RunCrema("convert-annoset '" + dir + "/' '" + dir + "/train.txt' '" + dir +
               "/train_lmdb' --label_map_file '" + dir + "/labelmap.prototxt' --encode_type png");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(dir + "/train_lmdb");
  ASSERT_EQ(records.size(), 12u);
  DataTransformer transformer(TransformationParameter(), TEST);
  for (size_t i = 0; i < records.size(); ++i) {
    const AnnotatedDatum d = Parse(records[i].second);
    EXPECT_EQ(transformer.InferBlobShape(d.datum()), (std::vector<int>{1, 3, 64, 64}));
    // The boxes, back in pixels, in file order per label, against the XML's numbers.
    char name[32];
    std::snprintf(name, sizeof(name), "%06zu", i + 1);
    std::ifstream xml(dir + "/annotations/" + name + ".xml");
    std::stringstream text;
    text << xml.rdbuf();
    const std::string s = text.str();
    int boxes = 0, objects = 0;
    for (size_t at = 0; (at = s.find("<object>", at)) != std::string::npos; ++at) ++objects;
    for (const AnnotationGroup& group : d.annotation_group()) {
      ASSERT_GE(group.group_label(), 1);
      ASSERT_LE(group.group_label(), 3);
      for (const Annotation& a : group.annotation()) {
        ++boxes;
        const std::string tag =
            "<xmin>" + std::to_string(static_cast<int>(std::lround(a.bbox().xmin() * 64))) +
            "</xmin>";
        EXPECT_NE(s.find(tag), std::string::npos) << name << " " << tag;
        EXPECT_GT(a.bbox().xmax(), a.bbox().xmin());
        EXPECT_LE(a.bbox().xmax(), 1.0f);
      }
    }
    EXPECT_EQ(boxes, objects) << name;
    EXPECT_GE(objects, 1);
    EXPECT_LE(objects, 3);
  }
}

}  // namespace
}  // namespace crema::testing
