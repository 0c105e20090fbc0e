// Every zoo net (models/*/deploy.prototxt, and lenet's lenet.prototxt) at batch 1 with random
// weights from a fixed seed: exported to ONNX, the file passes onnx.checker (full check) and
// onnxruntime's outputs -- the net's outputs and the logits feeding its final Softmax -- match
// crema's forward within 1e-4 relative; the ONNX imported back builds a net whose forward equals
// the original's within 1e-5 relative, and which re-exports to the same operator sequence.
// Relative error: max|a - b| / max(max|a|, 1e-6), a = crema's original values.
// onnxruntime parts skip when python3 lacks onnx/onnxruntime. CREMA_TEST_SKIP_LARGE_MODELS=1
// skips the nets over 100M parameters (VGG16: 550 MB of weights, about 26 s of the test's 60 s
// on two cores, and a few GB of memory).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/filler.hpp"
#include "core/rng.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "onnx/onnx.hpp"
#include "tools/onnx_test_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using onnx_test::BlobValues;

constexpr double kOnnxRuntimeTolerance = 1e-4;
constexpr double kRoundTripTolerance = 1e-5;
constexpr int64_t kLargeParams = 100'000'000;

std::vector<std::string> ZooModels() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(CREMA_SOURCE_DIR) / "models"))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string DeployPath(const std::string& model) {
  const fs::path dir = fs::path(CREMA_SOURCE_DIR) / "models" / model;
  const fs::path deploy = dir / "deploy.prototxt";
  return (fs::exists(deploy) ? deploy : dir / (model + ".prototxt")).string();
}

double RelativeError(const std::vector<float>& expected, const std::vector<float>& actual) {
  double scale = 1e-6, diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(expected[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(expected[i]) - actual[i]));
  }
  return diff / scale;
}

FillerParameter Filler(const std::string& type, double a, double b = 0) {
  FillerParameter f;
  f.set_type(type);
  if (type == "constant") f.set_value(static_cast<float>(a));
  if (type == "gaussian") f.set_std(static_cast<float>(a));
  if (type == "uniform") {
    f.set_min(static_cast<float>(a));
    f.set_max(static_cast<float>(b));
  }
  return f;
}

// He-scaled weights keep activations O(1) through deep ReLU nets; BatchNorm statistics are
// stored scaled by a moving-average factor of 0.8 (variances positive), Scale's gamma is near 1.
void RandomizeWeights(Net* net, int64_t seed) {
  SetRandomSeed(seed);
  FillerParameter msra;
  msra.set_type("msra");
  for (const auto& layer : net->layers()) {
    const std::string type = layer->type();
    for (size_t k = 0; k < layer->blobs().size(); ++k) {
      FillerParameter filler = Filler("gaussian", 0.1);
      if (type == "BatchNorm") {
        filler = k == 0   ? Filler("gaussian", 0.2)
                 : k == 1 ? Filler("uniform", 0.3, 1.2)
                          : Filler("constant", 0.8);
      } else if (type == "Scale" && k == 0) {
        filler = Filler("uniform", 0.5, 1.5);
      } else if (k == 0 && layer->blobs()[k]->num_axes() >= 2) {
        filler = msra;
      }
      FillBlob(filler, layer->blobs()[k].get());
    }
  }
}

void FillInput(Net* net, int64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> uniform(-50.f, 50.f);  // LRN's squares matter at this size
  for (Blob* blob : net->input_blobs()) {
    float* data = blob->mutable_cpu_data<float>();
    for (int64_t i = 0; i < blob->count(); ++i) data[i] = uniform(rng);
  }
}

std::unique_ptr<Net> BuildNet(const NetParameter& param) {
  NetOptions options;
  options.verbose = false;
  options.override_state = true;
  options.state.set_phase(TEST);
  return std::make_unique<Net>(param, options);
}

// One compared tensor: a Caffe blob of the original net and its ONNX tensor name.
struct Compared {
  std::string blob, tensor;
};

// The graph outputs, plus the logits: the input of the last Softmax, added as a graph output
// (a softmax over 1000 classes can hide errors in its input).
std::vector<Compared> ComparedTensors(const Net& net, onnx::ModelProto* model) {
  std::vector<Compared> out;
  const auto& outputs = model->graph().output();
  for (int i = 0; i < outputs.size(); ++i)
    out.push_back({net.blob_names()[net.output_blob_indices()[i]], outputs.Get(i).name()});
  for (int l = net.num_layers() - 1; l >= 0; --l) {
    if (std::string(net.layers()[l]->type()) != "Softmax") continue;
    const std::string& name = net.layers()[l]->layer_param().name();
    for (const auto& node : model->graph().node()) {
      if (node.op_type() != "Softmax" || node.name() != name) continue;
      const Blob& logits = *net.bottom_vecs()[l][0];
      onnx::ValueInfoProto* info = model->mutable_graph()->add_output();
      info->set_name(node.input(0));
      auto* tensor = info->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(onnx::TensorProto::FLOAT);
      for (int d : logits.shape()) tensor->mutable_shape()->add_dim()->set_dim_value(d);
      out.push_back({net.blob_names()[net.bottom_ids(l)[0]], node.input(0)});
    }
    break;
  }
  return out;
}

