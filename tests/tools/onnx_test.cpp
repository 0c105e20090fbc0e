// export-onnx / import-onnx: round trips through crema (forward equal to 1e-5), onnxruntime on the
// exported files (1e-4 relative; skipped without Python's onnx and onnxruntime), the real
// SqueezeNet v1.0 end to end (skipped without ../shared), SSD nets (PriorBox, Normalize,
// DetectionOutput) against crema's detection rows, and the error messages.
#include "onnx/onnx.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "io/npy.hpp"
#include "support/reference.hpp"
#include "tools/onnx_test_util.hpp"

namespace crema {
namespace {

// Every mapped layer type, in the patterns of the zoo nets: ResNet's BatchNorm + Scale and
// Eltwise residual, MobileNet's depthwise convolution with ReLU6, GoogLeNet's inception concat
// and LRN, Caffe's ceil-mode pooling (the AVE window that runs past the padding included).
constexpr char kZooNet[] = R"(name: "zoo"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 17 dim: 17 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "sc1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "dw" type: "Convolution" bottom: "conv1" top: "dw"
        convolution_param { num_output: 8 group: 8 kernel_size: 3 pad: 1 } }
layer { name: "dw_relu" type: "ReLU6" bottom: "dw" top: "dw" }
layer { name: "pw" type: "Convolution" bottom: "dw" top: "pw"
        convolution_param { num_output: 8 kernel_size: 1 bias_term: false } }
layer { name: "bn2" type: "BatchNorm" bottom: "pw" top: "bn2" batch_norm_param { eps: 0.001 } }
layer { name: "res" type: "Eltwise" bottom: "bn2" bottom: "conv1" top: "res"
        eltwise_param { coeff: 0.5 coeff: -1 } }
layer { name: "leaky" type: "ReLU" bottom: "res" top: "res" relu_param { negative_slope: 0.1 } }
layer { name: "pool1" type: "Pooling" bottom: "res" top: "pool1"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "inc_1x1" type: "Convolution" bottom: "pool1" top: "inc_1x1"
        convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "inc_3x3" type: "Convolution" bottom: "pool1" top: "inc_3x3"
        convolution_param { num_output: 4 kernel_size: 3 pad: 2 dilation: 2 } }
layer { name: "inc_pool" type: "Pooling" bottom: "pool1" top: "inc_pool"
        pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "inc_sig" type: "Sigmoid" bottom: "inc_pool" top: "inc_sig" }
layer { name: "inc" type: "Concat" bottom: "inc_1x1" bottom: "inc_3x3" bottom: "inc_sig" top: "inc" }
layer { name: "norm" type: "LRN" bottom: "inc" top: "norm"
        lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 k: 2 } }
layer { name: "pool_ave" type: "Pooling" bottom: "norm" top: "pool_ave"
        pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "pool_ave0" type: "Pooling" bottom: "norm" top: "pool_ave0"
        pooling_param { pool: AVE kernel_size: 2 stride: 3 } }
layer { name: "pool_max_pad" type: "Pooling" bottom: "norm" top: "pool_max_pad"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 pad: 1 } }
layer { name: "tanh" type: "TanH" bottom: "pool_ave" top: "tanh" }
layer { name: "prod" type: "Eltwise" bottom: "tanh" bottom: "pool_max_pad" top: "prod"
        eltwise_param { operation: PROD } }
layer { name: "max" type: "Eltwise" bottom: "prod" bottom: "pool_ave" bottom: "pool_max_pad"
        top: "max" eltwise_param { operation: MAX } }
layer { name: "up" type: "Deconvolution" bottom: "max" top: "up"
        convolution_param { num_output: 6 kernel_size: 2 stride: 2 group: 2 } }
