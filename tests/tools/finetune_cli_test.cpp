// crema train's fine-tuning flags (--weights report, --skip-mismatched, --freeze) and crema
// convert-weights (fp16 weights), end to end through the executable.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

using testing::RunCrema;

// x = (1, 1) -> ip1 (2x2, filled 0.5, no bias) -> ip2 (1x2, filled 0, no bias) -> p; y = 2;
// loss (p - y)^2 / 2; plain SGD, lr 0.1, 10 iterations.
constexpr char kNet[] = R"(name: "two"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 1 dim: 2 } shape { dim: 1 dim: 1 }
    data_filler { type: "constant" value: 1 } data_filler { type: "constant" value: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 2 bias_term: false
                        weight_filler { type: "constant" value: 0.5 } } }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "p"
  inner_product_param { num_output: 1 bias_term: false
                        weight_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
)";

void AddLayer(NetParameter* net, const std::string& name, int rows, int cols, float value) {
  LayerParameter* layer = net->add_layer();
  layer->set_name(name);
  layer->set_type("InnerProduct");
  BlobProto* blob = layer->add_blobs();
  blob->mutable_shape()->add_dim(rows);
  blob->mutable_shape()->add_dim(cols);
  for (int i = 0; i < rows * cols; ++i) blob->add_data(value);
}

class FineTuneCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"DummyData", "InnerProduct", "EuclideanLoss"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/finetune_" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/net.prototxt") << kNet;
    solver_ = dir_ + "/solver.prototxt";
    std::ofstream(solver_) << "net: \"" << dir_ << "/net.prototxt\"\nbase_lr: 0.1\n"
                           << "lr_policy: \"fixed\"\nmax_iter: 10\nsnapshot_prefix: \"" << dir_
                           << "/snap\"\ntype: \"SGD\"\n";
    // ip1 matches (0.25 everywhere); ip2 is 3 x 2 where the net has 1 x 2.
    NetParameter mismatched;
    AddLayer(&mismatched, "ip1", 2, 2, 0.25f);
    AddLayer(&mismatched, "ip2", 3, 2, 7.0f);
    mismatched_ = dir_ + "/mismatched.caffemodel";
    WriteBinaryProto(mismatched, mismatched_);
    NetParameter only_ip1;
    AddLayer(&only_ip1, "ip1", 2, 2, 0.25f);
    only_ip1_ = dir_ + "/only_ip1.caffemodel";
    WriteBinaryProto(only_ip1, only_ip1_);
  }
  // The values of `layer`'s weight in the final snapshot.
  std::vector<float> Final(const std::string& layer) {
    NetParameter net;
    ReadBinaryProto(dir_ + "/snap_iter_10.caffemodel", &net);
    for (const LayerParameter& l : net.layer())
      if (l.name() == layer) return {l.blobs(0).data().begin(), l.blobs(0).data().end()};
    ADD_FAILURE() << "no layer " << layer;
    return {};
  }
  std::string Train(const std::string& flags) {
    return "train --solver " + solver_ + " --progress off " + flags;
  }
  std::string dir_, solver_, mismatched_, only_ip1_;
};

// Fine-tuning from weights that hold none of the net's layers trains from the fillers, as asked,
// but says so (an empty file is the usual cause).
TEST_F(FineTuneCliTest, WeightsMatchingNoLayerWarn) {
  const std::string empty = dir_ + "/empty.caffemodel";
  std::ofstream(empty).flush();
  const auto r = RunCrema(Train("--weights " + empty));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("--weights " + empty +
                          ": holds none of the 2 layer(s) with params of net \"two\" (ip1, ip2)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("0 layer(s) copied, 0 skipped for a shape mismatch, 2 not in the"),
            std::string::npos)
      << r.output;
  const auto matched = RunCrema(Train("--weights " + only_ip1_));
  ASSERT_EQ(matched.rc, 0) << matched.output;
  EXPECT_EQ(matched.output.find("holds none of"), std::string::npos) << matched.output;
}

TEST_F(FineTuneCliTest, ShapeMismatchStopsByDefault) {
  const auto r = RunCrema(Train("--weights " + mismatched_));
  EXPECT_EQ(r.rc, 2) << r.output;
  for (const std::string& part :
       {std::string("\"ip2\""), std::string("param 0"), std::string("3 2"), std::string("1 2"),
        mismatched_, std::string("--skip-mismatched")})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
}

TEST_F(FineTuneCliTest, SkipMismatchedAndFreeze) {
  const auto r = RunCrema(Train("--weights " + mismatched_ + " --skip-mismatched --freeze ip1"));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("weights: layer ip1: copied from " + mismatched_), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("weights: layer ip2: re-initialised from its fillers"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("frozen: layer ip1: lr_mult 0 on its 1 param blob(s)"), std::string::npos)
      << r.output;
  // ip1 stays at the copied 0.25 exactly; h = (0.5, 0.5), so ip2's two weights (both w, from
  // the filler 0) follow w <- w - 0.1 * 0.5 * (w - 2): w_k = 2 - 2 * 0.95^k.
  for (float v : Final("ip1")) EXPECT_EQ(v, 0.25f);
  const double w10 = 2 - 2 * std::pow(0.95, 10);
  for (float v : Final("ip2")) EXPECT_NEAR(v, w10, 1e-5);
}

TEST_F(FineTuneCliTest, WithoutFreezeEveryLayerLearns) {
  const auto r = RunCrema(Train("--weights " + only_ip1_));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("weights: layer ip2: not in the weights, keeps its fillers"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 layer(s) copied, 0 skipped for a shape mismatch, 1 not in the"),
            std::string::npos)
      << r.output;
  for (float v : Final("ip1")) EXPECT_NE(v, 0.25f);
}

