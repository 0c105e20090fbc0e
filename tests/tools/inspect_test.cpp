// NetToJson (crema inspect --json) against BVLC Caffe's shape dumps: for every reference net
// whose layer types crema registers, the layer list, names, types, bottoms, tops, top shapes,
// param shapes, loss weights, blobs, inputs, outputs and parameter counts must match.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "io/json.hpp"
#include "net/net_json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

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

// Nets written for Caffe forks: depthwise layers under the MobileNet/ShuffleNet forks' type names
// (ShuffleNet's first one gives neither group nor num_output) and an SSD head whose
// DetectionOutput carries the save_output_param of SSD's published deploy nets (files that exist
// only on the author's machine). Shapes by hand: 32 -> 16 (k3 s2 p1) -> 8 (k3 s2 p1); PriorBox
// with aspect ratios {1, 2} and a max_size gives 3 priors per cell, 8 * 8 * 3 = 192 boxes.
TEST(InspectJson, ForkDepthwiseTypesAndSsdDeployHead) {
  const std::string prototxt = R"(
name: "fork_net"
input: "data"
input_shape { dim: 1 dim: 3 dim: 32 dim: 32 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "dw" type: "ConvolutionDepthwise" bottom: "conv" top: "dw"
        convolution_param { kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "dw2" type: "DepthwiseConvolution" bottom: "dw" top: "dw2"
        convolution_param { num_output: 4 group: 4 kernel_size: 3 pad: 1 bias_term: false } }
layer { name: "loc" type: "Convolution" bottom: "dw2" top: "loc"
        convolution_param { num_output: 12 kernel_size: 3 pad: 1 } }
layer { name: "loc_perm" type: "Permute" bottom: "loc" top: "loc_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "loc_flat" type: "Flatten" bottom: "loc_perm" top: "loc_flat" }
layer { name: "conf" type: "Convolution" bottom: "dw2" top: "conf"
        convolution_param { num_output: 9 kernel_size: 3 pad: 1 } }
layer { name: "conf_perm" type: "Permute" bottom: "conf" top: "conf_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "conf_flat" type: "Flatten" bottom: "conf_perm" top: "conf_flat" }
layer { name: "prior" type: "PriorBox" bottom: "dw2" bottom: "data" top: "prior"
        prior_box_param { min_size: 8 max_size: 16 aspect_ratio: 2 flip: false
                          variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }
layer { name: "conf_reshape" type: "Reshape" bottom: "conf_flat" top: "conf_reshape"
        reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
layer { name: "conf_softmax" type: "Softmax" bottom: "conf_reshape" top: "conf_softmax"
        softmax_param { axis: 2 } }
layer { name: "conf_out" type: "Flatten" bottom: "conf_softmax" top: "conf_out" }
layer { name: "detection_out" type: "DetectionOutput"
        bottom: "loc_flat" bottom: "conf_out" bottom: "prior" top: "detection_out"
        include { phase: TEST }
        detection_output_param { num_classes: 3 nms_param { nms_threshold: 0.45 top_k: 400 }
          save_output_param { output_directory: "/nonexistent/crema/ssd_results/Main"
            output_name_prefix: "comp4_det_test_" output_format: "VOC"
            label_map_file: "/nonexistent/labelmap_voc.prototxt"
            name_size_file: "/nonexistent/test_name_size.txt" num_test_image: 4952 }
          code_type: CENTER_SIZE keep_top_k: 200 confidence_threshold: 0.01 } }
)";
  const fs::path path =
      fs::temp_directory_path() / ("crema_fork_net_" + std::to_string(getpid()) + ".prototxt");
  {
    std::ofstream out(path);
    out << prototxt;
  }
  // name -> (type, top shape, param shapes)
  struct Want {
    std::string type, top, params;
  };
  const std::map<std::string, Want> want = {
      {"conv", {"Convolution", "[1,4,16,16]", "[[4,3,3,3],[4]]"}},
      {"dw", {"ConvolutionDepthwise", "[1,4,8,8]", "[[4,1,3,3],[4]]"}},
      {"dw2", {"DepthwiseConvolution", "[1,4,8,8]", "[[4,1,3,3]]"}},
      {"loc_flat", {"Flatten", "[1,768]", "[]"}},
      {"conf_flat", {"Flatten", "[1,576]", "[]"}},
      {"prior", {"PriorBox", "[1,2,768]", "[]"}},
      {"conf_reshape", {"Reshape", "[1,192,3]", "[]"}},
      {"detection_out", {"DetectionOutput", "[1,1,1,7]", "[]"}},
  };
  auto str = [](const Json& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i].type == Json::Type::kArray) {
        s += (i ? "," : "") + std::string("[");
        for (size_t j = 0; j < shape[i].size(); ++j)
          s += (j ? "," : "") + std::to_string(static_cast<int>(shape[i][j].number));
        s += "]";
      } else {
        s += (i ? "," : "") + std::to_string(static_cast<int>(shape[i].number));
      }
    }
    return s + "]";
  };
  for (Phase phase : {TRAIN, TEST}) {
    std::unique_ptr<Net> net;
    ASSERT_NO_THROW(net = Net::FromFile(path.string(), phase, 0, {}));
    const Json got = ParseJson(NetToJson(*net));
    int seen = 0;
    for (const Json& layer : got["layers"].array) {
      auto it = want.find(layer["name"].string);
      if (it == want.end()) continue;
      ++seen;
      EXPECT_EQ(layer["type"].string, it->second.type) << it->first;
      EXPECT_EQ(str(layer["top_shapes"][0]), it->second.top) << it->first;
      EXPECT_EQ(str(layer["param_shapes"]), it->second.params) << it->first;
    }
    // detection_out exists only in TEST.
    EXPECT_EQ(seen, phase == TEST ? 8 : 7);
  }
  EXPECT_FALSE(fs::exists("/nonexistent/crema/ssd_results"));
  fs::remove(path);
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
