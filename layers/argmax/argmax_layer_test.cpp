#include "layers/argmax/argmax_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(ArgMax,
                        LayerCase("", {{3, 4, 2}}).NoGradient(0).NoGradientCheck().Name("default"),
                        LayerCase("argmax_param { top_k: 3 out_max_val: true }", {{3, 5}})
                            .NoGradient(0)
                            .NoGradientCheck()
                            .Name("top_k_values"),
                        LayerCase("argmax_param { axis: 1 top_k: 2 }", {{2, 4, 3}})
                            .NoGradient(0)
                            .NoGradientCheck()
                            .Name("axis"),
                        LayerCase("argmax_param { axis: -1 out_max_val: true top_k: 2 }",
                                  {{2, 3, 4}})
                            .NoGradient(0)
                            .NoGradientCheck()
                            .Name("axis_values"));

namespace crema::testing {
namespace {

// The top_k (value, index) pairs of `values`, by decreasing value, ties to the larger index.
std::vector<std::pair<double, int>> TopK(const std::vector<double>& values, int k) {
  std::vector<std::pair<double, int>> pairs;
  for (size_t i = 0; i < values.size(); ++i) pairs.push_back({values[i], static_cast<int>(i)});
  std::sort(pairs.begin(), pairs.end(), std::greater<>());
  pairs.resize(k);
  return pairs;
}

TEST(ArgMaxValues, NoAxisMatchesNaive) {
  for (bool out_max_val : {false, true}) {
    for (int k : {1, 3}) {
      auto layer = CreateLayer(StrCat("type: 'ArgMax' argmax_param { top_k: ", k,
                                      " out_max_val: ", out_max_val ? "true" : "false", " }"));
      Blob bottom(std::vector<int>{3, 2, 4}, DataType::kFloat64), top(DataType::kFloat64);
      FillUniform(&bottom, -1, 1);
      layer->SetUp({&bottom}, {&top});
      layer->Forward({&bottom}, {&top});
      EXPECT_EQ(top.shape(), (std::vector<int>{3, out_max_val ? 2 : 1, k}));
      for (int n = 0; n < 3; ++n) {
        std::vector<double> item(8);
        for (int j = 0; j < 8; ++j) item[j] = bottom.data_at(n * 8 + j);
        const auto expected = TopK(item, k);
        const int stride = out_max_val ? 2 * k : k;
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(top.data_at(n * stride + j), expected[j].second);
          if (out_max_val) {
            EXPECT_EQ(top.data_at(n * stride + k + j), expected[j].first);
          }
        }
      }
    }
  }
}

TEST(ArgMaxValues, AxisMatchesNaive) {
  for (bool out_max_val : {false, true}) {
    auto layer = CreateLayer(StrCat("type: 'ArgMax' argmax_param { axis: 1 top_k: 2 out_max_val: ",
                                    out_max_val ? "true" : "false", " }"));
    Blob bottom(std::vector<int>{2, 5, 3}, DataType::kFloat64), top(DataType::kFloat64);
    FillUniform(&bottom, -1, 1);
    layer->SetUp({&bottom}, {&top});
    layer->Forward({&bottom}, {&top});
    EXPECT_EQ(top.shape(), (std::vector<int>{2, 2, 3}));
    for (int n = 0; n < 2; ++n) {
      for (int w = 0; w < 3; ++w) {
        std::vector<double> column(5);
        for (int c = 0; c < 5; ++c) column[c] = bottom.data_at((n * 5 + c) * 3 + w);
        const auto expected = TopK(column, 2);
        for (int j = 0; j < 2; ++j)
          EXPECT_EQ(top.data_at((n * 2 + j) * 3 + w),
                    out_max_val ? expected[j].first : expected[j].second);
      }
    }
  }
}

TEST(ArgMaxValues, ByHandTiesAndSmallBottoms) {
  auto layer = CreateLayer("type: 'ArgMax' argmax_param { top_k: 2 out_max_val: true }");
  auto bottom = MakeBlob({2, 3}, {1, 5, 5, 2, -1, 0});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 2, 2}));  // padded to 3 axes
  // A tie goes to the larger index first, as Caffe's sort of (value, index) pairs.
  EXPECT_EQ(DataOf(top), (std::vector<double>{2, 1, 5, 5, 0, 2, 2, 0}));
}

TEST(ArgMaxLayer, NoGradient) {
  auto layer = CreateLayer("type: 'ArgMax'");
  EXPECT_FALSE(layer->AllowForceBackward(0));
  auto bottom = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_NO_THROW(layer->Backward({&top}, {false}, {bottom.get()}));
  EXPECT_THROW(layer->Backward({&top}, {true}, {bottom.get()}), ConfigError);
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'ArgMax' " + param);
  auto bottom = MakeBlob({2, 3, 2}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (ArgMax)"), std::string::npos) << e.what();
  }
}

TEST(ArgMaxErrors, Messages) {
  ExpectError("argmax_param { top_k: 0 }", "argmax_param.top_k");
  ExpectError("argmax_param { top_k: 7 }", "argmax_param.top_k");
  ExpectError("argmax_param { axis: 1 top_k: 4 }", "argmax_param.top_k");
  ExpectError("argmax_param { axis: 3 }", "argmax_param.axis");
  ExpectError("argmax_param { axis: -4 }", "argmax_param.axis");
}

TEST(ArgMaxCaffe, LayerZooAux) {
  for (const char* name : {"argmax", "argmax_axis", "argmax_axis_val"})
    CheckLayerAgainstCaffe("layer_zoo_aux", name);
}

}  // namespace
}  // namespace crema::testing
