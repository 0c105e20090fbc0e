// Fine-tuning in the Net: weights copied by name with a report and --skip-mismatched semantics,
// fp16 weights (BlobProto.half_data), and FreezeLayers matching `param { lr_mult: 0 }`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"

namespace crema {
namespace {

// A TRAIN net from prototxt text, through crema's reader (legacy upgrades, locations).
std::unique_ptr<Net> Build(const std::string& text) {
  NetParameter param;
  NetOptions options;
  options.source = ParseTextProto(text, "chain.prototxt", &param);
  options.override_state = true;
  options.state.set_phase(TRAIN);
  options.verbose = false;
  return std::make_unique<Net>(param, options);
}

// data -> ip1 -> relu -> ip2 -> loss(label); `ip1_param`/`ip2_param` are inserted in the layers.
std::string ChainNet(const std::string& ip1_param = "", const std::string& ip2_param = "",
                     int ip2_outputs = 2) {
  return R"(name: "chain"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: )" +
         std::to_string(ip2_outputs) + R"( } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "h" )" +
         ip1_param + R"(
        inner_product_param { num_output: 4 weight_filler { type: "constant" value: 0.5 }
                              bias_filler { type: "constant" value: 0.25 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "p" )" +
         ip2_param + R"(
        inner_product_param { num_output: )" +
         std::to_string(ip2_outputs) + R"( weight_filler { type: "constant" value: -1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "label" top: "loss" }
)";
}

constexpr char kFrozen[] = "param { lr_mult: 0 } param { lr_mult: 0 }";

bool LayersRegistered() {
  for (const char* type : {"Input", "InnerProduct", "ReLU", "EuclideanLoss"})
    if (!LayerRegistry::Has(type)) return false;
  return true;
}

// The backward bookkeeping of two nets, layer by layer.
void ExpectSameBackward(const Net& a, const Net& b) {
  ASSERT_EQ(a.num_layers(), b.num_layers());
  EXPECT_EQ(a.layer_need_backward(), b.layer_need_backward());
  EXPECT_EQ(a.bottom_need_backward(), b.bottom_need_backward());
  EXPECT_EQ(a.params_lr(), b.params_lr());
  for (int i = 0; i < a.num_layers(); ++i)
    for (size_t j = 0; j < a.layers()[i]->blobs().size(); ++j)
      EXPECT_EQ(a.layers()[i]->param_propagate_down(static_cast<int>(j)),
                b.layers()[i]->param_propagate_down(static_cast<int>(j)))
          << a.layer_names()[i] << " param " << j;
}

TEST(FreezeLayers, SameAsLrMultZeroInThePrototxt) {
  if (!LayersRegistered()) GTEST_SKIP();
  for (const char* layer : {"ip1", "ip2"}) {
    const bool first = std::strcmp(layer, "ip1") == 0;
    auto frozen_in_file = Build(first ? ChainNet(kFrozen) : ChainNet("", kFrozen));
    auto frozen_later = Build(ChainNet());
    frozen_later->FreezeLayers({layer});
    ExpectSameBackward(*frozen_in_file, *frozen_later);
  }
  // Caffe's param_need_backward: ip1 sees only the input, so frozen it needs no backward at
  // all; ip2 still passes gradients down to ip1 but computes none for its own params.
  auto net = Build(ChainNet());
  const int ip1 = net->layer_index("ip1"), ip2 = net->layer_index("ip2");
  EXPECT_TRUE(net->layer_need_backward()[ip1]);
  net->FreezeLayers({"ip1"});
  EXPECT_FALSE(net->layer_need_backward()[ip1]);
  EXPECT_TRUE(net->layer_need_backward()[ip2]);
  EXPECT_FALSE(net->bottom_need_backward()[ip2][0]);  // nobody below wants h's gradient
  auto net2 = Build(ChainNet());
  net2->FreezeLayers({"ip2"});
  EXPECT_TRUE(net2->layer_need_backward()[ip2]);
  EXPECT_TRUE(net2->bottom_need_backward()[ip2][0]);
  EXPECT_FALSE(net2->layers()[ip2]->param_propagate_down(0));
  EXPECT_TRUE(net2->layers()[ip1]->param_propagate_down(0));
  EXPECT_EQ(net2->params_lr()[2], 0.0f);  // ip2's weight (ip1 has weight and bias first)
  EXPECT_EQ(net2->params_lr()[0], 1.0f);
}

TEST(FreezeLayers, FrozenParamsGetNoGradient) {
  if (!LayersRegistered()) GTEST_SKIP();
  auto net = Build(ChainNet());
  net->FreezeLayers({"ip2"});
  Blob* data = net->blob_by_name("data").get();
  for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data<float>()[i] = 1.0f + i;
  Blob* label = net->blob_by_name("label").get();
  for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data<float>()[i] = 3.0f;
  net->ClearParamDiffs();
  net->ForwardBackward();
  const Layer& ip1 = *net->layer_by_name("ip1");
  const Layer& ip2 = *net->layer_by_name("ip2");
  EXPECT_EQ(ip2.blobs()[0]->asum_diff(), 0.0);  // not computed
  EXPECT_GT(ip1.blobs()[0]->asum_diff(), 0.0);  // still learned through ip2's bottom gradient
}

TEST(FreezeLayers, Errors) {
  if (!LayersRegistered()) GTEST_SKIP();
  auto net = Build(ChainNet());
  EXPECT_THROW(net->FreezeLayers({"nope"}), ConfigError);
  // A param shared with a layer that is not frozen cannot be frozen alone.
  auto shared = Build(ChainNet("", "", 4) + R"(
layer { name: "ip3" type: "InnerProduct" bottom: "p" top: "q" param { name: "w3" }
        inner_product_param { num_output: 4 bias_term: false } }
layer { name: "ip4" type: "InnerProduct" bottom: "q" top: "r" param { name: "w3" }
        inner_product_param { num_output: 4 bias_term: false } }
layer { name: "loss2" type: "EuclideanLoss" bottom: "r" bottom: "label" top: "loss2" })");
  try {
    shared->FreezeLayers({"ip3"});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ip4"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(shared->FreezeLayers({"ip3", "ip4"}));
}

// Weights for ChainNet with ip1 (4x3 + 4) and ip2 (`outputs` x 4) holding i/10 for element i.
NetParameter ChainWeights(int ip2_outputs) {
  NetParameter weights;
  auto add = [&](const std::string& name, std::vector<std::vector<int>> shapes) {
    LayerParameter* layer = weights.add_layer();
    layer->set_name(name);
    layer->set_type("InnerProduct");
    for (const auto& shape : shapes) {
      BlobProto* blob = layer->add_blobs();
      int count = 1;
      for (int d : shape) {
        blob->mutable_shape()->add_dim(d);
        count *= d;
      }
      for (int i = 0; i < count; ++i) blob->add_data(static_cast<float>(i) / 10);
    }
  };
  add("ip1", {{4, 3}, {4}});
  add("ip2", {{ip2_outputs, 4}, {ip2_outputs}});
  add("unused", {{1}});
  return weights;
}

TEST(CopyTrainedLayers, ReportsCopiedLayers) {
  if (!LayersRegistered()) GTEST_SKIP();
  auto net = Build(ChainNet());
  const WeightsCopy copy = net->CopyTrainedLayersFrom(ChainWeights(2), false);
  EXPECT_EQ(copy.copied, (std::vector<std::string>{"ip1", "ip2"}));
  EXPECT_TRUE(copy.skipped.empty());
  EXPECT_FLOAT_EQ(net->layer_by_name("ip2")->blobs()[0]->data_at(5), 0.5f);
}

TEST(CopyTrainedLayers, ShapeMismatchIsAnErrorNamingLayerBlobAndShapes) {
  if (!LayersRegistered()) GTEST_SKIP();
  auto net = Build(ChainNet());
  try {
    net->CopyTrainedLayersFrom(ChainWeights(3), false);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("\"ip2\""), std::string::npos) << what;
    EXPECT_NE(what.find("param 0"), std::string::npos) << what;
    EXPECT_NE(what.find("3 4"), std::string::npos) << what;
    EXPECT_NE(what.find("2 4"), std::string::npos) << what;
  }
}

TEST(CopyTrainedLayers, SkipMismatchedKeepsTheFillersOfTheWholeLayer) {
  if (!LayersRegistered()) GTEST_SKIP();
  // ip2's weight matches (2 x 4) but its bias does not (3 vs 2): nothing of ip2 is copied.
  NetParameter weights = ChainWeights(2);
  BlobProto* bias = weights.mutable_layer(1)->mutable_blobs(1);
  bias->mutable_shape()->set_dim(0, 3);
  bias->add_data(9);
  auto net = Build(ChainNet());
  const WeightsCopy copy = net->CopyTrainedLayersFrom(weights, true);
  EXPECT_EQ(copy.copied, (std::vector<std::string>{"ip1"}));
  ASSERT_EQ(copy.skipped.size(), 1u);
  EXPECT_EQ(copy.skipped[0].first, "ip2");
  EXPECT_NE(copy.skipped[0].second.find("param 1"), std::string::npos);
  const Layer& ip2 = *net->layer_by_name("ip2");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ip2.blobs()[0]->data_at(i), -1.0);  // its filler
  EXPECT_FLOAT_EQ(net->layer_by_name("ip1")->blobs()[0]->data_at(7), 0.7f);
}

TEST(CopyTrainedLayers, Hdf5WeightsSkipMismatchedToo) {
  if (!LayersRegistered()) GTEST_SKIP();
  const std::string path = ::testing::TempDir() + "/finetune_chain3.caffemodel.h5";
  Build(ChainNet("", "", 3))->ToHDF5(path);  // ip2 is 3 x 4 there
  auto net = Build(ChainNet());
  EXPECT_THROW(net->CopyTrainedLayersFrom(path), ConfigError);
  const WeightsCopy copy = net->CopyTrainedLayersFrom(path, true);
  EXPECT_EQ(copy.copied, (std::vector<std::string>{"ip1"}));
  ASSERT_EQ(copy.skipped.size(), 1u);
  EXPECT_EQ(copy.skipped[0].first, "ip2");
  EXPECT_NE(copy.skipped[0].second.find("3 4"), std::string::npos) << copy.skipped[0].second;
}

// Binary16 reference values computed by hand: sign, 5 exponent bits (bias 15), 10 mantissa bits.
TEST(Half, KnownEncodings) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);               // below the midpoint to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);               // the midpoint, ties to even: infinity
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);                   // 0.0999755859375
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // half of it: ties to even (0)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even mantissa stays
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal carries into normal
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Half, EveryHalfRoundTripsAndDecodesAsTheFormulaSays) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1 : 1;
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (exponent == 0x1f) {
      EXPECT_TRUE(mantissa ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    const double expected = exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                          : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(static_cast<double>(f), expected) << h;
    ASSERT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(Half, RoundsToTheNearestHalf) {
  // Against a brute-force nearest search over the neighbouring halves, in double.
  for (float x : {0.3f, -1.7e-3f, 1234.567f, 3.14159f, 6.1e-5f, 2.2e-7f, -40000.5f}) {
    const uint16_t h = FloatToHalf(x);
    const double error = std::fabs(static_cast<double>(HalfToFloat(h)) - x);
    for (int d : {-1, 1})
      EXPECT_LE(error, std::fabs(static_cast<double>(HalfToFloat(h + d)) - x)) << x;
  }
}

TEST(Half, BlobFromProtoWidensHalfData) {
  BlobProto proto;
  proto.mutable_shape()->add_dim(3);
  const float values[3] = {0.1f, -2.5f, 1000.25f};
  proto.set_half_data(PackHalves(values, 3));
  Blob f32;
  f32.FromProto(proto);
  Blob f64(DataType::kFloat64);
  f64.FromProto(proto);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(f32.data_at(i), values[i], std::fabs(values[i]) / 2048) << i;
    EXPECT_EQ(f64.data_at(i), f32.data_at(i));
  }
  EXPECT_EQ(f32.data_at(0), 0.0999755859375);
  proto.mutable_half_data()->pop_back();
  EXPECT_THROW(f32.FromProto(proto), ConfigError);
}

}  // namespace
}  // namespace crema