layer { name: "scale" type: "Scale" bottom: "up" top: "scale" scale_param { bias_term: true } }
layer { name: "bias" type: "Bias" bottom: "scale" top: "bias" }
layer { name: "clip" type: "Clip" bottom: "bias" top: "bias" clip_param { min: -1 max: 1.5 } }
layer { name: "gpool" type: "Pooling" bottom: "bias" top: "gpool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "gmax" type: "Pooling" bottom: "bias" top: "gmax" pooling_param { pool: MAX global_pooling: true } }
layer { name: "gsum" type: "Eltwise" bottom: "gpool" bottom: "gmax" bottom: "gpool" top: "gsum" }
layer { name: "drop" type: "Dropout" bottom: "gsum" top: "gsum" }
layer { name: "flat" type: "Flatten" bottom: "gsum" top: "flat" }
layer { name: "fc" type: "InnerProduct" bottom: "pool_ave0" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "fc_t" type: "InnerProduct" bottom: "flat" top: "fc_t"
        inner_product_param { num_output: 5 transpose: true } }
layer { name: "sum" type: "Eltwise" bottom: "fc" bottom: "fc_t" top: "sum" }
layer { name: "prob" type: "Softmax" bottom: "sum" top: "prob" }
layer { name: "reshape" type: "Reshape" bottom: "up" top: "reshape"
        reshape_param { shape { dim: 0 dim: 3 dim: -1 } } }
layer { name: "fc_axis2" type: "InnerProduct" bottom: "reshape" top: "fc_axis2"
        inner_product_param { num_output: 4 axis: 2 } }
layer { name: "perm" type: "Permute" bottom: "fc_axis2" top: "perm" permute_param { order: 0 order: 2 order: 1 } }
layer { name: "soft1" type: "Softmax" bottom: "perm" top: "soft1" softmax_param { axis: 1 } }
layer { name: "upn" type: "Upsample" bottom: "pool_max_pad" top: "upn" upsample_param { scale: 2 } }
layer { name: "upb" type: "Upsample" bottom: "pool_max_pad" top: "upb"
        upsample_param { scale: 2 mode: BILINEAR } }
layer { name: "drop2" type: "Dropout" bottom: "upb" top: "drop2" dropout_param { dropout_ratio: 0.25 scale_train: false } }
)";

std::unique_ptr<Net> BuildNet(const NetParameter& param) {
  NetOptions options;
  options.verbose = false;
  return std::make_unique<Net>(param, options);
}

NetParameter ParseNet(const std::string& text) {
  NetParameter param;
  ParseTextProto(text, "zoo.prototxt", &param);
  return param;
}

// Random weights; BatchNorm statistics stored scaled by a moving-average factor of 0.8, as
// Caffe keeps them.
void Randomize(Net* net, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.4f);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  for (const auto& layer : net->layers()) {
    const bool bn = std::string(layer->type()) == "BatchNorm";
    for (size_t k = 0; k < layer->blobs().size(); ++k) {
      Blob& blob = *layer->blobs()[k];
      float* data = blob.mutable_cpu_data<float>();
      for (int64_t i = 0; i < blob.count(); ++i) {
        if (bn) {
          data[i] = k == 0 ? 0.8f * normal(rng) : k == 1 ? 0.8f * uniform(rng) : 0.8f;
        } else {
          data[i] = normal(rng);
        }
      }
    }
  }
}

void FillInputs(Net* net, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  for (Blob* blob : net->input_blobs()) {
    float* data = blob->mutable_cpu_data<float>();
    for (int64_t i = 0; i < blob->count(); ++i) data[i] = uniform(rng);
  }
}

using onnx_test::BlobValues;
using onnx_test::RunCommand;

void ExpectClose(const std::vector<float>& expected, const std::vector<float>& actual,
                 double tolerance, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  double scale = 1.0;
  for (float v : expected) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(expected[i], actual[i], tolerance * scale) << what << " at " << i;
}

struct Exported {
  onnx::ModelProto model;
  std::string weights_path;
};

// Builds `text` with random weights, saves them, exports the pair.
Exported Export(const NetParameter& param, const std::string& dir, std::unique_ptr<Net>* net,
                int opset = 17) {
  *net = BuildNet(param);
  Randomize(net->get(), 7);
  NetParameter weights;
  (*net)->ToProto(&weights);
  Exported out;
  out.weights_path = dir + "/w.caffemodel";
  WriteBinaryProto(weights, out.weights_path);
  OnnxExportOptions options;
  options.opset = opset;
  ExportOnnx(param, {out.weights_path}, "zoo.prototxt", options, &out.model);
  return out;
}

// ONNX outputs are named after the net's output blobs, in order (renamed when the blob was
// written in place): out[i] is output_blobs()[i].
void ExpectRoundTrip(const NetParameter& param) {
  const std::string dir = testing::TempDir();
  std::unique_ptr<Net> original;
  const Exported exported = Export(param, dir, &original);
  NetParameter deploy, weights;
  ImportOnnx(exported.model, "zoo.onnx", &deploy, &weights);
  std::unique_ptr<Net> imported = BuildNet(deploy);
  imported->CopyTrainedLayersFrom(weights);
  FillInputs(original.get(), 3);
  FillInputs(imported.get(), 3);
  original->Forward();
  imported->Forward();
  const auto& outputs = exported.model.graph().output();
  ASSERT_EQ(outputs.size(), static_cast<int>(original->output_blobs().size()));
  for (int i = 0; i < outputs.size(); ++i) {
    const BlobPtr blob = imported->blob_by_name(outputs.Get(i).name());
    ASSERT_TRUE(blob != nullptr) << outputs.Get(i).name();
    EXPECT_EQ(blob->shape(), original->output_blobs()[i]->shape()) << outputs.Get(i).name();
    ExpectClose(BlobValues(*original->output_blobs()[i]), BlobValues(*blob), 1e-5,
                outputs.Get(i).name());
  }
}

