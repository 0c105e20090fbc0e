// Net construction semantics (Caffe's): NetState filtering, split insertion, in-place layers,
// parameter sharing, loss weights, backward inference, weights I/O and error locations.
#include "crema/net.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <vector>

#include "crema/proto_io.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::unique_ptr<Net> Build(const std::string& text, Phase phase = TRAIN,
                           std::vector<std::string> stages = {}, int level = 0) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(phase);
  options.state.set_level(level);
  for (const auto& s : stages) options.state.add_stage(s);
  options.verbose = false;
  return std::make_unique<Net>(Parse(text), options);
}

// A small classifier: data -> ip (shared name) -> relu (in place) -> loss, plus accuracy in TEST.
const char* kTinyNet = R"(
  name: "tiny"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
          param { name: "w" lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
          inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                                bias_filler { type: "constant" value: 0.1 } } }
  layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
  layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
          inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
  layer { name: "acc" type: "Accuracy" bottom: "ip2" bottom: "label" top: "acc"
          include { phase: TEST } }
)";

TEST(NetTest, FiltersByPhaseAndInsertsSplits) {
  auto train = Build(kTinyNet, TRAIN);
  EXPECT_EQ(train->layer_names(),
            (std::vector<std::string>{"data", "ip1", "relu1", "ip2", "loss"}));
  auto test = Build(kTinyNet, TEST);
  // ip2 and label are used twice in TEST: Caffe's split layers and names appear.
  EXPECT_EQ(test->layer_names(),
            (std::vector<std::string>{"data", "label_data_1_split", "ip1", "relu1", "ip2",
                                      "ip2_ip2_0_split", "loss", "acc"}));
  EXPECT_TRUE(test->has_blob("ip2_ip2_0_split_1"));
  EXPECT_TRUE(test->has_blob("label_data_1_split_0"));
  // Outputs are the unconsumed blobs, in name order.
  ASSERT_EQ(test->output_blobs().size(), 2u);
  EXPECT_EQ(test->blob_names()[test->output_blob_indices()[0]], "acc");
  EXPECT_EQ(test->blob_names()[test->output_blob_indices()[1]], "loss");
}

TEST(NetTest, StateRules) {
  NetState state;
  state.set_phase(TRAIN);
  state.set_level(2);
  state.add_stage("a");
  NetStateRule rule;
  EXPECT_TRUE(StateMeetsRule(state, rule, "x"));
  rule.set_phase(TEST);
  EXPECT_FALSE(StateMeetsRule(state, rule, "x"));
  rule.Clear();
  rule.set_min_level(3);
  EXPECT_FALSE(StateMeetsRule(state, rule, "x"));
  rule.Clear();
  rule.set_max_level(2);
  rule.add_stage("a");
  EXPECT_TRUE(StateMeetsRule(state, rule, "x"));
  rule.add_stage("b");
  EXPECT_FALSE(StateMeetsRule(state, rule, "x"));
  rule.Clear();
  rule.add_not_stage("a");
  EXPECT_FALSE(StateMeetsRule(state, rule, "x"));
}

