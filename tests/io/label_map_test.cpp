// io/label_map: SSD's label map files, their checks (golden messages with file:line:col), the
// name and display-name lookups, and a write/read round trip.
#include "io/label_map.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "crema/error.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

// In one folder for the whole test program, so that a file can be written again.
std::string Write(const std::string& name, const std::string& text) {
  static const std::string dir = testing::TempDir();
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The message of the ConfigError that reading `text` throws ("" when none is thrown), with the
// file's path replaced by FILE.
std::string ErrorOf(const std::string& text) {
  const std::string path = Write("labelmap.prototxt", text);
  try {
    ReadLabelMap(path);
  } catch (const ConfigError& e) {
    std::string message = e.what();
    for (size_t at; (at = message.find(path)) != std::string::npos;)
      message.replace(at, path.size(), "FILE");
    return message;
  }
  return "";
}

constexpr char kVoc[] = R"(# SSD's labelmap_voc.prototxt, abridged
item {
  name: "none_of_the_above"
  label: 0
  display_name: "background"
}
item {
  name: "aeroplane"
  label: 1
  display_name: "aeroplane"
}
item {
  name: "bicycle"
  label: 2
}
)";

TEST(LabelMap, ReadsSsdFilesAndMapsNames) {
  const LabelMap map = ReadLabelMap(Write("voc.prototxt", kVoc));
  ASSERT_EQ(map.item_size(), 3);
  const auto labels = LabelsByName(map);
  EXPECT_EQ(labels, (std::map<std::string, int>{
                        {"none_of_the_above", 0}, {"aeroplane", 1}, {"bicycle", 2}}));
  const auto names = DisplayNamesByLabel(map);
  EXPECT_EQ(names, (std::map<int, std::string>{
                       {0, "background"}, {1, "aeroplane"}, {2, "bicycle"}}));  // name fallback
}

TEST(LabelMap, WriteThenReadIsTheSame) {
  const LabelMap map = ReadLabelMap(Write("voc.prototxt", kVoc));
  const std::string path = testing::TempDir() + "/written.prototxt";
  WriteLabelMap(map, path);
  const LabelMap back = ReadLabelMap(path);
  EXPECT_EQ(back.SerializeAsString(), map.SerializeAsString());
}

TEST(LabelMap, GoldenErrors) {
  EXPECT_EQ(ErrorOf("item { name: \"a\" label: 0 }\nitem { name: \"b\" label: 0 }\n"),
            "FILE:2:18: label map item \"b\": label 0 is also the label of \"a\" (FILE:1:18)");
  EXPECT_EQ(ErrorOf("item { name: \"a\" label: 0 }\nitem {\n  name: \"a\"\n  label: 1\n}\n"),
            "FILE:3:3: label map item \"a\" is named twice (first at FILE:1:8)");
  EXPECT_EQ(ErrorOf("item {\n  name: \"cat\"\n  label: -3\n}\n"),
            "FILE:3:3: label map item \"cat\": label must be >= 0, got -3");
  EXPECT_EQ(ErrorOf("item { name: \"a\" label: 0 }\n  item { label: 1 }\n"),
            "FILE:2:3: label map item 1 has no name");
  EXPECT_EQ(ErrorOf("item { name: \"a\" }\n"), "FILE:1:1: label map item \"a\" has no label");
  // Syntax errors and misspelt fields: the prototxt reader's messages.
  EXPECT_EQ(ErrorOf("item {\n  name: \"a\"\n  lable: 1\n}\n"),
            "FILE:3:3: unknown field \"lable\" in LabelMapItem; did you mean \"label\"?");
  EXPECT_EQ(ErrorOf("item {\n  name: \"a\"\n  label: 1\n"),
            "FILE:4:1: the file ends inside the block \"item {\" opened at FILE:1:1: a closing "
            "'}' is missing");
  EXPECT_EQ(ErrorOf(kVoc), "");
}

TEST(LabelMap, MissingFileIsARuntimeError) {
  EXPECT_THROW(ReadLabelMap(testing::TempDir() + "/nothing_here.prototxt"), RuntimeError);
}

TEST(LabelMap, CheckInMemoryNamesTheItem) {
  LabelMap map;
  auto* item = map.add_item();
  item->set_name("x");
  item->set_label(1);
  *map.add_item() = *item;
  try {
    CheckLabelMap(map, "memory");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "memory: item[1].name: label map item \"x\" is named twice "
              "(first at memory: item[0].name)");
  }
}

}  // namespace
}  // namespace crema