TEST(OnnxTest, ZooNetRoundTripForwardIsEqual) { ExpectRoundTrip(ParseNet(kZooNet)); }

TEST(OnnxTest, ExportWritesOpset17AndIrVersion8) {
  std::unique_ptr<Net> net;
  const Exported exported = Export(ParseNet(kZooNet), testing::TempDir(), &net);
  EXPECT_EQ(exported.model.ir_version(), 8);
  ASSERT_EQ(exported.model.opset_import_size(), 1);
  EXPECT_EQ(exported.model.opset_import(0).version(), 17);
  // BatchNorm + Scale fused; the lone BatchNorm has scale 1 and bias 0.
  int batch_norms = 0, muls = 0;
  for (const auto& node : exported.model.graph().node()) {
    batch_norms += node.op_type() == "BatchNormalization";
    muls += node.op_type() == "Mul";
  }
  EXPECT_EQ(batch_norms, 2);
  // The fused BatchNorm's mean is blobs[0] / blobs[2].
  const Blob& mean = *net->layer_by_name("bn1")->blobs()[0];
  for (const auto& t : exported.model.graph().initializer()) {
    if (t.name() != "bn1/mean") continue;
    std::vector<float> values(t.raw_data().size() / sizeof(float));
    std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
    ASSERT_EQ(values.size(), static_cast<size_t>(mean.count()));
    for (size_t c = 0; c < values.size(); ++c)
      EXPECT_NEAR(values[c], mean.cpu_data<float>()[c] / 0.8f, 1e-6);
  }
  EXPECT_GE(muls, 3);  // Eltwise coeffs, PROD, standalone Scale, Dropout's test-time factor
}

// Pooling windows in every rounding situation (ceil overflow with and without padding, windows
// fully inside, FLOOR rounding) survive both directions.
TEST(OnnxTest, PoolingCornerCasesRoundTrip) {
  for (int size : {5, 6, 7, 8}) {
    for (const char* pool : {"MAX", "AVE"}) {
      for (const char* extra : {"kernel_size: 3 stride: 2 pad: 1", "kernel_size: 3 stride: 2",
                                "kernel_size: 2 stride: 2 pad: 1",
                                "kernel_h: 3 kernel_w: 2 "
                                "stride_h: 2 stride_w: 3 pad_h: 1 pad_w: 1",
                                "kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR"}) {
        const std::string text = StrCat(
            "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 2 "
            "dim: ",
            size, " dim: ", size + 1,
            " } } }\n"
            "layer { name: 'pool' type: 'Pooling' bottom: 'data' top: 'pool' pooling_param { "
            "pool: ",
            pool, " ", extra, " } }\n");
        SCOPED_TRACE(text);
        ExpectRoundTrip(ParseNet(text));
      }
    }
  }
}

// Runs tests/tools/onnx_check.py (onnx.checker + onnxruntime) on `model_path` with the net's
// inputs and compares each output with the net's. Returns false when Python lacks the packages.
bool CompareWithOnnxRuntime(Net* net, const std::string& model_path, const std::string& dir,
                            const std::vector<std::string>& output_names, double tolerance) {
  std::string output;
  const int rc = onnx_test::RunOnnxCheck(net, model_path, dir, &output);
  if (rc == onnx_test::kOnnxRuntimeMissing) return false;
  EXPECT_EQ(rc, 0) << output;
  if (rc != 0) return true;
  for (size_t i = 0; i < output_names.size(); ++i) {
    const NpyArray ort = onnx_test::ReadOrtOutput(dir, output_names[i]);
    const std::vector<float> expected = BlobValues(*net->output_blobs()[i]);
    EXPECT_EQ(ort.shape.size(), net->output_blobs()[i]->shape().size()) << output_names[i];
    ExpectClose(expected, std::vector<float>(ort.values.begin(), ort.values.end()), tolerance,
                output_names[i]);
  }
  return true;
}

// Exports `text` with random weights, runs it on random inputs in crema and onnxruntime.
void ExpectOnnxRuntimeMatches(const std::string& text, unsigned seed, double tolerance,
                              int opset = 17) {
  const std::string dir = testing::TempDir();
  std::unique_ptr<Net> net;
  const Exported exported = Export(ParseNet(text), dir, &net, opset);
  WriteBinaryProto(exported.model, dir + "/net.onnx");
  FillInputs(net.get(), seed);
  net->Forward();
  std::vector<std::string> names;
  for (const auto& output : exported.model.graph().output()) names.push_back(output.name());
  if (!CompareWithOnnxRuntime(net.get(), dir + "/net.onnx", dir, names, tolerance))
    GTEST_SKIP() << "python3 lacks onnx/onnxruntime (scripts/setup.sh installs them)";
}

