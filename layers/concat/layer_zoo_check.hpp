#pragma once
// Test helper (header-only; a candidate for tests/support/): runs ONE layer of a BVLC Caffe
// numeric dump (../shared/reference/bvlc/numeric/<net>, e.g. layer_zoo, layer_zoo_aux) by itself
// and compares it with Caffe. The layer's parameter and learnable blobs come from
// <net>.caffemodel (which names the auto-inserted Split blobs); each bottom from the dump of the
// last layer that wrote that blob before it (following Splits back to their source); each top
// diff from the bottom diff dumped by the next layer that consumed the top, else the loss weight,
// else zero. Checked: every dumped top, bottom diff and param diff of the layer, each within
// `tolerance` times the largest magnitude of the reference. Skips when the data is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/json.hpp"
#include "support/reference.hpp"

namespace crema::testing {

namespace zoo_detail {

inline const LayerParameter* FindLayer(const NetParameter& net, const std::string& name) {
  for (const LayerParameter& l : net.layer())
    if (l.name() == name) return &l;
  return nullptr;
}

inline std::vector<int> ShapeOf(const Json& entry) {
  std::vector<int> shape;
  for (int64_t d : entry["shape"].ints()) shape.push_back(static_cast<int>(d));
  return shape;
}

// The values of blob `name` as seen by the layer at `before` (the last writer before it).
inline bool BlobValues(const std::string& dir, const Json& manifest, const NetParameter& net,
                       const std::string& name, int before, std::vector<float>* values,
                       std::vector<int>* shape) {
  const Json* best = nullptr;
  int best_index = -2;
  for (const Json& e : manifest["entries"].array) {
    const std::string& kind = e["kind"].string;
    if ((kind != "forward_top" && kind != "input") || e["blob"].string != name) continue;
    const int index = static_cast<int>(e["layer_index"].number);
    if (index < before && index > best_index) {
      best = &e;
      best_index = index;
    }
  }
  if (best == nullptr) return false;
  *shape = ShapeOf(*best);
  if ((*best)["file"].type == Json::Type::kString) {
    *values = ReadF32(dir + "/" + (*best)["file"].string);
    return true;
  }
  // A Split top (not dumped): the Split's bottom holds the same values.
  const LayerParameter* split = FindLayer(net, (*best)["layer"].string);
  if (split == nullptr || split->bottom_size() != 1) return false;
  return BlobValues(dir, manifest, net, split->bottom(0), best_index, values, shape);
}

inline void ExpectNear(const Blob& actual, bool diff, const std::vector<float>& expected,
                       double tolerance, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << what;
  double scale = 1e-3;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    ASSERT_NEAR(a, expected[i], tolerance * scale) << what << " at " << i;
  }
}

inline void Fill(Blob* blob, bool diff, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), blob->count());
  float* dst = diff ? blob->mutable_cpu_diff<float>() : blob->mutable_cpu_data<float>();
  if (!values.empty()) std::memcpy(dst, values.data(), values.size() * sizeof(float));
}

}  // namespace zoo_detail

inline void CheckLayerAgainstCaffe(const std::string& net_name, const std::string& layer_name,
                                   double tolerance = 2e-5) {
  using namespace zoo_detail;
  SCOPED_TRACE(net_name + "/" + layer_name);
  const std::string dir = ReferencePath("bvlc/numeric/" + net_name);
  if (dir.empty()) GTEST_SKIP() << "reference data not found: bvlc/numeric/" << net_name;
  const Json manifest = ParseJson(ReadFile(dir + "/manifest.json"));
  NetParameter net;
  {
    std::ifstream in(dir + "/" + net_name + ".caffemodel", std::ios::binary);
    ASSERT_TRUE(net.ParseFromIstream(&in)) << net_name;
  }
  const LayerParameter* param = FindLayer(net, layer_name);
  ASSERT_NE(param, nullptr) << layer_name;
  int index = -1;
  for (const Json& l : manifest["layers"].array)
    if (l["name"].string == layer_name) index = static_cast<int>(l["index"].number);
  ASSERT_GE(index, 0) << layer_name;

  std::unique_ptr<Layer> layer = LayerRegistry::Create(*param);
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom, top;
  for (const std::string& name : param->bottom()) {
    std::vector<float> values;
    std::vector<int> shape;
    ASSERT_TRUE(BlobValues(dir, manifest, net, name, index, &values, &shape)) << name;
    blobs.push_back(std::make_unique<Blob>(shape));
    Fill(blobs.back().get(), false, values);
    bottom.push_back(blobs.back().get());
  }
  for (int t = 0; t < param->top_size(); ++t) {
    blobs.push_back(std::make_unique<Blob>());
    top.push_back(blobs.back().get());
  }
  layer->SetUp(bottom, top);
  layer->Forward(bottom, top);

  std::vector<bool> propagate_down(bottom.size(), false);
  std::vector<const Json*> bottom_diffs(bottom.size(), nullptr);
  std::vector<const Json*> param_diffs;
  bool backward = false;
  for (const Json& e : manifest["entries"].array) {
    if (static_cast<int>(e["layer_index"].number) != index) continue;
    const std::string& kind = e["kind"].string;
    if (kind == "forward_top") {
      const int t = static_cast<int>(e["top_index"].number);
      ExpectNear(*top[t], false, ReadF32(dir + "/" + e["file"].string), tolerance,
                 e["file"].string);
    } else if (kind == "backward_bottom_diff") {
      const int b = static_cast<int>(e["bottom_index"].number);
      propagate_down[b] = backward = true;
      bottom_diffs[b] = &e;
    } else if (kind == "param_diff") {
      param_diffs.push_back(&e);
      backward = true;
    }
  }
  if (!backward) return;
  // Zero first: a top may share its diff with a bottom (Reshape) or a param (Parameter).
  for (Blob* b : bottom) b->SetDiffZero();
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  // Top diffs: what the nearest later consumer of each top wrote back.
  for (int t = 0; t < param->top_size(); ++t) {
    const Json* best = nullptr;
    int best_index = 1 << 30;
    for (const Json& e : manifest["entries"].array) {
      if (e["kind"].string != "backward_bottom_diff" || e["blob"].string != param->top(t)) continue;
      const int i = static_cast<int>(e["layer_index"].number);
      if (i > index && i < best_index) {
        best = &e;
        best_index = i;
      }
    }
    if (best != nullptr) {
      Fill(top[t], true, ReadF32(dir + "/" + (*best)["file"].string));
    } else {
      top[t]->SetDiffZero();
      if (layer->loss(t) != 0)
        Fill(top[t], true, std::vector<float>(top[t]->count(), static_cast<float>(layer->loss(t))));
    }
  }
  layer->Backward(top, propagate_down, bottom);
  for (size_t b = 0; b < bottom.size(); ++b)
    if (bottom_diffs[b] != nullptr)
      ExpectNear(*bottom[b], true, ReadF32(dir + "/" + (*bottom_diffs[b])["file"].string),
                 tolerance, (*bottom_diffs[b])["file"].string);
  for (const Json* e : param_diffs)
    ExpectNear(*layer->blobs()[static_cast<int>((*e)["param_index"].number)], true,
               ReadF32(dir + "/" + (*e)["file"].string), tolerance, (*e)["file"].string);
}

}  // namespace crema::testing
