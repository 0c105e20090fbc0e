// The `crema` executable end to end: help, exit codes, error messages, inspect and forward.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "crema/layer_registry.hpp"
#include "crema/proto.hpp"
#include "io/npy.hpp"
#include "solvers/datum_db.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace crema {
namespace {

using Result = testing::CommandResult;

Result Crema(const std::string& args) {
  return testing::RunCommand("CREMA_OPENBLAS_FIX=0 " + std::string(CREMA_BINARY_DIR) + "/crema " +
                             args);
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// data (N x 3) -> InnerProduct "ip" (2 outputs) -> top "ip/raw" -> ReLU -> "out".
constexpr char kTinyNet[] = R"(name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip/raw"
        inner_product_param { num_output: 2 } }
layer { name: "relu" type: "ReLU" bottom: "ip/raw" top: "out" }
)";
const float kWeight[6] = {1, 2, 3, -1, 0, 1};
const float kBias[2] = {0.5f, -0.5f};

// The weights of kTinyNet's "ip" layer as a serialized NetParameter (.caffemodel).
std::string TinyWeights() {
  NetParameter net;
  net.set_name("tiny");
  LayerParameter* layer = net.add_layer();
  layer->set_name("ip");
  layer->set_type("InnerProduct");
  BlobProto* w = layer->add_blobs();
  w->mutable_shape()->add_dim(2);
  w->mutable_shape()->add_dim(3);
  for (float v : kWeight) w->add_data(v);
  BlobProto* b = layer->add_blobs();
  b->mutable_shape()->add_dim(2);
  for (float v : kBias) b->add_data(v);
  std::string bytes;
  net.SerializeToString(&bytes);
  return bytes;
}

bool TinyNetLayersRegistered() {
  return LayerRegistry::Has("Input") && LayerRegistry::Has("InnerProduct") &&
         LayerRegistry::Has("ReLU");
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir();
    net_ = dir_ + "/tiny.prototxt";
    weights_ = dir_ + "/tiny.caffemodel";
    WriteText(net_, kTinyNet);
    WriteText(weights_, TinyWeights());
  }
  std::string dir_, net_, weights_;
};

TEST_F(CliTest, HelpListsVerbs) {
  const Result r = Crema("--help");
  EXPECT_EQ(r.rc, 0) << r.output;
  for (const char* verb : {"train", "test", "time", "inspect", "forward", "device_query", "layers"})
    EXPECT_NE(r.output.find(verb), std::string::npos) << verb << " missing from:\n" << r.output;
}

TEST_F(CliTest, VerbHelpListsItsFlags) {
  Result r = Crema("train --help");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("--solver"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--sigint_effect"), std::string::npos) << r.output;
  r = Crema("forward --help");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("--input"), std::string::npos) << r.output;
}

TEST_F(CliTest, UnknownVerbOrFlagIsUsageError) {
  Result r = Crema("frobnicate");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("unknown verb"), std::string::npos) << r.output;
  r = Crema("inspect --model " + net_ + " --no_such_flag=1");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("no_such_flag"), std::string::npos) << r.output;
  // A crema flag the verb does not read.
  r = Crema("layers --solver x.prototxt");
  EXPECT_EQ(r.rc, 2) << r.output;
}

// A malformed --gpu is a usage error naming the flag (exit 2), whether or not a GPU is present;
// an id too large for an int once gave "error: stoi" and exit 1.
TEST_F(CliTest, DeviceQueryGpuFlagErrorsNameTheFlag) {
  for (const char* gpu : {"99999999999", "abc", "0,0", "-1", "1e3", "0x1"}) {
    const Result r = Crema(std::string("device_query --gpu ") + gpu);
    EXPECT_EQ(r.rc, 2) << gpu << ": " << r.output;
    EXPECT_NE(r.output.find("--gpu"), std::string::npos) << gpu << ": " << r.output;
    EXPECT_EQ(r.output.find("stoi"), std::string::npos) << gpu << ": " << r.output;
  }
}

TEST_F(CliTest, MissingRequiredFlag) {
  const Result r = Crema("test");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

TEST_F(CliTest, PrototxtSyntaxErrorHasLocation) {
  const std::string bad = dir_ + "/bad.prototxt";
  WriteText(bad, "name: \"bad\"\nlayer {\n  name: \"x\"\n  type: \"Input\"\n  top: \"x\" }}\n");
  const Result r = Crema("inspect --model " + bad);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("bad\\.prototxt:[0-9]+:"))) << r.output;
}

