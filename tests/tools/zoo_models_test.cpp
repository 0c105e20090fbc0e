// The model zoo's nets (models/*/deploy.prototxt and train_val.prototxt):
// - where BVLC Caffe's shape dumps (../shared/reference/bvlc/shapes) hold the same net, crema
//   must build exactly Caffe's layers, blobs, top shapes and parameter shapes (train_val with its
//   Data layers replaced by Input layers of the shapes they produce, as in those dumps);
// - every net builds and runs one forward pass: train_val in TRAIN and TEST with DummyData in
//   place of the LMDBs (batch 1 or 2), and deploy at batch 1 with the train_val TEST net's
//   weights, where its logits must equal train_val's on the same input and `prob` must be a
//   distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "io/json.hpp"
#include "net/net_json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

struct ZooNet {
  std::string name;
  int stored_size;  // image side in the LMDB when there is no crop_size
  int batch;        // batch for the forward passes
  // Reference dumps: deploy (TEST phase) and train_val (both phases), "" when none exists.
  std::string ref_deploy, ref_train_val;
};

const std::vector<ZooNet>& ZooNets() {
  static const std::vector<ZooNet> nets = {
      {"cifar10_quick", 32, 2, "examples__cifar10__cifar10_quick",
       "examples__cifar10__cifar10_quick_train_test"},
      {"cifar10_full", 32, 2, "examples__cifar10__cifar10_full",
       "examples__cifar10__cifar10_full_train_test"},
      {"bvlc_alexnet", 256, 1, "models__bvlc_alexnet__deploy", "models__bvlc_alexnet__train_val"},
      {"bvlc_reference_caffenet", 256, 1, "models__bvlc_reference_caffenet__deploy",
       "models__bvlc_reference_caffenet__train_val"},
      {"bvlc_googlenet", 256, 1, "models__bvlc_googlenet__deploy",
       "models__bvlc_googlenet__train_val"},
      {"vgg16", 256, 1, "", ""},
      {"resnet50", 256, 1, "", ""},
      {"squeezenet_v1.1", 256, 1, "SqueezeNet__SqueezeNet_v1.1__deploy",
       "SqueezeNet__SqueezeNet_v1.1__train_val"},
      {"mobilenet_v1", 256, 1, "MobileNet-Caffe__mobilenet_deploy", ""},
      {"mobilenet_v2", 256, 1, "MobileNet-Caffe__mobilenet_v2_deploy", ""},
  };
  return nets;
}

std::string ModelFile(const std::string& model, const std::string& file) {
  return std::string(CREMA_SOURCE_DIR) + "/models/" + model + "/" + file;
}

NetParameter ReadNet(const std::string& path) {
  NetParameter param;
  ReadNetParamsFromTextFile(path, &param);
  return param;
}

// Replaces each Data layer by an Input (or DummyData) layer with the same name, tops and rules,
// producing what the Data layer would: [batch, 3, crop or stored, crop or stored] and [batch].
void ReplaceDataLayers(NetParameter* param, int stored_size, int batch_override, bool dummy) {
  for (LayerParameter& layer : *param->mutable_layer()) {
    if (layer.type() != "Data") continue;
    const int crop = static_cast<int>(layer.transform_param().crop_size());
    const int side = crop > 0 ? crop : stored_size;
    const int batch =
        batch_override > 0 ? batch_override : static_cast<int>(layer.data_param().batch_size());
    layer.clear_transform_param();
    layer.clear_data_param();
    BlobShape data, label;
    for (int d : {batch, 3, side, side}) data.add_dim(d);
    label.add_dim(batch);
    if (dummy) {
      layer.set_type("DummyData");
      DummyDataParameter* p = layer.mutable_dummy_data_param();
      *p->add_shape() = data;
      *p->add_shape() = label;
      FillerParameter* f = p->add_data_filler();
      f->set_type("gaussian");
      f->set_std(50);                              // pixel values after mean subtraction
      p->add_data_filler()->set_type("constant");  // label 0
    } else {
      layer.set_type("Input");
      *layer.mutable_input_param()->add_shape() = data;
      *layer.mutable_input_param()->add_shape() = label;
    }
  }
}

