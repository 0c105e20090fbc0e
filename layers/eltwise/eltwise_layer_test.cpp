#include "layers/eltwise/eltwise_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Eltwise, LayerCase("", {{2, 3, 4}, {2, 3, 4}}).Eltwise().Name("sum"),
    LayerCase("eltwise_param { operation: SUM coeff: 2 coeff: -0.5 coeff: 1 }",
              {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}})
        .Eltwise()
        .Name("sum_coeff"),
    LayerCase("eltwise_param { operation: PROD }", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}})
        .Eltwise()
        .Name("prod"),
    LayerCase("eltwise_param { operation: PROD stable_prod_grad: false }", {{2, 3, 4}, {2, 3, 4}})
        .Range(0.5, 1.5)
        .Eltwise()
        .Name("prod_unstable"),
    LayerCase("eltwise_param { operation: MAX }", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}})
        .Eltwise()
        .Name("max"));

namespace crema::testing {
namespace {

struct Inputs {
  std::unique_ptr<Blob> a = MakeBlob({2, 3}, {1, -2, 3, 0.5, 2, -1});
  std::unique_ptr<Blob> b = MakeBlob({2, 3}, {2, -3, 3, -4, 0.25, 5});
  std::unique_ptr<Blob> c = MakeBlob({2, 3}, {-1, 4, 0, 1, 0.5, 5});
  BlobVec all() const { return {a.get(), b.get(), c.get()}; }
};

std::vector<double> RunForward(const std::string& param, const Inputs& in, Blob* top,
                               std::unique_ptr<Layer>* layer_out = nullptr) {
  auto layer = CreateLayer("type: 'Eltwise' " + param);
  layer->SetUp(in.all(), {top});
  layer->Forward(in.all(), {top});
  if (layer_out) *layer_out = std::move(layer);
  return DataOf(*top);
}

TEST(EltwiseValues, ForwardByHand) {
  Inputs in;
  Blob top(DataType::kFloat64);
  EXPECT_EQ(RunForward("eltwise_param { operation: PROD }", in, &top),
            (std::vector<double>{-2, 24, 0, -2, 0.25, -25}));
  EXPECT_EQ(RunForward("", in, &top), (std::vector<double>{2, -1, 6, -2.5, 2.75, 9}));
  EXPECT_EQ(RunForward("eltwise_param { coeff: 1 coeff: -2 coeff: 0.5 }", in, &top),
            (std::vector<double>{-3.5, 6, -3, 9, 1.75, -8.5}));
  EXPECT_EQ(RunForward("eltwise_param { operation: MAX }", in, &top),
            (std::vector<double>{2, 4, 3, 1, 2, 5}));
}

TEST(EltwiseValues, BackwardByHand) {
  Inputs in;
  Blob top(DataType::kFloat64);
  std::unique_ptr<Layer> layer;
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6};
  // MAX: element 2 ties a = b = 3 (Caffe gives it to bottom 1, and c = 0 does not win);
  // element 5 ties b = c = 5 (the earlier bottom, b, keeps it).
  RunForward("eltwise_param { operation: MAX }", in, &top, &layer);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true, true, true}, in.all());
  EXPECT_EQ(DiffOf(*in.a), (std::vector<double>{0, 0, 0, 0, 5, 0}));
  EXPECT_EQ(DiffOf(*in.b), (std::vector<double>{1, 0, 3, 0, 0, 6}));
  EXPECT_EQ(DiffOf(*in.c), (std::vector<double>{0, 2, 0, 4, 0, 0}));
  // SUM with coefficients: dx_i = c_i dy.
  RunForward("eltwise_param { coeff: 1 coeff: -2 coeff: 0.5 }", in, &top, &layer);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true, true, false}, in.all());
  EXPECT_EQ(DiffOf(*in.a), dy);
  EXPECT_EQ(DiffOf(*in.b), (std::vector<double>{-2, -4, -6, -8, -10, -12}));
  EXPECT_EQ(DiffOf(*in.c), (std::vector<double>{0, 2, 0, 4, 0, 0}));  // untouched
  // PROD, stable: dx_a = b * c * dy, exact even where a = 0 ... and where c = 0.
  RunForward("eltwise_param { operation: PROD }", in, &top, &layer);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true, true, true}, in.all());
  const std::vector<double> a = DataOf(*in.a), b = DataOf(*in.b), c = DataOf(*in.c);
  for (int i = 0; i < 6; ++i) {
    EXPECT_DOUBLE_EQ(DiffOf(*in.a)[i], b[i] * c[i] * dy[i]) << i;
    EXPECT_DOUBLE_EQ(DiffOf(*in.b)[i], a[i] * c[i] * dy[i]) << i;
    EXPECT_DOUBLE_EQ(DiffOf(*in.c)[i], a[i] * b[i] * dy[i]) << i;
  }
  // PROD, unstable (Caffe's top / x): the same away from zeros, NaN where the input is 0.
  RunForward("eltwise_param { operation: PROD stable_prod_grad: false }", in, &top, &layer);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true, true, true}, in.all());
  EXPECT_DOUBLE_EQ(DiffOf(*in.a)[0], b[0] * c[0] * dy[0]);
  EXPECT_TRUE(std::isnan(DiffOf(*in.c)[2]));
}

void ExpectError(const std::string& param, const std::vector<std::vector<int>>& shapes,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Eltwise' " + param);
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom;
  for (const auto& s : shapes) {
    blobs.push_back(MakeBlob(s, {}));
    bottom.push_back(blobs.back().get());
  }
  Blob top;
  try {
    layer->SetUp(bottom, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Eltwise)"), std::string::npos) << e.what();
  }
}

TEST(EltwiseErrors, Messages) {
  ExpectError("eltwise_param { coeff: 1 }", {{2, 3}, {2, 3}}, "eltwise_param.coeff");
  ExpectError("eltwise_param { operation: PROD coeff: 1 coeff: 2 }", {{2, 3}, {2, 3}},
              "eltwise_param.coeff");
  ExpectError("", {{2, 3}, {3, 2}}, "same shape");
  ExpectError("", {{2, 3}}, "at least 2 bottom");
  auto layer = CreateLayer("type: 'Eltwise'");
  auto a = MakeBlob({2, 3}, {}), b = MakeBlob({2, 3}, {});
  EXPECT_THROW(layer->SetUp({a.get(), b.get()}, {a.get()}), ConfigError);
  EXPECT_FALSE(layer->AllowsInPlace());
}

TEST(EltwiseCaffe, LayerZoo) {
  for (const char* name :
       {"eltwise_sum", "eltwise_prod", "eltwise_max", "eltwise_sum_plain", "ip_sum"})
    CheckLayerAgainstCaffe("layer_zoo", name);
}

}  // namespace
}  // namespace crema::testing