TEST_F(CliTest, MissingWeightsIsRuntimeError) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  const Result r =
      Crema("test --iterations 1 --model " + net_ + " --weights " + dir_ + "/missing.caffemodel");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("missing.caffemodel"), std::string::npos) << r.output;
}

TEST_F(CliTest, TruncatedWeightsIsConfigError) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  const std::string bytes = TinyWeights();
  const std::string truncated = dir_ + "/truncated.caffemodel";
  WriteText(truncated, bytes.substr(0, bytes.size() / 2));
  const Result r = Crema("test --iterations 1 --model " + net_ + " --weights " + truncated);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("truncated.caffemodel"), std::string::npos) << r.output;
}

// An output whose size changes between batches (here Filter's kept items; DetectionOutput's
// detections in practice) once aborted `crema test` when it grew and was averaged wrongly when it
// shrank: it is reported by its sizes, and the other outputs are still averaged.
TEST_F(CliTest, TestReportsOutputsThatChangeSize) {
  for (const char* type : {"Data", "Filter", "Reduction"})
    if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
  // Records 0..7 hold their index as their one pixel; the label selects: batch 0 (records 0-3)
  // keeps one item, batch 1 (records 4-7) three.
  const int labels[8] = {0, 0, 0, 1, 1, 0, 1, 1};
  const std::string db = testing_db::WriteDatumDb(
      "varying_lmdb", 8, 1, 1, 1, [](int i, int) { return static_cast<uint8_t>(i); },
      [&](int i) { return labels[i]; });
  const std::string net = dir_ + "/varying.prototxt";
  WriteText(net, R"(name: "varying"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: ")" +
                     db + R"(" batch_size: 4 backend: LMDB } }
layer { name: "filter" type: "Filter" bottom: "data" bottom: "label" top: "kept" }
layer { name: "total" type: "Reduction" bottom: "data" top: "total" }
)");
  for (int iterations : {2, 3}) {
    const Result r = Crema("test --model " + net + " --weights " + weights_ + " --iterations " +
                           std::to_string(iterations));
    ASSERT_EQ(r.rc, 0) << r.output;
    // total: 0+1+2+3 = 6, then 4+5+6+7 = 22 (and 6 again for a third batch).
    EXPECT_NE(r.output.find(iterations == 2 ? "\ntotal = 14\n" : "\ntotal = 11.3333\n"),
              std::string::npos)
        << r.output;
    EXPECT_NE(
        r.output.find(StrCat("kept: not averaged, its size varies between batches (1 to 3 "
                             "values per batch, ",
                             iterations == 2 ? 4 : 5, " in all over ", iterations, " batches")),
        std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("\nkept = "), std::string::npos) << r.output;  // no mean line
  }
}

// Weights that hold none of the net's layers (a zero-byte file parses as an empty NetParameter)
// once ran the net on its fillers without a word.
TEST_F(CliTest, WeightsMatchingNoLayerAreAnError) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  const std::string empty = dir_ + "/empty.caffemodel";
  WriteText(empty, "");
  NetParameter other;
  other.add_layer()->set_name("conv1");
  std::string bytes;
  other.SerializeToString(&bytes);
  const std::string unrelated = dir_ + "/other.caffemodel";
  WriteText(unrelated, bytes);
  const float x[3] = {1, 2, 3};
  WriteNpyFloat32(dir_ + "/x1.npy", {1, 3}, x);
  for (const std::string& weights : {empty, unrelated, weights_ + "," + empty}) {
    for (const std::string& verb :
         {"test --iterations 1 --model " + net_,
          "forward --output_dir " + dir_ + "/o --input data=" + dir_ + "/x1.npy --model " + net_}) {
      const Result r = Crema(verb + " --weights " + weights);
      EXPECT_EQ(r.rc, 2) << verb << " " << weights << "\n" << r.output;
      EXPECT_NE(r.output.find(": holds none of the 1 layer(s) with params of net \"tiny\" (ip)"),
                std::string::npos)
          << r.output;
    }
  }
  EXPECT_EQ(Crema("test --iterations 1 --model " + net_ + " --weights " + weights_).rc, 0);
}

TEST_F(CliTest, InspectPrintsLayers) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  Result r = Crema("inspect --model " + net_);
  EXPECT_EQ(r.rc, 0) << r.output;
  for (const char* text : {"tiny", "data", "InnerProduct", "ip/raw (2,2)", "(2,3) (2)", "ReLU",
                           "out (2,2)", "8 learnable parameters"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << " missing from:\n" << r.output;
  r = Crema("inspect --json --model " + net_);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("\"param_shapes\": [[2,3],[2]]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"num_learnable_params\": 8"), std::string::npos) << r.output;
}