std::vector<std::string> OpTypes(const onnx::ModelProto& model) {
  std::vector<std::string> ops;
  for (const auto& node : model.graph().node()) ops.push_back(node.op_type());
  return ops;
}

class OnnxZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxZooTest, OnnxRuntimeAndRoundTripMatchCrema) {
  const std::string model_name = GetParam();
  NetParameter param;
  ReadNetParamsFromTextFile(DeployPath(model_name), &param);
  for (LayerParameter& layer : *param.mutable_layer())
    if (layer.type() == "Input")
      for (BlobShape& shape : *layer.mutable_input_param()->mutable_shape()) shape.set_dim(0, 1);
  std::unique_ptr<Net> net = BuildNet(param);
  int64_t params = 0;
  for (const auto& blob : net->learnable_params()) params += blob->count();
  const char* skip_large = std::getenv("CREMA_TEST_SKIP_LARGE_MODELS");
  if (params > kLargeParams && skip_large != nullptr && std::string(skip_large) == "1")
    GTEST_SKIP() << model_name << " has " << params / 1000000
                 << "M parameters and CREMA_TEST_SKIP_LARGE_MODELS=1";
  RandomizeWeights(net.get(), 1234);
  FillInput(net.get(), 99);
  net->Forward();

  onnx::ModelProto model;
  ExportOnnx(*net, OnnxExportOptions{}, &model);
  const std::vector<Compared> compared = ComparedTensors(*net, &model);
  ASSERT_GE(compared.size(), 2u) << "no Softmax found for the logits";

  // Import: the same forward from the ONNX graph rebuilt as a Caffe net.
  NetParameter deploy, weights;
  ImportOnnx(model, model_name + ".onnx", &deploy, &weights);
  std::unique_ptr<Net> imported = BuildNet(deploy);
  imported->CopyTrainedLayersFrom(weights);
  ASSERT_EQ(imported->input_blobs().size(), net->input_blobs().size());
  for (size_t i = 0; i < net->input_blobs().size(); ++i)
    imported->input_blobs()[i]->CopyFrom(*net->input_blobs()[i]);
  imported->Forward();
  for (const Compared& c : compared) {
    const BlobPtr blob = imported->blob_by_name(c.tensor);
    ASSERT_TRUE(blob != nullptr) << c.tensor;
    EXPECT_EQ(blob->shape(), net->blob_by_name(c.blob)->shape()) << c.tensor;
    const double error = RelativeError(BlobValues(*net->blob_by_name(c.blob)), BlobValues(*blob));
    EXPECT_LE(error, kRoundTripTolerance) << model_name << " round trip, " << c.blob;
  }
  // The imported net exports again, to the same operators.
  onnx::ModelProto again;
  ExportOnnx(*imported, OnnxExportOptions{}, &again);
  EXPECT_EQ(OpTypes(again), OpTypes(model)) << model_name;
  imported.reset();

  const std::string dir = (fs::path(::testing::TempDir()) / ("onnx_zoo_" + model_name)).string();
  fs::create_directories(dir);
  const std::string path = dir + "/model.onnx";
  WriteBinaryProto(model, path);
  model.Clear();
  again.Clear();
  std::string log;
  const int rc = onnx_test::RunOnnxCheck(net.get(), path, dir, &log);
  if (rc == onnx_test::kOnnxRuntimeMissing)
    GTEST_SKIP() << "python3 lacks onnx/onnxruntime (scripts/setup.sh installs them)";
  ASSERT_EQ(rc, 0) << log;
  for (const Compared& c : compared) {
    const NpyArray ort = onnx_test::ReadOrtOutput(dir, c.tensor);
    const Blob& blob = *net->blob_by_name(c.blob);
    EXPECT_EQ(ort.shape, std::vector<int64_t>(blob.shape().begin(), blob.shape().end()))
        << c.tensor;
    const double error =
        RelativeError(BlobValues(blob), std::vector<float>(ort.values.begin(), ort.values.end()));
    EXPECT_LE(error, kOnnxRuntimeTolerance) << model_name << " onnxruntime, " << c.blob;
    std::printf("%s %s: relative error vs onnxruntime %.3g\n", model_name.c_str(), c.blob.c_str(),
                error);
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxZooTest, ::testing::ValuesIn(ZooModels()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace crema
