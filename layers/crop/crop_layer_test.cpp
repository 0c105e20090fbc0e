#include "layers/crop/crop_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Crop, LayerCase("", {{2, 3, 5, 6}, {2, 1, 3, 4}}).NoGradient(1).Name("default_axis2"),
    LayerCase("crop_param { axis: 1 offset: 1 }", {{2, 4, 5, 4}, {1, 2, 3, 2}})
        .NoGradient(1)
        .Name("one_offset"),
    LayerCase("crop_param { axis: 0 offset: 1 offset: 0 offset: 2 }", {{3, 3, 5}, {2, 2, 2}})
        .NoGradient(1)
        .Name("offsets"),
    LayerCase("crop_param { axis: -1 offset: 3 }", {{2, 3, 6}, {1, 1, 3}})
        .NoGradient(1)
        .Name("last_axis"));

namespace crema::testing {
namespace {

// top[i] = bottom[i + offset] per axis, by walking every top index.
void CheckNaive(const std::string& param, const std::vector<int>& big_shape,
                const std::vector<int>& small_shape, const std::vector<int>& offsets,
                DataType dtype) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("type: 'Crop' " + param, dtype);
  Blob big(big_shape, dtype), like(small_shape, dtype), top(dtype);
  FillUniform(&big, -1, 1);
  layer->SetUp({&big, &like}, {&top});
  layer->Forward({&big, &like}, {&top});
  const int axes = static_cast<int>(big_shape.size());
  std::vector<int> top_shape = top.shape();
  ASSERT_EQ(top.num_axes(), axes);
  std::vector<double> dy(top.count());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 1.0 + static_cast<double>(i);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true, false}, {&big, &like});
  std::vector<double> expected_diff(big.count(), 0.0);
  std::vector<int> index(axes, 0);
  for (int64_t t = 0; t < top.count(); ++t) {
    int64_t rest = t, b = 0, stride = 1;
    for (int a = axes - 1; a >= 0; --a) {
      index[a] = static_cast<int>(rest % top_shape[a]);
      rest /= top_shape[a];
    }
    for (int a = axes - 1; a >= 0; --a) {
      b += (index[a] + offsets[a]) * stride;
      stride *= big_shape[a];
    }
    ASSERT_EQ(top.data_at(t), big.data_at(b)) << t;
    expected_diff[b] = dy[t];
  }
  EXPECT_EQ(DiffOf(big), expected_diff);
}

TEST(CropValues, MatchNaive) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    CheckNaive("", {2, 3, 5, 6}, {1, 1, 3, 4}, {0, 0, 0, 0}, dtype);
    CheckNaive("crop_param { offset: 1 }", {2, 3, 5, 6}, {1, 1, 3, 4}, {0, 0, 1, 1}, dtype);
    CheckNaive("crop_param { axis: 1 offset: 1 offset: 2 offset: 0 }", {2, 3, 5, 6}, {1, 2, 3, 4},
               {0, 1, 2, 0}, dtype);
    CheckNaive("crop_param { axis: 0 offset: 1 }", {3, 4, 4}, {2, 2, 3}, {1, 1, 1}, dtype);
  }
}

TEST(CropValues, ByHandAndTopShape) {
  auto layer = CreateLayer("type: 'Crop' crop_param { axis: 1 offset: 1 }");
  auto big = MakeBlob({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto like = MakeBlob({7, 2}, {});
  Blob top(DataType::kFloat64);
  layer->SetUp({big.get(), like.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 2}));  // axis 0 keeps bottom 0's size
  layer->Forward({big.get(), like.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, 2, 5, 6}));
  SetDiffOf(&top, {1, 2, 3, 4});
  SetDiffOf(like.get(), std::vector<double>(14, 9.0));
  layer->Backward({&top}, {true, true}, {big.get(), like.get()});
  EXPECT_EQ(DiffOf(*big), (std::vector<double>{0, 1, 2, 0, 0, 3, 4, 0}));
  EXPECT_EQ(DiffOf(*like), std::vector<double>(14, 0.0));  // the shape input: zero gradient
  EXPECT_TRUE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->AllowForceBackward(1));
}

void ExpectError(const std::string& param, const std::vector<int>& like_shape,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Crop' " + param);
  auto big = MakeBlob({2, 3, 5, 5}, {});
  auto like = MakeBlob(like_shape, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({big.get(), like.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Crop)"), std::string::npos) << e.what();
  }
}

TEST(CropErrors, Messages) {
  ExpectError("crop_param { axis: 4 }", {2, 3, 5, 5}, "crop_param.axis");
  ExpectError("crop_param { axis: -5 }", {2, 3, 5, 5}, "crop_param.axis");
  ExpectError("crop_param { offset: 1 offset: 1 offset: 1 }", {2, 3, 3, 3}, "crop_param.offset");
  ExpectError("crop_param { offset: 3 }", {2, 3, 3, 3}, "crop_param.offset");
  ExpectError("crop_param { offset: 0 offset: 1 }", {2, 3, 5, 5}, "crop_param.offset");
  ExpectError("", {2, 3, 6, 5}, "crop_param.offset");  // bottom 1 larger than bottom 0
  ExpectError("", {2, 3, 5}, "must have the axes of bottom 0");
}

TEST(CropCaffe, LayerZoo) {
  for (const char* name : {"crop", "crop_multi"}) CheckLayerAgainstCaffe("layer_zoo", name);
}

}  // namespace
}  // namespace crema::testing
