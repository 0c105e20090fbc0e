#include "support/layer_zoo.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "crema/layer_registry.hpp"
#include "io/json.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema::testing {

void ExpectNearCaffe(const Blob& actual, bool diff, const std::vector<float>& expected,
                     double tolerance, const std::string& what, int max_failures) {
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << what;
  double scale = 1e-3;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    if (std::abs(a - expected[i]) <= tolerance * scale) continue;
    EXPECT_NEAR(a, expected[i], tolerance * scale) << what << " at " << i;
    if (++failures == max_failures) return;
  }
}

namespace {

const LayerParameter* FindLayer(const NetParameter& net, const std::string& name) {
  const LayerParameter* found = nullptr;
  for (const LayerParameter& l : net.layer())
    if (l.name() == name) found = &l;
  return found;
}

bool ReadNet(const std::string& path, NetParameter* net) {
  std::ifstream in(path, std::ios::binary);
  return net->ParseFromIstream(&in);
}

std::vector<int> ShapeOf(const Json& entry) {
  std::vector<int> shape;
  for (int64_t d : entry["shape"].ints()) shape.push_back(static_cast<int>(d));
  return shape;
}

// The values of blob `name` as seen by the layer at `before` (the last writer before it).
bool BlobValues(const std::string& dir, const Json& manifest, const NetParameter& net,
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

void Fill(Blob* blob, bool diff, const std::vector<float>& values) {
  ASSERT_EQ(static_cast<int64_t>(values.size()), blob->count());
  float* dst = diff ? blob->mutable_cpu_diff<float>() : blob->mutable_cpu_data<float>();
  if (!values.empty()) std::memcpy(dst, values.data(), values.size() * sizeof(float));
}

}  // namespace

void CheckLayerAgainstCaffe(const std::string& net_name, const std::string& layer_name,
                            double tolerance) {
  SCOPED_TRACE(net_name + "/" + layer_name);
  const std::string dir = ReferencePath("bvlc/numeric/" + net_name);
  if (dir.empty()) {
    CREMA_MISSING_REFERENCE("bvlc/numeric/" + net_name);
  }
  const Json manifest = ParseJson(ReadFile(dir + "/manifest.json"));
  NetParameter net;
  ASSERT_TRUE(ReadNet(dir + "/" + net_name + ".caffemodel", &net)) << net_name;
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
      ExpectNearCaffe(*top[t], false, ReadF32(dir + "/" + e["file"].string), tolerance,
                      e["file"].string, 1);
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
      ExpectNearCaffe(*bottom[b], true, ReadF32(dir + "/" + (*bottom_diffs[b])["file"].string),
                      tolerance, (*bottom_diffs[b])["file"].string, 1);
  for (const Json* e : param_diffs)
    ExpectNearCaffe(*layer->blobs()[static_cast<int>((*e)["param_index"].number)], true,
                    ReadF32(dir + "/" + (*e)["file"].string), tolerance, (*e)["file"].string, 1);
}

LayerParameter ZooLayer(const std::string& dir, const std::string& name) {
  NetParameter net;
  EXPECT_TRUE(ReadNet(dir + "/layer_zoo.caffemodel", &net)) << dir;
  if (const LayerParameter* layer = FindLayer(net, name)) return *layer;
  ADD_FAILURE() << "no layer " << name << " in layer_zoo.caffemodel";
  return LayerParameter();
}

std::unique_ptr<Blob> LoadF32(const std::string& path, const std::vector<int>& shape) {
  const std::vector<float> values = ReadF32(path);
  auto blob = std::make_unique<Blob>(shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), blob->count()) << path;
  if (static_cast<int64_t>(values.size()) == blob->count())
    std::copy(values.begin(), values.end(), blob->mutable_cpu_data<float>());
  return blob;
}

void ExpectNearRef(const Blob& actual, const std::string& path, bool diff) {
  ExpectNearCaffe(actual, diff, ReadF32(path), 2e-5, path, 5);
}

std::unique_ptr<Layer> RunZooCase(const std::string& dir, const ZooCase& c) {
  std::unique_ptr<Layer> layer = LayerRegistry::Create(ZooLayer(dir, c.layer));
  std::vector<std::unique_ptr<Blob>> bottoms;
  BlobVec bottom;
  for (const auto& [file, shape] : c.bottoms) {
    bottoms.push_back(LoadF32(dir + "/" + file, shape));
    bottom.push_back(bottoms.back().get());
  }
  Blob top;
  layer->SetUp(bottom, {&top});
  layer->Forward(bottom, {&top});
  ExpectNearRef(top, dir + "/" + c.top, false);
  const std::vector<float> top_diff = ReadF32(dir + "/" + c.top_diff);
  EXPECT_EQ(static_cast<int64_t>(top_diff.size()), top.count()) << c.top_diff;
  if (static_cast<int64_t>(top_diff.size()) != top.count()) return layer;
  std::copy(top_diff.begin(), top_diff.end(), top.mutable_cpu_diff<float>());
  EXPECT_EQ(layer->blobs().size(), c.param_diffs.size());
  for (size_t i = 0; i < layer->blobs().size(); ++i) {
    layer->blobs()[i]->SetDiffZero();
    layer->set_param_propagate_down(static_cast<int>(i), true);
  }
  std::vector<bool> propagate_down;
  for (const std::string& file : c.bottom_diffs) propagate_down.push_back(!file.empty());
  layer->Backward({&top}, propagate_down, bottom);
  for (size_t i = 0; i < c.bottom_diffs.size(); ++i)
    if (!c.bottom_diffs[i].empty()) ExpectNearRef(*bottom[i], dir + "/" + c.bottom_diffs[i], true);
  for (size_t i = 0; i < c.param_diffs.size() && i < layer->blobs().size(); ++i)
    ExpectNearRef(*layer->blobs()[i], dir + "/" + c.param_diffs[i], true);
  return layer;
}

