#include "layers/softmax/softmax_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(Softmax, LayerCase("", {{2, 3, 4, 5}}),
                        LayerCase("softmax_param { axis: 2 }", {{2, 3, 4, 5}}),
                        LayerCase("softmax_param { axis: -1 }", {{2, 3, 4, 5}}).Range(-5, 5),
                        LayerCase("softmax_param { axis: 0 }", {{4, 6}}), LayerCase("", {{5, 1}}));

namespace crema::testing {
namespace {

// Naive double softmax along `axis` of a row-major array of `shape`.
std::vector<double> ReferenceSoftmax(const std::vector<int>& shape, int axis,
                                     const std::vector<double>& x) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  const int channels = shape[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += std::exp(x[(o * channels + c) * inner + k]);
      for (int c = 0; c < channels; ++c) {
        const int64_t j = (o * channels + c) * inner + k;
        y[j] = std::exp(x[j]) / sum;
      }
    }
  return y;
}

struct AxisCase {
  int axis;
  int canonical;
};

class SoftmaxValues : public ::testing::TestWithParam<AxisCase> {};

TEST_P(SoftmaxValues, MatchesNaiveReference) {
  const std::vector<int> shape = {2, 3, 4, 5};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer =
        CreateLayer(StrCat("type: 'Softmax' softmax_param { axis: ", GetParam().axis, " }"), dtype);
    Blob x64(shape, DataType::kFloat64);
    FillUniform(&x64, -3, 3, 7);
    const std::vector<double> x = DataOf(x64);
    auto bottom = MakeBlob(shape, x, dtype);
    Blob top;
    layer->SetUp({bottom.get()}, {&top});
    layer->Forward({bottom.get()}, {&top});
    std::vector<double> x_rounded = DataOf(*bottom);
    const std::vector<double> expected = ReferenceSoftmax(shape, GetParam().canonical, x_rounded);
    const std::vector<double> y = DataOf(top);
    ASSERT_EQ(top.shape(), shape);
    const double tolerance = dtype == DataType::kFloat32 ? 1e-6 : 1e-14;
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], tolerance) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Axes, SoftmaxValues,
                         ::testing::Values(AxisCase{1, 1}, AxisCase{0, 0}, AxisCase{2, 2},
                                           AxisCase{3, 3}, AxisCase{-1, 3}, AxisCase{-4, 0}));

TEST(SoftmaxLayer, LargeInputsAreStable) {
  auto layer = CreateLayer("type: 'Softmax'", DataType::kFloat32);
  auto bottom = MakeBlob({1, 3}, {1000, 1001, -1000}, DataType::kFloat32);
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  const double e = std::exp(1.0);
  EXPECT_NEAR(top.data_at(0), 1 / (1 + e), 1e-6);
  EXPECT_NEAR(top.data_at(1), e / (1 + e), 1e-6);
  EXPECT_EQ(top.data_at(2), 0.0);
}

TEST(SoftmaxLayer, BackwardMatchesJacobian) {
  auto layer = CreateLayer("type: 'Softmax'");
  auto bottom = MakeBlob({1, 3}, {0.2, -0.4, 1.1});
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  const std::vector<double> y = DataOf(top);
  const std::vector<double> dy = {0.5, -1, 2};
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true}, {bottom.get()});
  for (int i = 0; i < 3; ++i) {
    double expected = 0;  // sum_j dy_j * dy_j/dx_i, dy_j/dx_i = y_j (delta_ij - y_i)
    for (int j = 0; j < 3; ++j) expected += dy[j] * y[j] * ((i == j) - y[i]);
    EXPECT_NEAR(bottom->diff_at(i), expected, 1e-14) << i;
  }
}

TEST(SoftmaxLayer, AxisOutOfRangeIsConfigError) {
  auto layer = CreateLayer("name: 'prob' type: 'Softmax' softmax_param { axis: 4 }");
  auto bottom = MakeBlob({2, 3, 4, 5}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("softmax_param.axis"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"prob\" (Softmax)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crema::testing