TEST_F(CliTest, ForwardWritesNpy) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  // Four rows, not the prototxt's two: the input blob takes the file's shape.
  const float x[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, -1, 2};
  WriteNpyFloat32(dir_ + "/x.npy", {4, 3}, x);
  const std::string out_dir = dir_ + "/out";
  const Result r =
      Crema("forward --model " + net_ + " --weights " + weights_ + " --input data=" + dir_ +
            "/x.npy --output_dir " + out_dir + " --all_blobs");
  ASSERT_EQ(r.rc, 0) << r.output;
  const NpyArray out = ReadNpy(out_dir + "/out.npy");
  ASSERT_EQ(out.shape, (std::vector<int64_t>{4, 2}));
  for (int n = 0; n < 4; ++n) {
    for (int o = 0; o < 2; ++o) {
      double y = kBias[o];
      for (int i = 0; i < 3; ++i) y += kWeight[o * 3 + i] * x[n * 3 + i];
      EXPECT_NEAR(out.values[n * 2 + o], std::max(0.0, y), 1e-6) << "n=" << n << " o=" << o;
    }
  }
  // --all_blobs: the input and the pre-ReLU blob too, '/' written as '~'.
  EXPECT_EQ(ReadNpy(out_dir + "/data.npy").values[11], 2.0);
  const NpyArray raw = ReadNpy(out_dir + "/ip~raw.npy");
  EXPECT_NEAR(raw.values[1], -1 + 0 + 0 - 0.5, 1e-6);

  // An input that is not a net input.
  const Result bad =
      Crema("forward --model " + net_ + " --input nope=" + dir_ + "/x.npy --output_dir " + out_dir);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_NE(bad.output.find("not an input blob"), std::string::npos) << bad.output;
}

TEST_F(CliTest, ForwardGathersRepeatedInputs) {
  if (!TinyNetLayersRegistered()) GTEST_SKIP() << "Input/InnerProduct/ReLU not registered yet";
  const float x[3] = {1, 2, 3};
  WriteNpyFloat32(dir_ + "/x.npy", {1, 3}, x);
  // gflags alone would keep only the last --input; both must be seen (the second is wrong).
  Result r = Crema("forward --model " + net_ + " --input data=" + dir_ +
                   "/x.npy --input nope=" + dir_ + "/x.npy --output_dir " + dir_ + "/o1");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("\"nope\" is not an input blob"), std::string::npos) << r.output;
  r = Crema("forward --model " + net_ + " --input nope=" + dir_ + "/x.npy --input data=" + dir_ +
            "/x.npy --output_dir " + dir_ + "/o2");
  EXPECT_EQ(r.rc, 2) << r.output;
  // A file that is not .npy.
  WriteText(dir_ + "/x.txt", "1 2 3");
  r = Crema("forward --model " + net_ + " --input data=" + dir_ + "/x.txt --output_dir " + dir_ +
            "/o3");
  EXPECT_EQ(r.rc, 2) << r.output;
}

// LeNet's Caffe forward dump: the .binaryproto input and the caffemodel give Caffe's `prob`.
TEST_F(CliTest, ForwardMatchesCaffeLenet) {
  CREMA_REQUIRE_REFERENCE(lenet, "bvlc/numeric/lenet");
  for (const char* type : {"Input", "Convolution", "Pooling", "InnerProduct", "ReLU", "Softmax"})
    if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered yet";
  const std::string out_dir = dir_ + "/lenet";
  const Result r = Crema("forward --model " + lenet + "/lenet.prototxt --weights " + lenet +
                         "/lenet.caffemodel --input data=" + lenet +
                         "/inputs/data.binaryproto --output_dir " + out_dir);
  ASSERT_EQ(r.rc, 0) << r.output;
  const NpyArray prob = ReadNpy(out_dir + "/prob.npy");
  const std::vector<float> want = testing::ReadF32(lenet + "/fwd/008_prob__top0_prob.f32");
  ASSERT_EQ(prob.values.size(), want.size());
  ASSERT_EQ(prob.shape, (std::vector<int64_t>{8, 10}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(prob.values[i], want[i], 1e-5) << i;
}

TEST_F(CliTest, LayersListsRegisteredTypes) {
  const Result r = Crema("layers");
  EXPECT_EQ(r.rc, 0) << r.output;
  for (const std::string& type : LayerRegistry::Types())
    EXPECT_NE(r.output.find(type + "\n"), std::string::npos) << type;
}

}  // namespace
}  // namespace crema