TEST(OnnxTest, OnnxRuntimeMatchesCremaForward) { ExpectOnnxRuntimeMatches(kZooNet, 5, 1e-4); }

// Power (every step, and the identity), PReLU (per channel and shared), WITHIN_CHANNEL LRN.
constexpr char kPowerNet[] = R"(name: "power"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 6 dim: 5 } } }
layer { name: "prelu" type: "PReLU" bottom: "data" top: "prelu" }
layer { name: "shared" type: "PReLU" bottom: "data" top: "shared" prelu_param { channel_shared: true } }
layer { name: "sq" type: "Power" bottom: "prelu" top: "sq" power_param { power: 2 scale: 0.5 shift: 3 } }
layer { name: "lin" type: "Power" bottom: "shared" top: "lin" power_param { scale: -2 } }
layer { name: "id" type: "Power" bottom: "lin" top: "id" }
layer { name: "tail" type: "TanH" bottom: "id" top: "tail" }
layer { name: "lrn" type: "LRN" bottom: "sq" top: "lrn"
        lrn_param { local_size: 3 alpha: 0.2 beta: 0.75 norm_region: WITHIN_CHANNEL } }
)";

TEST(OnnxTest, PowerPreluWithinChannelLrnRoundTrip) { ExpectRoundTrip(ParseNet(kPowerNet)); }

TEST(OnnxTest, OnnxRuntimeMatchesPowerPreluWithinChannelLrn) {
  ExpectOnnxRuntimeMatches(kPowerNet, 4, 1e-5);
}

TEST(OnnxTest, OnnxRuntimeMatchesPoolingCornerCases) {
  std::string text =
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 2 "
      "dim: 6 dim: 7 } } }\n";
  int k = 0;
  for (const char* pool : {"MAX", "AVE"})
    for (const char* extra : {"kernel_size: 3 stride: 2 pad: 1", "kernel_size: 3 stride: 2",
                              "kernel_size: 2 stride: 2 pad: 1", "kernel_size: 3 stride: 3",
                              "kernel_size: 3 stride: 2 pad: 1 round_mode: FLOOR"})
      text += StrCat("layer { name: 'pool", k, "' type: 'Pooling' bottom: 'data' top: 'pool", k++,
                     "' pooling_param { pool: ", pool, " ", extra, " } }\n");
  ExpectOnnxRuntimeMatches(text, 9, 1e-5);
}

// The real SqueezeNet v1.0 (legacy input: fields): crema vs onnxruntime, and the round trip.
TEST(OnnxTest, SqueezeNetEndToEnd) {
  CREMA_REQUIRE_REFERENCE(folder, "real/models/squeezenet_v1.0");
  const std::string dir = testing::TempDir();
  const std::string deploy_path = folder + "/SqueezeNet_deploy.prototxt";
  const std::string weights_path = folder + "/squeezenet_v1.0_dc_decoded.caffemodel";
  ExportOnnxFile(deploy_path, {weights_path}, dir + "/sq.onnx", OnnxExportOptions{});
  std::unique_ptr<Net> net = Net::FromFile(deploy_path, TEST);
  net->CopyTrainedLayersFrom(weights_path);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-60.f, 60.f);
  float* data = net->input_blobs()[0]->mutable_cpu_data<float>();
  for (int64_t i = 0; i < net->input_blobs()[0]->count(); ++i) data[i] = uniform(rng);
  net->Forward();
  const std::vector<float> expected = BlobValues(*net->output_blobs()[0]);

  ImportOnnxFile(dir + "/sq.onnx", dir + "/rt.prototxt", dir + "/rt.caffemodel");
  std::unique_ptr<Net> imported = Net::FromFile(dir + "/rt.prototxt", TEST);
  imported->CopyTrainedLayersFrom(dir + "/rt.caffemodel");
  imported->input_blobs()[0]->CopyFrom(*net->input_blobs()[0]);
  imported->Forward();
  ExpectClose(expected, BlobValues(*imported->output_blobs()[0]), 1e-5, "round trip");

  if (!CompareWithOnnxRuntime(net.get(), dir + "/sq.onnx", dir, {"pool_final"}, 1e-4))
    GTEST_SKIP() << "python3 lacks onnx/onnxruntime (scripts/setup.sh installs them)";
}

template <typename Fn>
std::string ConfigErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(OnnxTest, UnsupportedLayerIsNamed) {
  const NetParameter param = ParseNet(
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 2 } } }\n"
      "layer { name: 'odd' type: 'AbsVal' bottom: 'data' top: 'odd' }\n");
  onnx::ModelProto model;
  const std::string message =
      ConfigErrorOf([&] { ExportOnnx(param, {}, "n.prototxt", OnnxExportOptions{}, &model); });
  EXPECT_NE(message.find("layer \"odd\" (AbsVal)"), std::string::npos) << message;
  EXPECT_NE(message.find("no ONNX mapping"), std::string::npos) << message;
}