TEST(NetTest, InPlaceParamsAndLoss) {
  auto net = Build(kTinyNet, TRAIN);
  // relu1 works in place: its top is ip1's blob.
  EXPECT_EQ(net->top_vecs()[2][0], net->top_vecs()[1][0]);
  EXPECT_EQ(net->params().size(), 4u);  // ip1 w, ip1 b, ip2 w, ip2 b
  EXPECT_EQ(net->params_lr(), (std::vector<float>{1, 2, 1, 1}));
  EXPECT_EQ(net->params_weight_decay(), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_EQ(net->blob_loss_weights()[net->blob_names().size() - 1], 1.0);
  EXPECT_TRUE(net->layer_need_backward()[1]);
  EXPECT_FALSE(net->layer_need_backward()[0]);
  // The label gets no gradient; ip2's input does.
  EXPECT_FALSE(net->bottom_need_backward()[4][1]);
  EXPECT_TRUE(net->bottom_need_backward()[4][0]);
}

// Every element of every learnable parameter: the gradient Backward leaves in its diff against
// central differences of the net's loss (float32 nets: eps 1e-2, agreement to 5e-4). Elements
// whose step would move an ip1 unit across the ReLU's kink in some item are left out.
TEST(NetTest, ForwardBackwardIsConsistentWithNumericGradient) {
  auto net = Build(kTinyNet, TRAIN);
  Blob* data = net->input_blobs()[0];
  Blob* label = net->input_blobs()[1];
  for (int i = 0; i < data->count(); ++i) data->mutable_cpu_data<float>()[i] = std::sin(i * 0.7f);
  for (int i = 0; i < label->count(); ++i) label->mutable_cpu_data<float>()[i] = i % 3;
  net->ClearParamDiffs();
  const double loss = net->ForwardBackward();
  EXPECT_GT(loss, 0);
  const std::vector<Blob*>& params = net->learnable_params();
  ASSERT_EQ(params.size(), 4u);  // ip1 weight (5 x 3) and bias, ip2 weight (3 x 5) and bias
  // ip1's pre-activations (4 items x 5 units), for the kink test.
  const float* x = data->cpu_data<float>();
  const float* w1 = params[0]->cpu_data<float>();
  const float* b1 = params[1]->cpu_data<float>();
  std::vector<double> pre(20);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 5; ++j) {
      pre[n * 5 + j] = b1[j];
      for (int k = 0; k < 3; ++k) pre[n * 5 + j] += w1[j * 3 + k] * x[n * 3 + k];
    }
  const float eps = 1e-2f;
  auto near_kink = [&](int unit) {
    for (int n = 0; n < 4; ++n)
      if (std::fabs(pre[n * 5 + unit]) < 2 * eps) return true;
    return false;
  };
  int checked = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    Blob* param = params[p];
    const std::vector<float> analytic(param->cpu_diff<float>(),
                                      param->cpu_diff<float>() + param->count());
    for (int i = 0; i < param->count(); ++i) {
      if (p < 2 && near_kink(p == 0 ? i / 3 : i)) continue;
      float* value = param->mutable_cpu_data<float>() + i;
      const float saved = *value;
      *value = saved + eps;
      const double plus = net->Forward();
      *value = saved - eps;
      const double minus = net->Forward();
      *value = saved;
      EXPECT_NEAR(analytic[i], (plus - minus) / (2 * eps), 5e-4)
          << "param " << p << " [" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);  // of 38
}

TEST(NetTest, SharedParamsUseOneBlob) {
  auto net = Build(R"(
    layer { name: "data" type: "Input" top: "a" top: "b"
            input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
    layer { name: "ipa" type: "InnerProduct" bottom: "a" top: "ya" param { name: "shared" }
            inner_product_param { num_output: 2 bias_term: false } }
    layer { name: "ipb" type: "InnerProduct" bottom: "b" top: "yb" param { name: "shared" }
            inner_product_param { num_output: 2 bias_term: false } }
  )");
  ASSERT_EQ(net->params().size(), 2u);
  EXPECT_EQ(net->learnable_params().size(), 1u);
  EXPECT_EQ(net->param_owners()[1], 0);
  EXPECT_EQ(net->params()[0]->cpu_data<float>(), net->params()[1]->cpu_data<float>());
}

TEST(NetTest, SharedParamShapeMismatchIsAnError) {
  try {
    Build(R"(
      layer { name: "data" type: "Input" top: "a" input_param { shape { dim: 2 dim: 3 } } }
      layer { name: "ipa" type: "InnerProduct" bottom: "a" top: "ya" param { name: "s" }
              inner_product_param { num_output: 2 bias_term: false } }
      layer { name: "ipb" type: "InnerProduct" bottom: "a" top: "yb" param { name: "s" }
              inner_product_param { num_output: 4 bias_term: false } }
    )");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot share param \"s\""), std::string::npos)
        << e.what();
  }
}

TEST(NetTest, ErrorsNameFileLineAndLayer) {
  const std::string dir = testing::TempDir();
  const std::string path = dir + "/bad.prototxt";
  std::ofstream(path) << "name: \"bad\"\n"
                         "layer { name: \"data\" type: \"Input\" top: \"data\"\n"
                         "        input_param { shape { dim: 1 dim: 2 } } }\n"
                         "layer { name: \"ip\" type: \"InnerProduct\"\n"
                         "        bottom: \"dta\" top: \"ip\"\n"
                         "        inner_product_param { num_output: 2 } }\n";
  try {
    Net::FromFile(path, TRAIN);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path + ":5:"), std::string::npos) << what;
    EXPECT_NE(what.find("unknown bottom blob \"dta\""), std::string::npos) << what;
    EXPECT_NE(what.find("layer \"ip\" (InnerProduct)"), std::string::npos) << what;
  }
  std::ofstream(path) << "layer { name: \"data\" type: \"Input\" top: \"data\"\n"
                         "        input_param { shape { dim: 1 dim: 2 } } }\n"
                         "layer { name: \"r\" type: \"Relu\" bottom: \"data\" top: \"r\" }\n";
  try {
    Net::FromFile(path, TRAIN);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path + ":3:"), std::string::npos) << what;
    EXPECT_NE(what.find("Did you mean \"ReLU\""), std::string::npos) << what;
  }
}