void ExpectNearZoo(const Blob& actual, const std::string& path, bool diff) {
  ExpectNearCaffe(actual, diff, ReadF32(path), 2e-5, path, 0);
}

void CheckLayerZoo(const std::string& dir, const std::string& name,
                   const std::vector<ZooBlob>& bottoms, const std::vector<std::string>& tops,
                   const std::vector<std::string>& top_diffs,
                   const std::vector<std::string>& bottom_diffs,
                   const std::vector<std::string>& param_diffs,
                   const std::function<void(LayerParameter*)>& edit) {
  NetParameter net;
  ASSERT_TRUE(ReadNet(dir + "/layer_zoo.caffemodel", &net));
  const LayerParameter* found = FindLayer(net, name);
  ASSERT_NE(found, nullptr) << name;
  LayerParameter param = *found;
  if (edit) edit(&param);
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  std::vector<std::unique_ptr<Blob>> owned;
  BlobVec bottom, top;
  for (const ZooBlob& b : bottoms) {
    owned.push_back(std::make_unique<Blob>(b.shape));
    const std::vector<float> values = ReadF32(dir + "/" + b.file);
    ASSERT_EQ(static_cast<int64_t>(values.size()), owned.back()->count()) << b.file;
    std::copy(values.begin(), values.end(), owned.back()->mutable_cpu_data<float>());
    bottom.push_back(owned.back().get());
  }
  for (size_t i = 0; i < tops.size(); ++i) {
    owned.push_back(std::make_unique<Blob>());
    top.push_back(owned.back().get());
  }
  layer->SetUp(bottom, top);
  layer->Forward(bottom, top);
  for (size_t i = 0; i < tops.size(); ++i) ExpectNearZoo(*top[i], dir + "/" + tops[i], false);
  for (size_t i = 0; i < top_diffs.size(); ++i) {
    const std::vector<float> diff = ReadF32(dir + "/" + top_diffs[i]);
    ASSERT_EQ(static_cast<int64_t>(diff.size()), top[i]->count()) << top_diffs[i];
    std::copy(diff.begin(), diff.end(), top[i]->mutable_cpu_diff<float>());
  }
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  std::vector<bool> propagate_down;
  for (size_t i = 0; i < bottom.size(); ++i)
    propagate_down.push_back(i < bottom_diffs.size() && !bottom_diffs[i].empty());
  layer->Backward(top, propagate_down, bottom);
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) ExpectNearZoo(*bottom[i], dir + "/" + bottom_diffs[i], true);
  ASSERT_EQ(layer->blobs().size(), param_diffs.size());
  for (size_t p = 0; p < param_diffs.size(); ++p)
    ExpectNearZoo(*layer->blobs()[p], dir + "/" + param_diffs[p], true);
}

void ExpectMatchesCaffe(const CaffeDump& d) {
  SCOPED_TRACE(d.layer);
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/" + d.net);
  NetParameter net;
  ASSERT_TRUE(ReadNet(dir + "/" + d.net + ".caffemodel", &net));
  const LayerParameter* found = FindLayer(net, d.layer);
  ASSERT_NE(found, nullptr) << d.layer;
  auto layer = LayerRegistry::Create(*found);
  const std::vector<float> bottom_values = ReadF32(dir + "/" + d.bottom);
  std::vector<double> values(bottom_values.begin(), bottom_values.end());
  auto bottom = MakeBlob(d.shape, values, DataType::kFloat32);
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  ASSERT_EQ(top.shape(), d.shape);
  auto expect_near = [&](const Blob& actual, bool diff, const std::string& file) {
    ExpectNearCaffe(actual, diff, ReadF32(dir + "/" + file), 2e-5, dir + "/" + file, 1);
  };
  expect_near(top, false, d.top);
  if (d.top_diff.empty()) return;
  const std::vector<float> top_diff = ReadF32(dir + "/" + d.top_diff);
  SetDiffOf(&top, std::vector<double>(top_diff.begin(), top_diff.end()));
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  layer->Backward({&top}, {true}, {bottom.get()});
  expect_near(*bottom, true, d.bottom_diff);
  ASSERT_EQ(layer->blobs().size(), d.param_diffs.size());
  for (size_t p = 0; p < d.param_diffs.size(); ++p)
    expect_near(*layer->blobs()[p], true, d.param_diffs[p]);
}

}  // namespace crema::testing