std::unique_ptr<Net> Build(const NetParameter& param, Phase phase) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(phase);
  options.verbose = false;
  return std::make_unique<Net>(param, options);
}

// The differences between Caffe's dump and crema's NetToJson; the first layer's name may differ
// when Caffe's net used legacy `input:` fields (it names that layer "input").
std::vector<std::string> CompareWithReference(const Net& net, const Json& want) {
  std::vector<std::string> diffs;
  const Json got = ParseJson(NetToJson(net));
  const Json& wl = want["layers"];
  const Json& gl = got["layers"];
  if (wl.size() != gl.size())
    diffs.push_back("layer count: want " + std::to_string(wl.size()) + ", got " +
                    std::to_string(gl.size()));
  for (size_t i = 0; i < std::min(wl.size(), gl.size()) && diffs.size() < 5; ++i) {
    for (const char* field :
         {"name", "type", "bottoms", "tops", "top_shapes", "param_shapes", "loss_weights"}) {
      if (i == 0 && std::string(field) == "name" && wl[i]["type"].string == "Input") continue;
      if (!gl[i].has(field) || wl[i][field].Dump() != gl[i][field].Dump())
        diffs.push_back("layer " + std::to_string(i) + " (" + wl[i]["name"].string + ") " + field +
                        ": want " + wl[i][field].Dump() + ", got " +
                        (gl[i].has(field) ? gl[i][field].Dump() : "nothing"));
    }
  }
  for (const char* field : {"blobs", "input_blobs", "output_blobs", "num_learnable_params"}) {
    if (!got.has(field) || want[field].Dump() != got[field].Dump())
      diffs.push_back(std::string(field) + " differ");
  }
  return diffs;
}

TEST(ZooModels, ShapesMatchCaffe) {
  CREMA_REQUIRE_REFERENCE(shapes, "bvlc/shapes");
  int compared = 0;
  for (const ZooNet& z : ZooNets()) {
    struct Case {
      std::string file, ref;
      Phase phase;
    };
    std::vector<Case> cases;
    if (!z.ref_deploy.empty()) cases.push_back({"deploy.prototxt", z.ref_deploy + ".TEST", TEST});
    if (!z.ref_train_val.empty()) {
      cases.push_back({"train_val.prototxt", z.ref_train_val + ".TRAIN", TRAIN});
      cases.push_back({"train_val.prototxt", z.ref_train_val + ".TEST", TEST});
    }
    for (const Case& c : cases) {
      const std::string json = shapes + "/" + c.ref + ".json";
      if (!fs::exists(json)) continue;  // that dump is not part of this reference set
      SCOPED_TRACE(z.name + "/" + c.file + " vs " + c.ref);
      NetParameter param = ReadNet(ModelFile(z.name, c.file));
      ReplaceDataLayers(&param, z.stored_size, 0, /*dummy=*/false);
      std::unique_ptr<Net> net;
      ASSERT_NO_THROW(net = Build(param, c.phase));
      const std::vector<std::string> diffs =
          CompareWithReference(*net, ParseJson(testing::ReadFile(json)));
      std::string text;
      for (const std::string& d : diffs) text += "\n  " + d;
      EXPECT_TRUE(diffs.empty()) << text;
      ++compared;
    }
  }
  // cifar10 quick/full, AlexNet, CaffeNet, GoogLeNet, SqueezeNet v1.1 (deploy + 2 phases) and
  // MobileNet v1 deploy are in the reference set.
  EXPECT_GE(compared, 19);
}

// Sets every BatchNorm layer's statistics to mean 0, variance 1 (factor 1), as trained stats
// would be in scale; the zero-initialised ones would divide by sqrt(eps).
void UnitBatchNormStats(Net* net) {
  for (const auto& layer : net->layers()) {
    if (std::string(layer->type()) != "BatchNorm") continue;
    for (int b = 0; b < 3; ++b) {
      Blob& blob = *layer->blobs()[b];
      float* data = blob.mutable_cpu_data<float>();
      std::fill(data, data + blob.count(), b == 0 ? 0.0f : 1.0f);
    }
  }
}

