// io/annotation_files: the XML reader (structure, entities, malformed files named with their
// line), Pascal VOC files (boxes normalized as SSD's ReadXMLToAnnotatedDatum, groups by label,
// instance ids, difficult flags), SSD's per-image JSON and TXT files, and COCO instances files.
#include "io/annotation_files.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "crema/error.hpp"
#include "support/annotation_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using testing::ExpectBox;

// In one folder for the whole test program, so that a file can be written again.
std::string Write(const std::string& name, const std::string& text) {
  static const std::string dir = testing::TempDir();
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The message of the exception of type E that `f` throws, with `path` replaced by FILE.
template <typename E, typename F>
std::string ErrorOf(const std::string& path, F&& f) {
  try {
    f();
  } catch (const E& e) {
    std::string message = e.what();
    for (size_t at; (at = message.find(path)) != std::string::npos;)
      message.replace(at, path.size(), "FILE");
    return message;
  } catch (const std::exception& e) {
    return std::string("another exception: ") + e.what();
  }
  return "no error";
}

std::string XmlError(const std::string& text) {
  return ErrorOf<RuntimeError>("doc", [&] { ParseXml(text, "doc"); });
}

TEST(Xml, ElementsTextEntitiesAndLines) {
  const XmlElement root = ParseXml(
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!-- a comment -->\n"
      "<!DOCTYPE annotation>\n<a x=\"1\" y='2'>\n  <b>one &amp; &lt;two&gt; &quot;&apos;</b>\n"
      "  <c/><!-- inside -->\n  <b>&#65;&#x42;<![CDATA[<&>]]></b>\n</a>\n<!-- after -->\n",
      "doc");
  EXPECT_EQ(root.name, "a");
  EXPECT_EQ(root.line, 4);
  ASSERT_EQ(root.children.size(), 3u);
  EXPECT_EQ(root.children[0].text, "one & <two> \"'");
  EXPECT_EQ(root.children[0].line, 5);
  EXPECT_EQ(root.children[1].name, "c");
  EXPECT_TRUE(root.children[1].children.empty());
  EXPECT_EQ(root.children[2].text, "AB<&>");
  EXPECT_EQ(root.children[2].line, 7);
  EXPECT_EQ(root.Child("b"), &root.children[0]);
  EXPECT_EQ(root.Child("d"), nullptr);
}

TEST(Xml, MalformedFilesNameTheLine) {
  EXPECT_EQ(XmlError("<a>\n<b>\n</a>\n"),
            "FILE:3: malformed XML: </a> closes <b> (opened at line 2)");
  EXPECT_EQ(XmlError("<a>\n<b>x</b>\n"),
            "FILE:3: malformed XML: the file ends inside <a> (opened at line 1)");
  EXPECT_EQ(XmlError("<a>\n x & y\n</a>"),
            "FILE:2: malformed XML: an '&' that starts no entity (a literal '&' is written &amp;)");
  EXPECT_EQ(XmlError("<a>&nbsp;</a>"), "FILE:1: malformed XML: unknown entity &nbsp;");
  EXPECT_EQ(XmlError("<a></a>\n<b/>"),
            "FILE:2: malformed XML: content after the root element </a>");
  EXPECT_EQ(XmlError("  \n"), "FILE:2: malformed XML: no root element");
  EXPECT_EQ(XmlError("text"), "FILE:1: malformed XML: text before the root element");
  EXPECT_EQ(XmlError("<a>\n<!-- open\n</a>"),
            "FILE:2: malformed XML: unterminated comment (<!--...-->)");
  EXPECT_EQ(XmlError("<a b=1></a>"), "FILE:1: malformed XML: expected a quoted attribute value");
  EXPECT_EQ(XmlError("<a\n"), "FILE:2: malformed XML: the file ends inside the tag <a");
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "<a>";
  EXPECT_EQ(XmlError(deep), "FILE:1: malformed XML: elements nested more than 256 deep");
}

const std::map<std::string, int> kLabels = {
    {"background", 0}, {"circle", 1}, {"square", 2}, {"triangle", 3}};

// A VOC file in the layout of VOC2007's Annotations/*.xml.
constexpr char kVoc[] = R"(<annotation>
	<folder>VOC2007</folder>
	<filename>000001.jpg</filename>
	<size>
		<width>200</width>
		<height>100</height>
		<depth>3</depth>
	</size>
	<object>
		<name>square</name>
		<pose>Left</pose>
		<truncated>0</truncated>
		<difficult>0</difficult>
		<bndbox>
			<xmin>20</xmin>
			<ymin>10</ymin>
			<xmax>120</xmax>
			<ymax>60</ymax>
		</bndbox>
	</object>
	<object>
		<name>circle</name>
		<difficult>1</difficult>
		<bndbox><xmin>0</xmin><ymin>0</ymin><xmax>50.5</xmax><ymax>100</ymax></bndbox>
		<part><name>nothing</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>2</xmax><ymax>2</ymax></bndbox></part>
	</object>
	<object>
		<name> square </name>
		<bndbox><xmin>100</xmin><ymin>50</ymin><xmax>200</xmax><ymax>100</ymax></bndbox>
	</object>
</annotation>
)";

