#include "support/layer_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"

namespace crema::testing {

void ExpectValues(const std::string& text, const std::vector<double>& x,
                  const std::vector<double>& y, const std::vector<double>& derivative) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tolerance = dtype == DataType::kFloat32 ? 2e-6 : 1e-12;
    auto layer = CreateLayer(text, dtype);
    auto bottom = MakeBlob({static_cast<int>(x.size())}, x, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    layer->Forward({bottom.get()}, {&top});
    const std::vector<double> top_data = DataOf(top);
    ASSERT_EQ(top_data.size(), y.size());
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(top_data[i], y[i], tolerance * std::max(1.0, std::abs(y[i]))) << "x = " << x[i];
    if (derivative.empty()) continue;
    std::vector<double> dy(x.size());
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5 + 0.25 * static_cast<double>(i);
    SetDiffOf(&top, dy);
    layer->Backward({&top}, {true}, {bottom.get()});
    const std::vector<double> dx = DiffOf(*bottom);
    for (size_t i = 0; i < dx.size(); ++i) {
      const double expected = dy[i] * derivative[i];
      EXPECT_NEAR(dx[i], expected, tolerance * std::max(1.0, std::abs(expected))) << "x = " << x[i];
    }
  }
}

namespace {

// SetUp must throw a ConfigError naming `field` and the layer "bad".
void ExpectSetUpThrows(Layer* layer, const BlobVec& bottom, const std::string& field) {
  Blob top;
  try {
    layer->SetUp(bottom, {&top});
    ADD_FAILURE() << "expected a ConfigError naming " << field;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\""), std::string::npos) << e.what();
  }
}

}  // namespace

void ExpectSetUpError(const std::string& text, const std::vector<std::vector<int>>& shapes,
                      const std::string& field) {
  SCOPED_TRACE(text);
  std::unique_ptr<Layer> layer = LayerRegistry::Create(ParseLayerParam("name: 'bad' " + text));
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom;
  for (const auto& shape : shapes) {
    blobs.push_back(std::make_unique<Blob>(shape));
    bottom.push_back(blobs.back().get());
  }
  ExpectSetUpThrows(layer.get(), bottom, field);
}

void ExpectParamError(const std::string& text, const std::vector<int>& shape,
                      const std::string& field) {
  SCOPED_TRACE(text);
  auto layer = CreateLayer("name: 'bad' " + text);
  Blob bottom(shape);
  ExpectSetUpThrows(layer.get(), {&bottom}, field);
}

void ExpectFusedReLUBackward(const std::string& text, const std::vector<std::vector<int>>& shapes,
                             int num_tops, int k) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto fill = [&](float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = rng() % 6 == 0 ? 0.0f : uniform(rng);
  };
  const auto bits = [](const Blob& blob) {
    std::vector<char> b(static_cast<size_t>(blob.count()) * sizeof(float));
    std::memcpy(b.data(), blob.cpu_diff<float>(), b.size());
    return b;
  };
  auto layer = CreateLayer(text, DataType::kFloat32);
  std::vector<std::unique_ptr<Blob>> bottoms, tops;
  BlobVec bottom, top;
  for (const std::vector<int>& shape : shapes) {
    bottoms.push_back(std::make_unique<Blob>(shape));
    fill(bottoms.back()->mutable_cpu_data<float>(), bottoms.back()->count());
    bottom.push_back(bottoms.back().get());
  }
  for (int t = 0; t < num_tops; ++t) {
    tops.push_back(std::make_unique<Blob>());
    top.push_back(tops.back().get());
  }
  layer->SetUp(bottom, top);
  layer->Forward(bottom, top);
  for (Blob* t : top) fill(t->mutable_cpu_diff<float>(), t->count());
  const std::vector<bool> down(bottom.size(), true);
  layer->Backward(top, down, bottom);
  std::vector<std::vector<char>> plain;
  for (Blob* b : bottom) plain.push_back(bits(*b));
  for (float slope : {0.0f, 0.25f}) {
    SCOPED_TRACE("negative_slope " + std::to_string(slope));
    // The ReLU layer's own Backward, in place on a copy of bottom k with the plain gradient.
    auto relu =
        CreateLayer("type: 'ReLU' relu_param { negative_slope: " + std::to_string(slope) + " }",
                    DataType::kFloat32);
    Blob y;
    y.CopyFrom(*bottom[k], false, true);
    std::memcpy(y.mutable_cpu_diff<float>(), plain[k].data(), plain[k].size());
    relu->SetUp({&y}, {&y});
    relu->Backward({&y}, {true}, {&y});
    std::vector<float> slopes(bottom.size(), std::nanf(""));
    slopes[k] = slope;
    layer->set_fused_relu_backward(slopes);
    layer->Backward(top, down, bottom);
    EXPECT_TRUE(layer->fused_relu_backward_taken(k));
    layer->set_fused_relu_backward({});
    for (size_t b = 0; b < bottom.size(); ++b)
      EXPECT_TRUE(bits(*bottom[b]) == (static_cast<int>(b) == k ? bits(y) : plain[b]))
          << "bottom " << b;
  }
}

}  // namespace crema::testing