// Input 6, kernel 2, stride 3: Caffe's third window starts past the input (its average divides
// by zero), so there is nothing exact to export.
TEST(OnnxTest, PoolingWindowOutsideTheInputIsAnError) {
  const NetParameter param = ParseNet(
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 1 dim: 6 "
      "dim: 6 } } }\n"
      "layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { pool: MAX "
      "kernel_size: 2 stride: 3 } }\n");
  onnx::ModelProto model;
  const std::string message =
      ConfigErrorOf([&] { ExportOnnx(param, {}, "p.prototxt", OnnxExportOptions{}, &model); });
  EXPECT_NE(message.find("layer \"p\" (Pooling)"), std::string::npos) << message;
}

TEST(OnnxTest, TrainValNetAsksForADeployNet) {
  const NetParameter param = ParseNet(
      "layer { name: 'mnist' type: 'Data' top: 'data' top: 'label' data_param { source: 'x' "
      "batch_size: 2 } }\n"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { "
      "num_output: 2 } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n");
  onnx::ModelProto model;
  const std::string message =
      ConfigErrorOf([&] { ExportOnnx(param, {}, "tv.prototxt", OnnxExportOptions{}, &model); });
  EXPECT_NE(message.find("\"mnist\" (Data)"), std::string::npos) << message;
  EXPECT_NE(message.find("deploy net"), std::string::npos) << message;
}

TEST(OnnxTest, OpsetOutsideTheRangeIsAConfigError) {
  EXPECT_EQ(OnnxIrVersionForOpset(13), 7);
  EXPECT_EQ(OnnxIrVersionForOpset(17), 8);
  EXPECT_NE(ConfigErrorOf([] { OnnxIrVersionForOpset(9); }).find("opset"), std::string::npos);
}

// A graph with an input x (1, 2, 4, 4) and one node built by `node`.
onnx::ModelProto OneNodeModel(const std::string& op) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  onnx::ValueInfoProto* input = graph->add_input();
  input->set_name("x");
  auto* shape = input->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int d : {1, 2, 4, 4}) shape->add_dim()->set_dim_value(d);
  onnx::NodeProto* node = graph->add_node();
  node->set_name("n1");
  node->set_op_type(op);
  node->add_input("x");
  node->add_output("y");
  graph->add_output()->set_name("y");
  return model;
}

TEST(OnnxTest, ImportNamesUnsupportedNodes) {
  NetParameter deploy, weights;
  const onnx::ModelProto model = OneNodeModel("Gather");
  const std::string message =
      ConfigErrorOf([&] { ImportOnnx(model, "m.onnx", &deploy, &weights); });
  EXPECT_NE(message.find("node \"n1\" (Gather)"), std::string::npos) << message;
}

TEST(OnnxTest, ImportRejectsAsymmetricPads) {
  onnx::ModelProto model = OneNodeModel("MaxPool");
  onnx::NodeProto* node = model.mutable_graph()->mutable_node(0);
  onnx::AttributeProto* kernel = node->add_attribute();
  kernel->set_name("kernel_shape");
  kernel->set_type(onnx::AttributeProto::INTS);
  kernel->add_ints(2);
  kernel->add_ints(2);
  onnx::AttributeProto* pads = node->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int p : {0, 0, 1, 1}) pads->add_ints(p);  // stride 1: one extra window Caffe lacks
  NetParameter deploy, weights;
  const std::string message =
      ConfigErrorOf([&] { ImportOnnx(model, "m.onnx", &deploy, &weights); });
  EXPECT_NE(message.find("node \"n1\" (MaxPool)"), std::string::npos) << message;
  EXPECT_NE(message.find("no Caffe Pooling"), std::string::npos) << message;
}