TEST(VocAnnotation, BoxesNormalizedAndGroupedByLabel) {
  const std::string path = Write("voc.xml", kVoc);
  AnnotatedDatum datum;
  datum.add_annotation_group()->set_group_label(9);  // replaced
  const ImageAnnotation a = ReadVocAnnotation(path, kLabels, 200, 100, &datum);
  EXPECT_EQ(a.width, 200);
  EXPECT_EQ(a.height, 100);
  EXPECT_TRUE(a.warnings.empty());
  ASSERT_EQ(datum.annotation_group_size(), 2);
  const AnnotationGroup& circles = datum.annotation_group(0);  // sorted by label
  EXPECT_EQ(circles.group_label(), 1);
  ASSERT_EQ(circles.annotation_size(), 1);
  ExpectBox(circles.annotation(0), 0, 0, 0, 50.5f / 200, 1, true);
  const AnnotationGroup& squares = datum.annotation_group(1);
  EXPECT_EQ(squares.group_label(), 2);
  ASSERT_EQ(squares.annotation_size(), 2);
  ExpectBox(squares.annotation(0), 0, 0.1f, 0.1f, 0.6f, 0.6f, false);
  ExpectBox(squares.annotation(1), 1, 0.5f, 0.5f, 1, 1, false);
}

TEST(VocAnnotation, SizeFallsBackToTheImageAndWarnsWhenTheyDiffer) {
  std::string text = kVoc;
  const std::string path = Write("voc.xml", text);
  AnnotatedDatum datum;
  ImageAnnotation a = ReadVocAnnotation(path, kLabels, 400, 100, &datum);
  EXPECT_EQ(a.width, 200);  // the file's, as SSD
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("200 x 100"), std::string::npos) << a.warnings[0];
  // Without <size>: the image's.
  text.replace(text.find("<size>"), text.find("</size>") + 7 - text.find("<size>"), "");
  const std::string nosize = Write("nosize.xml", text);
  a = ReadVocAnnotation(nosize, kLabels, 400, 200, &datum);
  EXPECT_EQ(a.width, 400);
  EXPECT_FLOAT_EQ(datum.annotation_group(1).annotation(0).bbox().xmax(), 120.0f / 400);
  EXPECT_EQ(
      ErrorOf<RuntimeError>(nosize, [&] { ReadVocAnnotation(nosize, kLabels, 0, 0, &datum); }),
      "FILE: no image size in the file, and the image's is unknown");
}

TEST(VocAnnotation, BoxesOutsideOrInvertedAreWarnedAbout) {
  const std::string path =
      Write("out.xml",
            "<annotation><size><width>10</width><height>10</height></size>\n<object><name>"
            "circle</name>\n<bndbox><xmin>5</xmin><ymin>2</ymin><xmax>11</xmax><ymax>1</ymax>"
            "</bndbox></object></annotation>");
  AnnotatedDatum datum;
  const ImageAnnotation a = ReadVocAnnotation(path, kLabels, 10, 10, &datum);
  ASSERT_EQ(a.warnings.size(), 2u);
  EXPECT_EQ(a.warnings[0], path + ":3: the box [5, 2, 11, 1] exceeds the image (10 x 10)");
  EXPECT_EQ(a.warnings[1], path + ":3: the box [5, 2, 11, 1] is inverted (min > max)");
  EXPECT_FLOAT_EQ(datum.annotation_group(0).annotation(0).bbox().xmax(), 1.1f);
}

