#include "layers/reduction/reduction_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Reduction, LayerCase("", {{2, 3, 4}}).Name("sum_all"),
    LayerCase("reduction_param { operation: SUM axis: 1 coeff: -2 }", {{2, 3, 4}}).Name("sum_ax1"),
    LayerCase("reduction_param { operation: ASUM axis: -1 coeff: 0.5 }", {{2, 3, 4}})
        .Kink(0.0)
        .Name("asum"),
    LayerCase("reduction_param { operation: SUMSQ axis: 2 coeff: 3 }", {{2, 3, 4}}).Name("sumsq"),
    LayerCase("reduction_param { operation: MEAN axis: 1 }", {{2, 3, 4}}).Name("mean"),
    LayerCase("reduction_param { operation: MEAN coeff: 2 }", {{3, 5}}).Name("mean_all"),
    LayerCase("reduction_param { operation: SUMSQ } loss_weight: 0.5", {{2, 3}}).Name("loss"));

namespace crema::testing {
namespace {

struct Op {
  const char* name;
  double (*f)(double);
  bool mean;
};

TEST(ReductionValues, MatchNaive) {
  const Op ops[] = {{"SUM", [](double x) { return x; }, false},
                    {"ASUM", [](double x) { return std::abs(x); }, false},
                    {"SUMSQ", [](double x) { return x * x; }, false},
                    {"MEAN", [](double x) { return x; }, true}};
  const std::vector<int> shape = {2, 3, 4};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (const Op& op : ops) {
      for (int axis : {0, 1, 2, -1}) {
        SCOPED_TRACE(StrCat(op.name, " axis ", axis, " ", DataTypeName(dtype)));
        const double coeff = 0.75;
        auto layer = CreateLayer(StrCat("type: 'Reduction' reduction_param { operation: ", op.name,
                                        " axis: ", axis, " coeff: ", coeff, " }"),
                                 dtype);
        Blob bottom(shape, dtype), top(dtype);
        FillUniform(&bottom, -1, 1);
        layer->SetUp({&bottom}, {&top});
        layer->Forward({&bottom}, {&top});
        const int a = axis < 0 ? axis + 3 : axis;
        EXPECT_EQ(top.shape(), std::vector<int>(shape.begin(), shape.begin() + a));
        const int64_t num = bottom.count(0, a), dim = bottom.count(a);
        const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
        for (int64_t n = 0; n < num; ++n) {
          double sum = 0;
          for (int64_t j = 0; j < dim; ++j) sum += op.f(bottom.data_at(n * dim + j));
          EXPECT_NEAR(top.data_at(n), coeff * (op.mean ? sum / dim : sum), tolerance) << n;
        }
        std::vector<double> dy(num);
        for (int64_t n = 0; n < num; ++n) dy[n] = 1.0 + n;
        SetDiffOf(&top, dy);
        layer->Backward({&top}, {true}, {&bottom});
        for (int64_t n = 0; n < num; ++n) {
          for (int64_t j = 0; j < dim; ++j) {
            const double x = bottom.data_at(n * dim + j);
            double d = coeff * dy[n];
            if (op.mean) d /= dim;
            if (std::string(op.name) == "ASUM") d *= (x > 0) - (x < 0);
            if (std::string(op.name) == "SUMSQ") d *= 2 * x;
            EXPECT_NEAR(bottom.diff_at(n * dim + j), d, tolerance) << n << " " << j;
          }
        }
      }
    }
  }
}

TEST(ReductionValues, ByHandAndSignOfZero) {
  auto layer = CreateLayer("type: 'Reduction' reduction_param { operation: ASUM axis: 1 }");
  auto bottom = MakeBlob({2, 2}, {-1, 0, 2, -3});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, 5}));
  SetDiffOf(&top, {2, 3});
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{-2, 0, 3, -3}));  // sign(0) = 0
  // The default reduces everything to a scalar; with a loss weight Forward returns the loss.
  auto sum = CreateLayer("type: 'Reduction' loss_weight: 2");
  Blob scalar(DataType::kFloat64);
  sum->SetUp({bottom.get()}, {&scalar});
  EXPECT_EQ(scalar.num_axes(), 0);
  EXPECT_EQ(sum->Forward({bottom.get()}, {&scalar}), 2 * (-1 + 0 + 2 - 3));
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Reduction' " + param);
  auto bottom = MakeBlob({2, 3}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Reduction)"), std::string::npos)
        << e.what();
  }
}

TEST(ReductionErrors, Messages) {
  ExpectError("reduction_param { axis: 2 }", "reduction_param.axis");
  ExpectError("reduction_param { axis: -3 }", "reduction_param.axis");
  auto layer = CreateLayer("type: 'Reduction'");
  auto bottom = MakeBlob({2, 3}, {});
  EXPECT_THROW(layer->SetUp({bottom.get()}, {bottom.get()}), ConfigError);
}

TEST(ReductionCaffe, LayerZoo) {
  for (const char* name : {"reduce_sumsq", "reduce_asum", "reduce_mean", "reduce_sum_all"})
    CheckLayerAgainstCaffe("layer_zoo", name);
  for (const char* name : {"loss_reindex", "loss_filter"})
    CheckLayerAgainstCaffe("layer_zoo_aux", name);
}

}  // namespace
}  // namespace crema::testing
