#include "support/layer_checks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

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

}  // namespace crema::testing