TEST(VocAnnotation, ErrorsNameTheFileLineAndClass) {
  AnnotatedDatum datum;
  std::string text = kVoc;
  text.replace(text.find("<name>circle"), 12, "<name>circel");
  std::string path = Write("bad.xml", text);
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
            "FILE:22: class \"circel\" is not in the label map; did you mean \"circle\"?");
  text = kVoc;
  text.replace(text.find("<xmin>20"), 8, "<xmin>2O");
  Write("bad.xml", text);
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
            "FILE:15: <xmin> must be a number, got '2O'");
  text = kVoc;
  text.replace(text.find("<ymax>60</ymax>"), 15, "");
  Write("bad.xml", text);
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
            "FILE:14: <bndbox> has no <ymax>");
  text = kVoc;
  text.replace(text.find("<difficult>1"), 12, "<difficult>y");
  Write("bad.xml", text);
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
            "FILE:23: <difficult> must be 0 or 1, got 'y'");
  text = kVoc;
  text.replace(text.find("</bndbox>"), 9, "</bndbx>");
  Write("bad.xml", text);
  EXPECT_EQ(
      ErrorOf<RuntimeError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
      "FILE:19: malformed XML: </bndbx> closes <bndbox> (opened at line 14)");
  Write("bad.xml", "<annotations></annotations>");
  EXPECT_EQ(
      ErrorOf<RuntimeError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
      "FILE:1: not a Pascal VOC annotation: the root element is <annotations>, not "
      "<annotation>");
  path = testing::TempDir() + "/missing.xml";
  EXPECT_EQ(
      ErrorOf<RuntimeError>(path, [&] { ReadVocAnnotation(path, kLabels, 200, 100, &datum); }),
      "cannot read FILE: No such file or directory");
}

TEST(JsonAnnotation, SsdPerImageFiles) {
  const std::map<std::string, int> labels = {{"0", 0}, {"1", 1}, {"18", 2}};
  const std::string path = Write("image.json",
                                 R"({"image": {"file_name": "x.jpg", "width": 100, "height": 50},
          "annotation": [{"bbox": [10, 5, 20, 10], "category_id": 18, "iscrowd": 0},
                         {"bbox": [0, 0, 100, 50], "category_id": "1", "iscrowd": 1},
                         {"bbox": [50, 25, 50, 25], "category_id": 18}]})");
  AnnotatedDatum datum;
  const ImageAnnotation a = ReadJsonAnnotation(path, labels, 100, 50, &datum);
  EXPECT_TRUE(a.warnings.empty());
  ASSERT_EQ(datum.annotation_group_size(), 2);
  EXPECT_EQ(datum.annotation_group(0).group_label(), 1);
  ExpectBox(datum.annotation_group(0).annotation(0), 0, 0, 0, 1, 1, true);
  EXPECT_EQ(datum.annotation_group(1).group_label(), 2);
  ExpectBox(datum.annotation_group(1).annotation(0), 0, 0.1f, 0.1f, 0.3f, 0.3f, false);
  ExpectBox(datum.annotation_group(1).annotation(1), 1, 0.5f, 0.5f, 1, 1, false);

  Write("image.json", "{\"image\": {\"width\": 10, \"height\": 10},\n \"annotation\": [{]}");
  EXPECT_EQ(ErrorOf<RuntimeError>(path, [&] { ReadJsonAnnotation(path, labels, 0, 0, &datum); })
                .substr(0, 30),
            "FILE:2:18: malformed JSON: exp");
  Write("image.json", R"({"image": {"width": 10, "height": 10},
      "annotation": [{"bbox": [1, 2, 3], "category_id": 1}]})");
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadJsonAnnotation(path, labels, 0, 0, &datum); }),
            "FILE: annotation[0]: \"bbox\" must be [x, y, width, height], got [1,2,3]");
  Write("image.json", R"({"image": {"width": 10, "height": 10},
      "annotation": [{"bbox": [1, 2, 3, 4], "category_id": 7}]})");
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadJsonAnnotation(path, labels, 0, 0, &datum); }),
            "FILE: annotation[0]: class \"7\" is not in the label map");
}