// SSD: two heads (one after a per-position Normalize, one after a per-item Normalize with one
// scale), their PriorBoxes, Permute/Flatten/Concat, the conf Reshape/Softmax/Flatten, and
// DetectionOutput with `detection` as its detection_output_param; `batch` images of 16 x 16.
std::string SsdNet(int batch, const std::string& detection) {
  return StrCat(R"(name: "ssd"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: )",
                batch, R"( dim: 3 dim: 16 dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 } }
layer { name: "norm1" type: "Normalize" bottom: "conv1" top: "norm1"
        norm_param { across_spatial: false channel_shared: false eps: 0.001 } }
layer { name: "norm2" type: "Normalize" bottom: "conv2" top: "norm2" }
layer { name: "loc1" type: "Convolution" bottom: "norm1" top: "loc1"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
layer { name: "loc1_perm" type: "Permute" bottom: "loc1" top: "loc1_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "loc1_flat" type: "Flatten" bottom: "loc1_perm" top: "loc1_flat" }
layer { name: "conf1" type: "Convolution" bottom: "norm1" top: "conf1"
        convolution_param { num_output: 12 kernel_size: 3 pad: 1 } }
layer { name: "conf1_perm" type: "Permute" bottom: "conf1" top: "conf1_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "conf1_flat" type: "Flatten" bottom: "conf1_perm" top: "conf1_flat" }
layer { name: "prior1" type: "PriorBox" bottom: "norm1" bottom: "data" top: "prior1"
        prior_box_param { min_size: 4 max_size: 8 aspect_ratio: 2 flip: true
                          variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }
layer { name: "loc2" type: "Convolution" bottom: "norm2" top: "loc2"
        convolution_param { num_output: 8 kernel_size: 1 } }
layer { name: "loc2_perm" type: "Permute" bottom: "loc2" top: "loc2_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "loc2_flat" type: "Flatten" bottom: "loc2_perm" top: "loc2_flat" }
layer { name: "conf2" type: "Convolution" bottom: "norm2" top: "conf2"
        convolution_param { num_output: 6 kernel_size: 1 } }
layer { name: "conf2_perm" type: "Permute" bottom: "conf2" top: "conf2_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "conf2_flat" type: "Flatten" bottom: "conf2_perm" top: "conf2_flat" }
layer { name: "prior2" type: "PriorBox" bottom: "norm2" bottom: "data" top: "prior2"
        prior_box_param { min_size: 8 aspect_ratio: 2 flip: false clip: true variance: 0.1 } }
layer { name: "mbox_loc" type: "Concat" bottom: "loc1_flat" bottom: "loc2_flat" top: "mbox_loc" }
layer { name: "mbox_conf" type: "Concat" bottom: "conf1_flat" bottom: "conf2_flat" top: "mbox_conf" }
layer { name: "mbox_prior" type: "Concat" bottom: "prior1" bottom: "prior2" top: "mbox_prior"
        concat_param { axis: 2 } }
layer { name: "conf_reshape" type: "Reshape" bottom: "mbox_conf" top: "conf_reshape"
        reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
layer { name: "conf_softmax" type: "Softmax" bottom: "conf_reshape" top: "conf_softmax"
        softmax_param { axis: 2 } }
layer { name: "conf_flat" type: "Flatten" bottom: "conf_softmax" top: "conf_flat" }
layer { name: "detection_out" type: "DetectionOutput" bottom: "mbox_loc" bottom: "conf_flat"
        bottom: "mbox_prior" top: "detection_out"
        detection_output_param { num_classes: 3 )",
                detection, R"( } }
)");
}

// Rows of DetectionOutput's top as crema computed them (checked equal to onnxruntime's: the
// same number of rows, each value within 1e-5 of the largest magnitude); empty when python3
// lacks onnxruntime.
std::vector<float> ExpectSsdMatches(int batch, const std::string& detection, bool* ran,
                                    int opset = 17) {
  const std::string dir = testing::TempDir();
  std::unique_ptr<Net> net;
  const Exported exported = Export(ParseNet(SsdNet(batch, detection)), dir, &net, opset);
  WriteBinaryProto(exported.model, dir + "/ssd.onnx");
  FillInputs(net.get(), 13);
  net->Forward();
  const std::vector<float> rows = BlobValues(*net->output_blobs()[0]);
  std::string output;
  const int rc = onnx_test::RunOnnxCheck(net.get(), dir + "/ssd.onnx", dir, &output);
  *ran = rc != onnx_test::kOnnxRuntimeMissing;
  if (!*ran) return rows;
  EXPECT_EQ(rc, 0) << output;
  if (rc != 0) return rows;
  const NpyArray ort = onnx_test::ReadOrtOutput(dir, "detection_out");
  EXPECT_EQ(ort.shape, (std::vector<int64_t>{1, 1, static_cast<int64_t>(rows.size() / 7), 7}))
      << detection;
  ExpectClose(rows, std::vector<float>(ort.values.begin(), ort.values.end()), 1e-5, detection);
  return rows;
}

int CountRows(const std::vector<float>& rows, int image, int label) {
  int n = 0;
  for (size_t r = 0; r < rows.size(); r += 7)
    n += rows[r] == image && (label < 0 || rows[r + 1] == label);
  return n;
}

#define CREMA_SKIP_WITHOUT_ORT(ran) \
  if (!(ran)) GTEST_SKIP() << "python3 lacks onnx/onnxruntime (scripts/setup.sh installs them)"

TEST(OnnxSsdTest, EveryCodeTypeMatchesCremaForward) {
  for (const char* code : {"code_type: CENTER_SIZE", "code_type: CORNER", "code_type: CORNER_SIZE",
                           "code_type: CENTER_SIZE variance_encoded_in_target: true",
                           "code_type: CORNER_SIZE variance_encoded_in_target: true"}) {
    bool ran = false;
    const std::vector<float> rows = ExpectSsdMatches(
        1, StrCat(code, " nms_param { nms_threshold: 0.45 } confidence_threshold: 0.4"), &ran);
    CREMA_SKIP_WITHOUT_ORT(ran);
    EXPECT_GT(rows.size() / 7, 10u) << code;  // NMS had work to do
    EXPECT_EQ(CountRows(rows, 0, 0), 0) << "background rows";
  }
}

// top_k 8 cuts each class's candidates before NMS: both classes keep more than 8 boxes without
// it, and fewer than 8 in one class with it, as NMS suppresses some of the 8 (ONNX's
// max_output_boxes_per_class alone would keep 8 of each); keep_top_k
// 5 then cuts across classes (batch 1: TopK; batch 2: per-image ranks).
TEST(OnnxSsdTest, TopKBeforeNmsAndKeepTopKMatchCremaForward) {
  const std::string base = "code_type: CENTER_SIZE confidence_threshold: 0.3 ";
  bool ran = false;
  const std::vector<float> all =
      ExpectSsdMatches(1, base + "nms_param { nms_threshold: 0.1 }", &ran);
  CREMA_SKIP_WITHOUT_ORT(ran);
  const std::vector<float> top_k =
      ExpectSsdMatches(1, base + "nms_param { nms_threshold: 0.1 top_k: 8 }", &ran);
  for (int label : {1, 2}) {
    EXPECT_GT(CountRows(all, 0, label), 8) << label;
    EXPECT_LE(CountRows(top_k, 0, label), 8) << label;
  }
  EXPECT_LT(CountRows(top_k, 0, -1), 16);
  const std::vector<float> keep =
      ExpectSsdMatches(1, base + "nms_param { nms_threshold: 0.3 } keep_top_k: 12", &ran);
  EXPECT_EQ(keep.size() / 7, 12u);
  EXPECT_GT(CountRows(keep, 0, 1), 0);
  EXPECT_GT(CountRows(keep, 0, 2), 0);
  const std::vector<float> both =
      ExpectSsdMatches(1, base + "nms_param { nms_threshold: 0.3 top_k: 4 } keep_top_k: 5", &ran);
  EXPECT_EQ(both.size() / 7, 5u);
  const std::vector<float> batch2 =
      ExpectSsdMatches(2, base + "nms_param { nms_threshold: 0.3 top_k: 20 } keep_top_k: 6", &ran);
  EXPECT_EQ(CountRows(batch2, 0, -1), 6);
  EXPECT_EQ(CountRows(batch2, 1, -1), 6);
  const std::vector<float> batch2_all =
      ExpectSsdMatches(2, base + "nms_param { nms_threshold: 0.3 } keep_top_k: 1000", &ran);
  EXPECT_GT(CountRows(batch2_all, 1, -1), 6);
}

// The operators' forms change with the opset (ReduceSumSquare's axes become an input at 18).
TEST(OnnxSsdTest, OldestAndNewestOpsetsMatchCremaForward) {
  for (int opset : {13, 21}) {
    bool ran = false;
    const std::vector<float> rows = ExpectSsdMatches(
        2, "code_type: CORNER nms_param { nms_threshold: 0.3 top_k: 20 } keep_top_k: 9", &ran,
        opset);
    CREMA_SKIP_WITHOUT_ORT(ran);
    EXPECT_EQ(rows.size() / 7, 18u);
  }
}

// Normalize: per position or per item, one scale per channel or one for all, 3-D and 4-D.
TEST(OnnxSsdTest, OnnxRuntimeMatchesNormalize) {
  std::string text =
      "layer { name: 'data' type: 'Input' top: 'data' top: 'seq' input_param { shape { dim: 2 "
      "dim: 3 dim: 4 dim: 5 } shape { dim: 2 dim: 6 dim: 7 } } }\n";
  int k = 0;
  for (const char* bottom : {"data", "seq"})
    for (const char* across : {"true", "false"})
      for (const char* shared : {"true", "false"})
        text += StrCat("layer { name: 'n", k, "' type: 'Normalize' bottom: '", bottom, "' top: 'n",
                       k++, "' norm_param { across_spatial: ", across, " channel_shared: ", shared,
                       " eps: 0.01 } }\n");
  for (int opset : {17, 18}) ExpectOnnxRuntimeMatches(text, 6, 1e-5, opset);
}

// No score passes: crema's placeholder rows [i, -1, -1, -1, -1, -1, -1], one per image.
TEST(OnnxSsdTest, NoDetectionGivesCremasPlaceholderRows) {
  bool ran = false;
  const std::vector<float> rows =
      ExpectSsdMatches(2, "code_type: CENTER_SIZE confidence_threshold: 0.9999", &ran);
  CREMA_SKIP_WITHOUT_ORT(ran);
  ASSERT_EQ(rows.size(), 14u);
  EXPECT_EQ(rows[7], 1.f);
  EXPECT_EQ(rows[8], -1.f);
}

TEST(OnnxSsdTest, PriorBoxIsAConstantOfCremasValues) {
  std::unique_ptr<Net> net;
  const Exported exported =
      Export(ParseNet(SsdNet(1, "code_type: CENTER_SIZE")), testing::TempDir(), &net);
  net->Forward();
  const Blob& prior = *net->blob_by_name("prior1");
  bool found = false;
  for (const auto& t : exported.model.graph().initializer()) {
    if (t.name() != "prior1") continue;
    found = true;
    ASSERT_EQ(t.raw_data().size(), prior.count() * sizeof(float));
    std::vector<float> values(prior.count());
    std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
    EXPECT_EQ(values, BlobValues(prior));
  }
  EXPECT_TRUE(found);
  for (const auto& node : exported.model.graph().node()) EXPECT_NE(node.name(), "prior1");
}

// A DetectionOutput reading Input blobs directly, for the refusals.
std::string DetectionOnlyNet(int loc_per_prior, const std::string& detection) {
  return StrCat(
      "layer { name: 'in' type: 'Input' top: 'map' top: 'image' top: 'loc' top: 'conf' "
      "input_param { shape { dim: 1 dim: 1 dim: 2 dim: 2 } shape { dim: 1 dim: 1 dim: 8 dim: 8 } "
      "shape { dim: 1 dim: ",
      4 * loc_per_prior,
      " } shape { dim: 1 dim: 8 } } }\n"
      "layer { name: 'prior' type: 'PriorBox' bottom: 'map' bottom: 'image' top: 'prior' "
      "prior_box_param { min_size: 4 } }\n"
      "layer { name: 'det' type: 'DetectionOutput' bottom: 'loc' bottom: 'conf' bottom: 'prior' "
      "top: 'det' detection_output_param { num_classes: 2 ",
      detection, " } }\n");
}

TEST(OnnxSsdTest, UnexportableDetectionOutputIsNamed) {
  onnx::ModelProto model;
  std::string message = ConfigErrorOf([&] {
    ExportOnnx(ParseNet(DetectionOnlyNet(8, "share_location: false")), {}, "d.prototxt",
               OnnxExportOptions{}, &model);
  });
  EXPECT_NE(message.find("layer \"det\" (DetectionOutput)"), std::string::npos) << message;
  EXPECT_NE(message.find("share_location"), std::string::npos) << message;
  message = ConfigErrorOf([&] {
    ExportOnnx(ParseNet(DetectionOnlyNet(4, "nms_param { eta: 0.9 }")), {}, "d.prototxt",
               OnnxExportOptions{}, &model);
  });
  EXPECT_NE(message.find("layer \"det\" (DetectionOutput)"), std::string::npos) << message;
  EXPECT_NE(message.find("nms_param.eta"), std::string::npos) << message;
  EXPECT_EQ(ConfigErrorOf([&] {
              ExportOnnx(ParseNet(DetectionOnlyNet(4, "")), {}, "d.prototxt", OnnxExportOptions{},
                         &model);
            }),
            "(no ConfigError)");
}

TEST(OnnxTest, CliVerbsRoundTrip) {
  const std::string dir = testing::TempDir();
  std::unique_ptr<Net> net;
  const NetParameter param = ParseNet(kZooNet);
  const Exported exported = Export(param, dir, &net);
  WriteTextProto(param, dir + "/zoo.prototxt");
  const std::string crema = StrCat("CREMA_OPENBLAS_FIX=0 ", CREMA_BINARY_DIR, "/crema ");
  std::string output;
  ASSERT_EQ(RunCommand(crema + "export-onnx --model " + dir + "/zoo.prototxt --weights " +
                           exported.weights_path + " --out " + dir + "/cli.onnx --opset 17",
                       &output),
            0)
      << output;
  ASSERT_EQ(RunCommand(crema + "import-onnx " + dir + "/cli.onnx --out-model " + dir +
                           "/back.prototxt --out-weights " + dir + "/back.caffemodel",
                       &output),
            0)
      << output;
  std::unique_ptr<Net> back = Net::FromFile(dir + "/back.prototxt", TEST);
  back->CopyTrainedLayersFrom(dir + "/back.caffemodel");
  FillInputs(net.get(), 1);
  FillInputs(back.get(), 1);
  net->Forward();
  back->Forward();
  ExpectClose(BlobValues(*net->blob_by_name("prob")), BlobValues(*back->blob_by_name("prob")), 1e-5,
              "prob");
  EXPECT_EQ(RunCommand(crema + "import-onnx " + dir + "/cli.onnx", &output), 2) << output;
  EXPECT_NE(output.find("--out_model"), std::string::npos) << output;
}

}  // namespace
}  // namespace crema