TEST_F(FineTuneCliTest, FreezeByRegexAndLists) {
  const auto r = RunCrema(Train("--freeze 'ip[0-9]{1,2}' --freeze data"));
  EXPECT_EQ(r.rc, 2) << r.output;  // data has no params
  EXPECT_NE(r.output.find("--freeze \"data\" matches no layer with params"), std::string::npos)
      << r.output;
  const auto bad = RunCrema(Train("--freeze 'ip('"));
  EXPECT_EQ(bad.rc, 2) << bad.output;
  const auto none = RunCrema(Train("--freeze ip"));  // a full match is needed
  EXPECT_EQ(none.rc, 2) << none.output;
  const auto both = RunCrema(Train("--freeze 'ip[0-9]{1,2}'"));
  ASSERT_EQ(both.rc, 0) << both.output;
  EXPECT_NE(both.output.find("frozen: layer ip2"), std::string::npos) << both.output;
  for (float v : Final("ip1")) EXPECT_EQ(v, 0.5f);
  for (float v : Final("ip2")) EXPECT_EQ(v, 0.0f);
}

TEST_F(FineTuneCliTest, LrMultZeroInThePrototxtFreezesToo) {
  std::string net = kNet;
  net.replace(net.find("top: \"h\"") + 8, 0, " param { lr_mult: 0 }");
  std::ofstream(dir_ + "/net.prototxt") << net;
  const auto r = RunCrema(Train(""));
  ASSERT_EQ(r.rc, 0) << r.output;
  for (float v : Final("ip1")) EXPECT_EQ(v, 0.5f);
  for (float v : Final("ip2")) EXPECT_NE(v, 0.0f);
}

// ---- convert-weights ----

TEST_F(FineTuneCliTest, ConvertWeightsHalvesTheFileAndRoundTrips) {
  NetParameter weights;
  AddLayer(&weights, "ip1", 2, 2, 0);
  AddLayer(&weights, "big", 100, 40, 0);
  BlobProto* big = weights.mutable_layer(1)->mutable_blobs(0);
  for (int i = 0; i < big->data_size(); ++i)
    big->set_data(i, static_cast<float>(std::sin(i * 0.37) * 20 + 1e-6 * i));
  const float ip1_values[4] = {0.1f, -0.3f, 1.7f, 0.9f};
  for (int i = 0; i < 4; ++i)
    weights.mutable_layer(0)->mutable_blobs(0)->set_data(i, ip1_values[i]);
  const std::string fp32 = dir_ + "/w.caffemodel", fp16 = dir_ + "/w16.caffemodel",
                    back = dir_ + "/w32.caffemodel";
  WriteBinaryProto(weights, fp32);
  auto r = RunCrema("convert-weights " + fp32 + " " + fp16 + " --fp16");
  ASSERT_EQ(r.rc, 0) << r.output;
  const double ratio = static_cast<double>(std::filesystem::file_size(fp16)) /
                       static_cast<double>(std::filesystem::file_size(fp32));
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.55);
  r = RunCrema("convert-weights " + fp16 + " " + back + " --fp32");
  ASSERT_EQ(r.rc, 0) << r.output;
  NetParameter restored;
  ReadBinaryProto(back, &restored);
  ASSERT_EQ(restored.layer_size(), 2);
  const auto& original = weights.layer(1).blobs(0).data();
  const auto& values = restored.layer(1).blobs(0).data();
  ASSERT_EQ(values.size(), original.size());
  int changed = 0;
  for (int i = 0; i < original.size(); ++i) {
    // fp16 keeps 11 significant bits: relative error <= 2^-11 (2^-25 absolute near zero).
    const double x = original[i];
    EXPECT_LE(std::fabs(values[i] - x),
              std::max(std::fabs(x) * std::ldexp(1.0, -11), std::ldexp(1.0, -25)))
        << i;
    changed += values[i] != original[i];
  }
  EXPECT_GT(changed, original.size() / 2);  // it really was rounded

  // A net loads the fp16 file directly; its output is close to the fp32 weights'.
  const std::string deploy = dir_ + "/deploy.prototxt";
  std::ofstream(deploy) << R"(layer { name: "x" type: "Input" top: "x"
      input_param { shape { dim: 1 dim: 2 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
      inner_product_param { num_output: 2 bias_term: false } })";
  auto run = [&](const std::string& file) {
    auto net = Net::FromFile(deploy, TEST);
    net->CopyTrainedLayersFrom(file);
    net->input_blobs()[0]->mutable_cpu_data<float>()[0] = 3;
    net->input_blobs()[0]->mutable_cpu_data<float>()[1] = -2;
    net->Forward();
    const Blob& h = *net->blob_by_name("h");
    return std::vector<double>{h.data_at(0), h.data_at(1)};
  };
  const auto from32 = run(fp32), from16 = run(fp16);
  EXPECT_NEAR(from32[0], 3 * 0.1 - 2 * -0.3, 1e-6);
  EXPECT_NEAR(from32[1], 3 * 1.7 - 2 * 0.9, 1e-6);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(from16[i], from32[i], 5e-3);
    EXPECT_NE(from16[i], from32[i]);
  }
}

TEST_F(FineTuneCliTest, ConvertWeightsErrors) {
  NetParameter weights;
  AddLayer(&weights, "ip1", 1, 2, 70000.0f);
  const std::string in = dir_ + "/huge.caffemodel";
  WriteBinaryProto(weights, in);
  auto r = RunCrema("convert-weights " + in + " " + dir_ + "/out.caffemodel --fp16");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("beyond the fp16 range"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out.caffemodel"));
  r = RunCrema("convert-weights " + in + " " + dir_ + "/out.caffemodel");
  EXPECT_EQ(r.rc, 2) << r.output;
}

}  // namespace
}  // namespace crema