TEST(TxtAnnotation, LabelsAndPixels) {
  const std::string path = Write("boxes.txt", "2 10 20 30 40\n\n1 0 0 100 100\n2 0 0 50 50\n");
  AnnotatedDatum datum;
  ReadTxtAnnotation(path, 100, 200, &datum);
  ASSERT_EQ(datum.annotation_group_size(), 2);
  EXPECT_EQ(datum.annotation_group(1).group_label(), 2);
  ExpectBox(datum.annotation_group(1).annotation(0), 0, 0.1f, 0.1f, 0.3f, 0.2f, false);
  ExpectBox(datum.annotation_group(1).annotation(1), 1, 0, 0, 0.5f, 0.25f, false);
  Write("boxes.txt", "1 0 0 5 5\ncat 1 2 3 4\n");
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { ReadTxtAnnotation(path, 10, 10, &datum); }),
            "FILE:2: expected \"label xmin ymin xmax ymax\" (pixels), got 'cat 1 2 3 4'");
}

constexpr char kCoco[] = R"({
  "info": {"description": "tiny"},
  "images": [
    {"id": 7, "file_name": "000007.jpg", "width": 200, "height": 100},
    {"id": 8, "file_name": "000008.jpg", "width": 50, "height": 50}
  ],
  "annotations": [
    {"id": 1, "image_id": 7, "category_id": 3, "bbox": [20, 10, 100, 50], "iscrowd": 0,
     "area": 5000, "segmentation": [[1, 2, 3, 4]]},
    {"id": 2, "image_id": 7, "category_id": 1, "bbox": [0, 0, 200, 100], "iscrowd": 1},
    {"id": 3, "image_id": 7, "category_id": 3, "bbox": [100, 50, 100, 50], "iscrowd": 0}
  ],
  "categories": [{"id": 1, "name": "circle"}, {"id": 3, "name": "triangle"},
                 {"id": 4, "name": "hexagon"}]
})";

TEST(CocoInstances, BoxesByFileName) {
  const std::string path = Write("instances.json", kCoco);
  const CocoInstances coco(path, kLabels);
  EXPECT_EQ(coco.num_images(), 2u);
  EXPECT_TRUE(coco.Has("000007.jpg"));
  EXPECT_TRUE(coco.Has("val/000008.jpg"));  // by its last component
  EXPECT_FALSE(coco.Has("000009.jpg"));
  AnnotatedDatum datum;
  ImageAnnotation a = coco.Annotate("images/000007.jpg", 200, 100, &datum);
  EXPECT_EQ(a.width, 200);
  ASSERT_EQ(datum.annotation_group_size(), 2);
  EXPECT_EQ(datum.annotation_group(0).group_label(), 1);  // circle
  ExpectBox(datum.annotation_group(0).annotation(0), 0, 0, 0, 1, 1, true);
  EXPECT_EQ(datum.annotation_group(1).group_label(), 3);  // triangle
  ExpectBox(datum.annotation_group(1).annotation(0), 0, 0.1f, 0.1f, 0.6f, 0.6f, false);
  ExpectBox(datum.annotation_group(1).annotation(1), 1, 0.5f, 0.5f, 1, 1, false);
  a = coco.Annotate("000008.jpg", 50, 50, &datum);
  EXPECT_EQ(datum.annotation_group_size(), 0);
  EXPECT_EQ(ErrorOf<RuntimeError>(path, [&] { coco.Annotate("x/000009.jpg", 1, 1, &datum); }),
            "FILE lists no image \"x/000009.jpg\" (nor \"000009.jpg\")");
}

TEST(CocoInstances, LabelMapsByIdAndUnknownCategories) {
  const std::string path = Write("instances.json", kCoco);
  // SSD's labelmap_coco.prototxt names classes by their COCO id.
  const CocoInstances by_id(path, {{"0", 0}, {"1", 1}, {"3", 2}});
  AnnotatedDatum datum;
  by_id.Annotate("000007.jpg", 200, 100, &datum);
  ASSERT_EQ(datum.annotation_group_size(), 2);
  EXPECT_EQ(datum.annotation_group(1).group_label(), 2);
  EXPECT_EQ(ErrorOf<ConfigError>(path,
                                 [&] {
                                   CocoInstances(path, {{"circle", 1}});
                                 }),
            "FILE: categories[1] (id 3): class \"triangle\" is not in the label map");
  std::string text = kCoco;
  text.replace(text.find("\"image_id\": 7, \"category_id\": 1"), 13, "\"image_id\": 9");
  Write("instances.json", text);
  EXPECT_EQ(ErrorOf<ConfigError>(path, [&] { CocoInstances(path, kLabels); }),
            "FILE: annotations[1]: image_id 9 is not in \"images\"");
}

}  // namespace
}  // namespace crema