TEST(NetTest, DuplicateTopIsAnError) {
  EXPECT_THROW(Build(R"(
    layer { name: "a" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "b" type: "Input" top: "x" input_param { shape { dim: 1 } } }
  )"),
               ConfigError);
}

TEST(NetTest, WeightsRoundTripBinaryAndHdf5) {
  auto net = Build(kTinyNet, TRAIN);
  const std::string dir = testing::TempDir();
  NetParameter saved;
  net->ToProto(&saved);
  WriteBinaryProto(saved, dir + "/w.caffemodel");
  net->ToHDF5(dir + "/w.caffemodel.h5");
  for (const std::string file : {"/w.caffemodel", "/w.caffemodel.h5"}) {
    auto other = Build(kTinyNet, TEST);
    other->CopyTrainedLayersFrom(dir + file);
    for (size_t i = 0; i < net->learnable_params().size(); ++i) {
      const Blob& a = *net->learnable_params()[i];
      const Blob& b = *other->learnable_params()[i];
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t j = 0; j < a.count(); ++j) EXPECT_EQ(a.data_at(j), b.data_at(j)) << file;
    }
  }
}

TEST(NetTest, WeightShapeMismatchNamesBothShapes) {
  auto net = Build(kTinyNet, TRAIN);
  NetParameter saved;
  net->ToProto(&saved);
  auto other = Build(std::string(kTinyNet).replace(std::string(kTinyNet).find("num_output: 5"), 13,
                                                   "num_output: 6"),
                     TRAIN);
  try {
    other->CopyTrainedLayersFrom(saved);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ip1"), std::string::npos) << what;
    EXPECT_NE(what.find("5 3"), std::string::npos) << what;
    EXPECT_NE(what.find("6 3"), std::string::npos) << what;
  }
}

TEST(NetTest, CaffeWeightsLoad) {
  CREMA_REQUIRE_REFERENCE(weights, "bvlc/solvers/lenet_init.caffemodel");
  CREMA_REQUIRE_REFERENCE(model, "bvlc/numeric/lenet/lenet.prototxt");
  auto net = Net::FromFile(model, TEST);
  net->CopyTrainedLayersFrom(weights);
  NetParameter caffe;
  ReadNetParamsFromBinaryFile(weights, &caffe);
  const Blob& conv1 = *net->layer_by_name("conv1")->blobs()[0];
  EXPECT_EQ(conv1.shape(), (std::vector<int>{20, 1, 5, 5}));
  for (const auto& layer : caffe.layer()) {
    if (layer.name() != "conv1") continue;
    for (int i = 0; i < 10; ++i) EXPECT_EQ(conv1.data_at(i), layer.blobs(0).data(i));
  }
}

// Caffe's lenet_init.caffemodel is its train net's Net::ToProto: crema, given the same net and
// weights, writes the same bytes, so files crema writes load in Caffe.
TEST(NetTest, WritesCaffeModelBytesAsCaffe) {
  CREMA_REQUIRE_REFERENCE(weights, "bvlc/solvers/lenet_init.caffemodel");
  CREMA_REQUIRE_REFERENCE(bvlc, "bvlc");
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(bvlc.c_str()), 0);  // the net's LMDB paths are relative to bvlc/
  std::unique_ptr<Net> net;
  EXPECT_NO_THROW(net = Net::FromFile("solvers/lenet_train_test.prototxt", TRAIN));
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(net);
  net->CopyTrainedLayersFrom(weights);
  NetParameter mine;
  net->ToProto(&mine);
  std::string mine_bytes;
  ASSERT_TRUE(mine.SerializeToString(&mine_bytes));
  const std::string caffe_bytes = testing::ReadFile(weights);
  EXPECT_EQ(mine_bytes.size(), caffe_bytes.size());
  EXPECT_TRUE(mine_bytes == caffe_bytes);
}

}  // namespace
}  // namespace crema
