// NetToJson (crema inspect --json) against BVLC Caffe's shape dumps: for every reference net
// whose layer types crema registers, the layer list, names, types, bottoms, tops, top shapes,
// param shapes, loss weights, blobs, inputs, outputs and parameter counts must match.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "net/net_json.hpp"
#include "support/json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::Json;
using testing::ParseJson;

// Restores the working directory at scope exit.
class ScopedChdir {
 public:
  explicit ScopedChdir(const std::string& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedChdir() {
    std::error_code ec;
    fs::current_path(old_, ec);
  }

 private:
  fs::path old_;
};

void CollectJsonNames(const Json& v, std::vector<std::string>* out) {
  if (v.type == Json::Type::kString) {
    const std::string& s = v.string;
    if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) out->push_back(s);
  }
  for (const Json& e : v.array) CollectJsonNames(e, out);
  for (const auto& kv : v.object) CollectJsonNames(kv.second, out);
}

// The reference json files: those INDEX.json lists, else every *.json beside it.
std::vector<std::string> ReferenceJsons(const std::string& shapes_dir) {
  std::vector<std::string> files;
  const std::string index = shapes_dir + "/INDEX.json";
  if (fs::exists(index)) {
    std::vector<std::string> names;
    CollectJsonNames(ParseJson(testing::ReadFile(index)), &names);
    for (const std::string& n : names) {
      const std::string path = shapes_dir + "/" + fs::path(n).filename().string();
      if (fs::exists(path) && fs::path(path).filename() != "INDEX.json") files.push_back(path);
    }
  }
  if (files.empty()) {
    for (const auto& entry : fs::directory_iterator(shapes_dir)) {
      const fs::path& p = entry.path();
      if (p.extension() == ".json" && p.filename() != "INDEX.json") files.push_back(p.string());
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// Compares one field; appends a description of the first difference to `diffs`.
void Compare(const std::string& where, const Json& want, const Json& got,
             std::vector<std::string>* diffs) {
  bool same = want.type == got.type;
  if (same) {
    switch (want.type) {
      case Json::Type::kNumber:
        same = std::abs(want.number - got.number) <= 1e-6 * std::max(1.0, std::abs(want.number));
        break;
      case Json::Type::kString:
        same = want.string == got.string;
        break;
      case Json::Type::kBool:
        same = want.boolean == got.boolean;
        break;
      case Json::Type::kArray:
        same = want.array.size() == got.array.size();
        if (same) {
          const size_t before = diffs->size();
          for (size_t i = 0; i < want.array.size() && diffs->size() == before; ++i)
            Compare(where + "[" + std::to_string(i) + "]", want.array[i], got.array[i], diffs);
          return;
        }
        break;
      case Json::Type::kObject:
        for (const auto& kv : want.object) {
          if (!got.has(kv.first)) {
            diffs->push_back(where + "." + kv.first + " missing");
            return;
          }
          Compare(where + "." + kv.first, kv.second, got[kv.first], diffs);
        }
        return;
      case Json::Type::kNull:
        break;
    }
  }
  if (!same) diffs->push_back(where + ": want " + want.Dump() + ", got " + got.Dump());
}

TEST(InspectJson, MatchesCaffeShapes) {
  CREMA_REQUIRE_REFERENCE(bvlc, "bvlc/shapes");
  const std::string bvlc_dir = fs::path(bvlc).parent_path().string();
  ScopedChdir chdir(bvlc_dir);  // paths inside the prototxts are relative to bvlc/

  const char* kFields[] = {"net_name",
                           "phase",
                           "stages",
                           "layers",
                           "blobs",
                           "input_blobs",
                           "output_blobs",
                           "num_learnable_params",
                           "num_learnable_params_unique"};
  int matched = 0, skipped = 0, failed = 0;
  std::ostringstream skipped_list;
  for (const std::string& json_path : ReferenceJsons(bvlc)) {
    const std::string label = fs::path(json_path).stem().string();
    const Json want = ParseJson(testing::ReadFile(json_path));
    std::set<std::string> missing;
    for (const Json& layer : want["layers"].array)
      if (!LayerRegistry::Has(layer["type"].string)) missing.insert(layer["type"].string);
    if (!missing.empty()) {
      ++skipped;
      skipped_list << "\n  " << label << ": needs";
      for (const std::string& t : missing) skipped_list << " " << t;
      continue;
    }
    std::string prototxt = fs::path(json_path).replace_extension(".prototxt").string();
    const Phase phase = want["phase"].string == "TRAIN" ? TRAIN : TEST;
    std::vector<std::string> diffs;
    try {
      std::unique_ptr<Net> net = Net::FromFile(prototxt, phase, 0, want["stages"].strings());
      const Json got = ParseJson(NetToJson(*net, want["stages"].strings()));
      for (const char* field : kFields) {
        if (!got.has(field)) {
          diffs.push_back(std::string(field) + " missing from NetToJson");
          continue;
        }
        // Layers one by one so a message names the first differing layer and field.
        if (std::string(field) == "layers") {
          const Json& wl = want["layers"];
          const Json& gl = got["layers"];
          if (wl.size() != gl.size()) {
            std::string names;
            for (const Json& l : gl.array) names += l["name"].string + " ";
            diffs.push_back("layer count: want " + std::to_string(wl.size()) + ", got " +
                            std::to_string(gl.size()) + " (" + names + ")");
          }
          for (size_t i = 0; i < std::min(wl.size(), gl.size()); ++i)
            Compare("layers[" + std::to_string(i) + "] (" + wl[i]["name"].string + ")", wl[i],
                    gl[i], &diffs);
        } else {
          Compare(field, want[field], got[field], &diffs);
        }
      }
    } catch (const std::exception& e) {
      diffs.push_back(std::string("building the net failed: ") + e.what());
    }
    if (diffs.empty()) {
      ++matched;
    } else {
      ++failed;
      std::string first;
      for (size_t i = 0; i < std::min<size_t>(diffs.size(), 5); ++i) first += "\n  " + diffs[i];
      ADD_FAILURE() << label << ": " << diffs.size() << " difference(s):" << first;
    }
  }
  std::printf(
      "[ INFO     ] reference shape nets: %d match, %d differ, %d skipped (layer types "
      "not registered)%s\n",
      matched, failed, skipped, skipped_list.str().c_str());
  RecordProperty("matched", matched);
  RecordProperty("skipped", skipped);
}

TEST(InspectJson, NumberAndStringFormatting) {
  EXPECT_EQ(JsonNumber(0), "0");
  EXPECT_EQ(JsonNumber(1), "1");
  EXPECT_EQ(JsonNumber(static_cast<float>(0.3)), "0.3");
  EXPECT_EQ(JsonNumber(1e-8f), "1e-08");
  EXPECT_EQ(JsonQuote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  const Json parsed = ParseJson("{\"a\": [1, -2.5e1, \"x\\u0041\"], \"b\": {\"c\": true}}");
  EXPECT_EQ(parsed["a"][1].number, -25.0);
  EXPECT_EQ(parsed["a"][2].string, "xA");
  EXPECT_TRUE(parsed["b"]["c"].boolean);
}

}  // namespace
}  // namespace crema
