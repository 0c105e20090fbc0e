// crema upgrade: legacy net prototxts, binary .caffemodels and solvers rewritten in the current
// format; the one-line notice when crema upgrades a file as it loads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "crema/layer_registry.hpp"
#include "crema/proto_io.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

using testing::RunCrema;

// V1 layers (enum types, blobs_lr, weight_decay), deprecated input fields, and a data layer
// with its transformation fields still in data_param.
constexpr char kV1Net[] = R"(name: "old"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 4 input_dim: 4
layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip"
         blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
         inner_product_param { num_output: 2 } }
layers { name: "relu" type: RELU bottom: "ip" top: "ip" }
)";

constexpr char kV1DataNet[] = R"(name: "old_data"
layers { name: "mnist" type: DATA top: "data" top: "label"
         data_param { source: "db" batch_size: 8 scale: 0.00390625 mirror: true crop_size: 20 } }
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class UpgradeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/upgrade_" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

TEST_F(UpgradeCliTest, V1NetPrototxt) {
  const std::string in = Write("old.prototxt", kV1Net), out = dir_ + "/new.prototxt";
  const auto r = RunCrema("upgrade " + in + " " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("net prototxt, upgraded:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("V1 layer format"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Input layer"), std::string::npos) << r.output;
  NetParameter net;
  ParseTextProto(ReadFile(out), out, &net);
  EXPECT_EQ(net.layers_size(), 0);
  EXPECT_EQ(net.input_size(), 0);
  ASSERT_EQ(net.layer_size(), 3);
  EXPECT_EQ(net.layer(0).type(), "Input");
  EXPECT_EQ(net.layer(0).input_param().shape(0).dim_size(), 4);
  EXPECT_EQ(net.layer(1).type(), "InnerProduct");
  ASSERT_EQ(net.layer(1).param_size(), 2);
  EXPECT_EQ(net.layer(1).param(1).lr_mult(), 2);
  EXPECT_EQ(net.layer(1).param(1).decay_mult(), 0);
  EXPECT_EQ(net.layer(2).type(), "ReLU");
  // Upgrading again finds nothing to do.
  const auto again = RunCrema("upgrade " + out + " " + dir_ + "/newer.prototxt");
  ASSERT_EQ(again.rc, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to upgrade"), std::string::npos) << again.output;
}

TEST_F(UpgradeCliTest, DataTransformationFields) {
  const std::string in = Write("data.prototxt", kV1DataNet), out = dir_ + "/new.prototxt";
  const auto r = RunCrema("upgrade " + in + " " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("transform_param"), std::string::npos) << r.output;
  NetParameter net;
  ParseTextProto(ReadFile(out), out, &net);
  ASSERT_EQ(net.layer_size(), 1);
  EXPECT_EQ(net.layer(0).type(), "Data");
  EXPECT_FLOAT_EQ(net.layer(0).transform_param().scale(), 0.00390625f);
  EXPECT_TRUE(net.layer(0).transform_param().mirror());
  EXPECT_EQ(net.layer(0).transform_param().crop_size(), 20u);
  EXPECT_FALSE(net.layer(0).data_param().has_scale());
}

TEST_F(UpgradeCliTest, BinaryCaffemodelStaysBinary) {
  NetParameter old;
  old.set_name("old");
  V1LayerParameter* layer = old.add_layers();
  layer->set_name("ip");
  layer->set_type(V1LayerParameter::INNER_PRODUCT);
  BlobProto* blob = layer->add_blobs();
  blob->set_num(1);
  blob->set_channels(1);
  blob->set_height(2);
  blob->set_width(3);
  for (int i = 0; i < 6; ++i) blob->add_data(0.5f * i);
  // No extension: told apart by content.
  const std::string in = dir_ + "/weights_v1", out = dir_ + "/weights.caffemodel";
  WriteBinaryProto(old, in);
  const auto r = RunCrema("upgrade " + in + " " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("binary net"), std::string::npos) << r.output;
  NetParameter upgraded;
  ReadBinaryProto(out, &upgraded);
  ASSERT_EQ(upgraded.layer_size(), 1);
  EXPECT_EQ(upgraded.layers_size(), 0);
  EXPECT_EQ(upgraded.layer(0).type(), "InnerProduct");
  ASSERT_EQ(upgraded.layer(0).blobs_size(), 1);
  EXPECT_EQ(upgraded.layer(0).blobs(0).data(5), 2.5f);
  EXPECT_EQ(upgraded.layer(0).blobs(0).width(), 3);
}

TEST_F(UpgradeCliTest, SolverTypeEnum) {
  const std::string in = Write("lenet_solver.prototxt",
                               "net: \"lenet.prototxt\"\nbase_lr: 0.01\nsolver_type: ADAGRAD\n");
  const std::string out = dir_ + "/solver_new.prototxt";
  const auto r = RunCrema("upgrade " + in + " " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("solver prototxt, upgraded:"), std::string::npos) << r.output;
  SolverParameter solver;
  ParseTextProto(ReadFile(out), out, &solver);
  EXPECT_EQ(solver.type(), "AdaGrad");
  EXPECT_FALSE(solver.has_solver_type());
  EXPECT_EQ(solver.net(), "lenet.prototxt");
  EXPECT_FALSE(solver.has_snapshot_prefix());  // not filled in from the file name
}

TEST_F(UpgradeCliTest, RefusesToOverwriteTheInputUnlessInPlace) {
  const std::string in = Write("old.prototxt", kV1Net);
  auto r = RunCrema("upgrade " + in + " " + in);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--in-place"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(in), kV1Net);
  r = RunCrema("upgrade " + in);
  EXPECT_EQ(r.rc, 2) << r.output;
  r = RunCrema("upgrade " + in + " --in-place");
  ASSERT_EQ(r.rc, 0) << r.output;
  NetParameter net;
  ParseTextProto(ReadFile(in), in, &net);
  EXPECT_EQ(net.layer_size(), 3);
}

TEST_F(UpgradeCliTest, ErrorsNameFileAndLine) {
  const std::string in =
      Write("bad.prototxt", "name: \"x\"\nlayers {\n  name: \"a\"\n  typo: 1\n}\n");
  const auto r = RunCrema("upgrade " + in + " " + dir_ + "/out.prototxt");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(in + ":4:"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out.prototxt"));
  const auto missing = RunCrema("upgrade " + dir_ + "/none.prototxt " + dir_ + "/o.prototxt");
  EXPECT_EQ(missing.rc, 1) << missing.output;
}

TEST_F(UpgradeCliTest, LoadingALegacyNetPrintsOneNotice) {
  if (!LayerRegistry::Has("InnerProduct") || !LayerRegistry::Has("Input")) GTEST_SKIP();
  const std::string in = Write("old.prototxt", kV1Net);
  const auto r = RunCrema("inspect --model " + in);
  ASSERT_EQ(r.rc, 0) << r.output;
  size_t count = 0;
  for (size_t at = r.output.find("upgraded a legacy net"); at != std::string::npos;
       at = r.output.find("upgraded a legacy net", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << r.output;
  EXPECT_NE(r.output.find("crema upgrade " + in), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crema