bool AllFinite(const Blob& blob) {
  const float* data = blob.cpu_data<float>();
  return std::all_of(data, data + blob.count(), [](float v) { return std::isfinite(v); });
}

class ZooForward : public ::testing::TestWithParam<ZooNet> {};

TEST_P(ZooForward, TrainValAndDeployRunOneForwardPass) {
  const ZooNet& z = GetParam();
  NetParameter train_val = ReadNet(ModelFile(z.name, "train_val.prototxt"));
  ReplaceDataLayers(&train_val, z.stored_size, z.batch, /*dummy=*/true);

  // TRAIN: the losses are finite and positive.
  {
    std::unique_ptr<Net> net = Build(train_val, TRAIN);
    const double loss = net->Forward();
    EXPECT_TRUE(std::isfinite(loss)) << loss;
    EXPECT_GT(loss, 0.0);
  }

  // TEST: losses finite, accuracies in [0, 1].
  std::unique_ptr<Net> test_net = Build(train_val, TEST);
  UnitBatchNormStats(test_net.get());
  const double loss = test_net->Forward();
  EXPECT_TRUE(std::isfinite(loss)) << loss;
  for (const int i : test_net->output_blob_indices()) {
    const std::string& name = test_net->blob_names()[i];
    const float v = test_net->blobs()[i]->cpu_data<float>()[0];
    if (name.find("accuracy") != std::string::npos || name.find("top-") != std::string::npos) {
      EXPECT_GE(v, 0.0f) << name;
      EXPECT_LE(v, 1.0f) << name;
    }
  }

  // Deploy at this batch, with the TEST net's weights, on the TEST net's input.
  NetParameter deploy_param = ReadNet(ModelFile(z.name, "deploy.prototxt"));
  ASSERT_EQ(deploy_param.layer(0).type(), "Input");
  deploy_param.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, z.batch);
  std::unique_ptr<Net> deploy = Build(deploy_param, TEST);
  NetParameter weights;
  test_net->ToProto(&weights);
  deploy->CopyTrainedLayersFrom(weights);
  const Blob& input = *test_net->blob_by_name("data");
  Blob& deploy_input = *deploy->input_blobs()[0];
  ASSERT_EQ(deploy_input.shape(), input.shape());
  std::copy(input.cpu_data<float>(), input.cpu_data<float>() + input.count(),
            deploy_input.mutable_cpu_data<float>());
  deploy->Forward();

  // The logits: the bottom of deploy's Softmax "prob", computed by both nets.
  const int prob_index = deploy->layer_index("prob");
  ASSERT_GE(prob_index, 0);
  const std::string logits = deploy->blob_names()[deploy->bottom_ids(prob_index)[0]];
  ASSERT_TRUE(test_net->has_blob(logits)) << logits;
  const Blob& want = *test_net->blob_by_name(logits);
  const Blob& got = *deploy->blob_by_name(logits);
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_TRUE(AllFinite(want)) << logits;
  double max_abs = 0, max_diff = 0;
  for (int64_t i = 0; i < want.count(); ++i) {
    max_abs = std::max(max_abs, std::abs(static_cast<double>(want.cpu_data<float>()[i])));
    max_diff = std::max(max_diff, std::abs(static_cast<double>(want.cpu_data<float>()[i]) -
                                           got.cpu_data<float>()[i]));
  }
  EXPECT_GT(max_abs, 0.0) << "all-zero logits make the comparison meaningless";
  EXPECT_LE(max_diff, 1e-4 * std::max(1.0, max_abs)) << logits;

  const Blob& prob = *deploy->blob_by_name("prob");
  const int num = prob.shape()[0];
  const int64_t per = prob.count() / num;
  EXPECT_EQ(per, z.name.rfind("cifar10", 0) == 0 ? 10 : 1000);
  for (int n = 0; n < num; ++n) {
    double sum = 0;
    for (int64_t k = 0; k < per; ++k) {
      const float p = prob.cpu_data<float>()[n * per + k];
      EXPECT_GE(p, 0.0f);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "sample " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooForward, ::testing::ValuesIn(ZooNets()),
                         [](const ::testing::TestParamInfo<ZooNet>& info) {
                           std::string name = info.param.name;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace crema
