// Layer::SetUpLearnableBlobs and AdoptLoadedBlobs, the one check of learnable blobs that come
// with a layer's parameter (a net saved with its weights): their number, each shape (exact,
// Caffe's legacy 4-D form, or only the count where Caffe checks only that), the reshape to the
// layer's shape and the conversion to the layer's element type -- or, without such blobs, new
// ones filled by their fillers. Convolution, Deconvolution, InnerProduct, Embed, PReLU,
// Normalize, Parameter and the recurrent layers go through it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "crema/layer.hpp"
#include "crema/proto.hpp"

namespace crema {
namespace {

// name, shape, count only, filler (type "" for none)
using Spec = std::tuple<std::string, std::vector<int>, bool, std::string>;

class LoadedLayer final : public Layer {
 public:
  LoadedLayer(const LayerParameter& param, std::vector<Spec> specs, std::string why = "")
      : Layer(param), specs_(std::move(specs)), why_(std::move(why)) {}
  const char* type() const override { return "Loaded"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override {
    fillers_.resize(specs_.size());
    std::vector<ExpectedBlob> expected;
    for (size_t i = 0; i < specs_.size(); ++i) {
      const auto& [name, shape, count_only, filler] = specs_[i];
      fillers_[i].set_type(filler);
      fillers_[i].set_value(2.5f);
      expected.push_back({name, shape, count_only, filler.empty() ? nullptr : &fillers_[i],
                          "loaded_param." + name + "_filler"});
    }
    SetUpLearnableBlobs(expected, why_);
  }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override {}
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  std::vector<Spec> specs_;
  std::string why_;
  std::vector<FillerParameter> fillers_;
};

// A layer parameter carrying blobs of these shapes, values 0, 1, 2, ... in each.
LayerParameter WithBlobs(const std::vector<std::vector<int>>& shapes) {
  LayerParameter param;
  param.set_name("l");
  param.set_type("Loaded");
  for (const auto& shape : shapes) {
    BlobProto* blob = param.add_blobs();
    int64_t count = 1;
    for (int d : shape) {
      blob->mutable_shape()->add_dim(d);
      count *= d;
    }
    for (int64_t i = 0; i < count; ++i) blob->add_data(static_cast<float>(i));
  }
  return param;
}

std::string SetUpError(Layer* layer) {
  try {
    layer->SetUp({}, {});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LoadedBlobs, FittingBlobsAreReshapedAndConverted) {
  // The weight as is, the bias in Caffe's legacy (1, 1, 1, N) form.
  LoadedLayer layer(WithBlobs({{2, 3}, {1, 1, 1, 2}}),
                    {{"weight", {2, 3}, false, ""}, {"bias", {2}, false, ""}});
  layer.set_dtype(DataType::kFloat64);
  layer.SetUp({}, {});
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{2}));
  for (const auto& blob : layer.blobs()) {
    EXPECT_EQ(blob->dtype(), DataType::kFloat64);
    for (int64_t i = 0; i < blob->count(); ++i) EXPECT_EQ(blob->data_at(i), i);
  }
  // Where only the count matters, any shape of that count is taken and reshaped.
  LoadedLayer counted(WithBlobs({{3, 2}}), {{"slopes", {6}, true, ""}});
  counted.SetUp({}, {});
  EXPECT_EQ(counted.blobs()[0]->shape(), (std::vector<int>{6}));
  EXPECT_EQ(counted.blobs()[0]->dtype(), DataType::kFloat32);
  EXPECT_EQ(counted.blobs()[0]->data_at(5), 5);
}

TEST(LoadedBlobs, MisfitsAreConfigErrorsNamingTheBlob) {
  LoadedLayer wrong_shape(WithBlobs({{2, 3}, {3}}),
                          {{"weight", {2, 3}, false, ""}, {"bias", {2}, false, ""}});
  EXPECT_EQ(SetUpError(&wrong_shape),
            "layer \"l\" (Loaded): blobs: bias shape mismatch: expected (2), got (3)");
  // A 4-D form that is not leading 1s is no legacy form.
  LoadedLayer not_legacy(WithBlobs({{1, 2, 1, 3}}), {{"weight", {2, 3}, false, ""}});
  EXPECT_EQ(SetUpError(&not_legacy),
            "layer \"l\" (Loaded): blobs: weight shape mismatch: expected (2 3), got (1 2 1 3)");
  LoadedLayer wrong_count(WithBlobs({{4}}), {{"negative slopes", {3}, true, ""}},
                          "one per channel of the bottom");
  EXPECT_EQ(SetUpError(&wrong_count),
            "layer \"l\" (Loaded): blobs: negative slopes shape mismatch: expected 3 values (3), "
            "got (4) (one per channel of the bottom)");
  LoadedLayer too_few(WithBlobs({{2, 3}}),
                      {{"weight", {2, 3}, false, ""}, {"bias", {2}, false, ""}});
  EXPECT_EQ(SetUpError(&too_few),
            "layer \"l\" (Loaded): blobs must hold 2 blobs (weight and bias), got 1");
  LoadedLayer too_many(WithBlobs({{1}, {1}, {1}, {1}}),
                       {{"a", {1}, false, ""}, {"b", {1}, false, ""}, {"c", {1}, false, ""}});
  EXPECT_EQ(SetUpError(&too_many),
            "layer \"l\" (Loaded): blobs must hold 3 blobs (a, b and c), got 4");
}

TEST(LoadedBlobs, WithoutLoadedBlobsTheFillersRun) {
  LoadedLayer layer(WithBlobs({}),
                    {{"weight", {2, 3}, false, "constant"}, {"bias", {2}, false, ""}});
  layer.set_dtype(DataType::kFloat64);
  layer.SetUp({}, {});
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(layer.blobs()[0]->dtype(), DataType::kFloat64);
  EXPECT_EQ(layer.blobs()[0]->asum_data(), 6 * 2.5);
  EXPECT_EQ(layer.blobs()[1]->asum_data(), 0);  // no filler: zeros
  LoadedLayer bad_filler(WithBlobs({}), {{"weight", {2}, false, "nonsense"}});
  const std::string error = SetUpError(&bad_filler);
  EXPECT_EQ(error.rfind("layer \"l\" (Loaded): loaded_param.weight_filler: unknown filler type "
                        "\"nonsense\"",
                        0),
            0u)
      << error;
}

}  // namespace
}  // namespace crema
