#include "layers/hinge_loss/hinge_loss_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/device.hpp"
#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

// Scores stay inside (-0.9, 0.9), away from the kinks at +-1.
CREMA_LAYER_CONFORMANCE(
    HingeLoss, LayerCase("", {{4, 5}, {4}}).Integer(1, 5).Range(-0.9, 0.9),
    LayerCase("hinge_loss_param { norm: L2 }", {{4, 5}, {4}}).Integer(1, 5).Range(-0.9, 0.9),
    LayerCase("hinge_loss_param { norm: L1 }", {{3, 2, 2, 2}, {3, 1, 1, 1}})
        .Integer(1, 8)
        .Range(-0.9, 0.9)
        .Name("nchw"),
    LayerCase("loss_weight: 0.5 hinge_loss_param { norm: L2 }", {{3, 4}, {3}})
        .Integer(1, 4)
        .Range(-3, 3)  // L2 is smooth at its hinge
        .Name("weighted"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

TEST(HingeLossValues, MatchNaiveReference) {
  const std::vector<double> x = {0.5, -2, 0.2, 1.5, -0.3, 0.7};
  const std::vector<double> label = {0, 2};
  for (bool l2 : {false, true}) {
    auto layer = CreateLayer(StrCat(
        "type: 'HingeLoss' loss_weight: 2 hinge_loss_param { norm: ", l2 ? "L2" : "L1", " }"));
    auto scores = MakeBlob({2, 3}, x);
    auto labels = MakeBlob({2}, label);
    Blob loss;
    layer->SetUp({scores.get(), labels.get()}, {&loss});
    layer->Forward({scores.get(), labels.get()}, {&loss});
    double expected = 0;
    std::vector<double> diff(6);
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k) {
        const double s = k == label[n] ? -1 : 1;
        const double m = std::max(0.0, 1 + s * x[n * 3 + k]);
        expected += l2 ? m * m : m;
        diff[n * 3 + k] = 2.0 / 2 * s * (l2 ? 2 * m : (m > 0 ? 1 : 0));
      }
    EXPECT_NEAR(loss.data_at(0), expected / 2, 1e-12) << l2;
    layer->Backward({&loss}, {true, false}, {scores.get(), labels.get()});
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(scores->diff_at(i), diff[i], 1e-12) << l2 << " " << i;
  }
}

TEST(HingeLossErrors, BadLabelsAndShapes) {
  Blob loss;
  for (double bad : {3.0, -1.0}) {
    auto layer = CreateLayer("type: 'HingeLoss'");
    auto scores = MakeBlob({2, 3}, {});
    auto labels = MakeBlob({2}, {0, bad});
    layer->SetUp({scores.get(), labels.get()}, {&loss});
    try {
      layer->Forward({scores.get(), labels.get()}, {&loss});
      FAIL() << "expected a RuntimeError";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("outside [0, 3)"), std::string::npos) << e.what();
    }
  }
  auto layer = CreateLayer("type: 'HingeLoss'");
  auto scores = MakeBlob({2, 3}, {});
  auto labels = MakeBlob({2, 2}, {});
  EXPECT_THROW(layer->SetUp({scores.get(), labels.get()}, {&loss}), ConfigError);
  auto layer2 = CreateLayer("type: 'HingeLoss'");
  auto ok = MakeBlob({2}, {0, 1});
  layer2->SetUp({scores.get(), ok.get()}, {&loss});
  layer2->Forward({scores.get(), ok.get()}, {&loss});
  EXPECT_THROW(layer2->Backward({&loss}, {true, true}, {scores.get(), ok.get()}), ConfigError);
}

// The GPU path finds bad labels on the device and reports the first, as the CPU does.
TEST(HingeLossGpu, BadLabelGivesTheCpuError) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  SetCudaDevice(0);
  std::vector<std::string> messages;
  for (const Device& device : {Device::Cpu(), Device::Cuda(0)}) {
    auto layer = CreateLayer("type: 'HingeLoss'", DataType::kFloat32);
    layer->set_device(device);
    auto scores = MakeBlob({3, 4}, {}, DataType::kFloat32);
    auto labels = MakeBlob({3}, {1, 9, -2}, DataType::kFloat32);
    Blob loss;
    const BlobVec bottom = {scores.get(), labels.get()};
    layer->SetUp(bottom, {&loss});
    try {
      layer->Forward(bottom, {&loss});
      ADD_FAILURE() << "expected a RuntimeError on " << device.ToString();
    } catch (const RuntimeError& e) {
      messages.push_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_NE(messages[1].find("label 9 at position 1 is outside [0, 4)"), std::string::npos);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(HingeLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "loss_hinge_l1",
                {{"fwd/132_ip_rnn__top0_ip_rnn.f32", {2, 10}}, {"inputs/label.f32", {2}}},
                {"fwd/138_loss_hinge_l1__top0_loss_hinge_l1.f32"}, {},
                {"bwd/138_loss_hinge_l1__bottom0_ip_rnn.f32", ""}, {});
  CheckLayerZoo(dir, "loss_hinge_l2",
                {{"fwd/126_ip_t__top0_ip_t.f32", {2, 10}}, {"inputs/label.f32", {2}}},
                {"fwd/139_loss_hinge_l2__top0_loss_hinge_l2.f32"}, {},
                {"bwd/139_loss_hinge_l2__bottom0_ip_t_ip_t_0_split_1.f32", ""}, {});
}

}  // namespace
}  // namespace crema
