#include "layers/shuffle_channel/shuffle_channel_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    ShuffleChannel, LayerCase("", {{2, 3, 2, 2}}).Name("group1_identity"),
    LayerCase("shuffle_channel_param { group: 2 }", {{2, 4, 3, 2}}).Name("group2"),
    LayerCase("shuffle_channel_param { group: 3 }", {{2, 6, 2}}).Name("group3_3d"),
    LayerCase("shuffle_channel_param { group: 4 }", {{1, 8, 1, 1}}).Name("group4"),
    LayerCase("shuffle_channel_param { group: 6 }", {{2, 6, 2, 3}}).Name("group_equals_c"));

namespace crema::testing {
namespace {

// One value per channel (spatial 1x2: both hold the channel index) for N = 2.
std::vector<double> Channels(int channels) {
  std::vector<double> values;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < channels; ++c) {
      values.push_back(100 * n + c);
      values.push_back(100 * n + c + 0.5);
    }
  return values;
}

std::vector<double> Order(const std::vector<int>& channel_order) {
  std::vector<double> values;
  for (int n = 0; n < 2; ++n)
    for (int c : channel_order) {
      values.push_back(100 * n + c);
      values.push_back(100 * n + c + 0.5);
    }
  return values;
}

void CheckShuffle(int group, int channels, const std::vector<int>& forward_order,
                  const std::vector<int>& backward_order) {
  SCOPED_TRACE(group);
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    auto layer = CreateLayer(
        "type: 'ShuffleChannel' shuffle_channel_param { group: " + std::to_string(group) + " }",
        dtype);
    auto bottom = MakeBlob({2, channels, 1, 2}, Channels(channels), dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    EXPECT_EQ(top.shape(), bottom->shape());
    layer->Forward({bottom.get()}, {&top});
    EXPECT_EQ(DataOf(top), Order(forward_order));
    SetDiffOf(&top, Channels(channels));
    layer->Backward({&top}, {true}, {bottom.get()});
    EXPECT_EQ(DiffOf(*bottom), Order(backward_order));
  }
}

TEST(ShuffleChannelValues, Order) {
  // (g, i) -> (i, g): top channel i * group + g reads bottom channel g * (C / group) + i.
  CheckShuffle(2, 6, {0, 3, 1, 4, 2, 5}, {0, 2, 4, 1, 3, 5});
  CheckShuffle(3, 6, {0, 2, 4, 1, 3, 5}, {0, 3, 1, 4, 2, 5});
  CheckShuffle(2, 4, {0, 2, 1, 3}, {0, 2, 1, 3});
  CheckShuffle(1, 3, {0, 1, 2}, {0, 1, 2});
  CheckShuffle(4, 4, {0, 1, 2, 3}, {0, 1, 2, 3});
}

TEST(ShuffleChannelValues, BackwardInvertsForward) {
  auto layer = CreateLayer("type: 'ShuffleChannel' shuffle_channel_param { group: 3 }");
  auto bottom = MakeBlob({2, 12, 2, 3}, {});
  FillUniform(bottom.get(), -1, 1);
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, DataOf(top));
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), DataOf(*bottom));
  EXPECT_NE(DataOf(top), DataOf(*bottom));
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'ShuffleChannel' " + param);
  auto bottom = MakeBlob({1, 6, 2, 2}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (ShuffleChannel)"), std::string::npos)
        << e.what();
  }
}

TEST(ShuffleChannelErrors, Messages) {
  ExpectError("shuffle_channel_param { group: 0 }", "shuffle_channel_param.group must be >= 1");
  ExpectError("shuffle_channel_param { group: 4 }",
              "shuffle_channel_param.group must divide the channels: 6 channels");
  ExpectError("shuffle_channel_param { group: 7 }", "shuffle_channel_param.group");
}

TEST(ShuffleChannelErrors, NotInPlace) {
  auto layer = CreateLayer("type: 'ShuffleChannel'");
  auto blob = MakeBlob({1, 2, 2, 2}, {});
  EXPECT_THROW(layer->SetUp({blob.get()}, {blob.get()}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
