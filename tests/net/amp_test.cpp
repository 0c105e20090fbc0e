// Mixed precision in the net (NetOptions::amp): which blobs the policy stores in half precision
// (and the per-layer override), that Forward and Backward through the float32 stand-ins follow the
// float32 net within the half type's rounding, that half storage shrinks the planned activation
// memory, that the loss scale scales the gradients and not the loss, and that weights stay
// float32.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/device.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"

namespace crema {
namespace {

// AVE pooling: MAX pooling's choice among rounded values may fall on another element than among
// float32 ones (as in any half-precision training), which moves whole gradients; this file
// compares values.
const char* kNet = R"(
  name: "small"
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 8 dim: 2 dim: 12 dim: 12 } shape { dim: 8 }
                             data_filler { type: "gaussian" std: 1 }
                             data_filler { type: "constant" value: 3 } } }
  layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
          convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: "xavier" }
                              bias_filler { type: "constant" value: 0.1 } } }
  layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
  layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
          pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy" }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::unique_ptr<Net> Build(const NetParameter& param, Amp amp, MemoryPlan plan = MemoryPlan::kOff) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TRAIN);
  options.verbose = false;
  options.amp = amp;
  options.memory_plan = plan;
  return std::make_unique<Net>(param, options);
}

DataType TypeOf(const Net& net, const std::string& blob) { return net.blob_by_name(blob)->dtype(); }

TEST(Amp, PolicyStoresActivationsInHalfAndTheRestInFloat32) {
  const auto net = Build(Parse(kNet), Amp::kBFloat16);
  EXPECT_EQ(net->amp(), Amp::kBFloat16);
  EXPECT_EQ(TypeOf(*net, "data"), DataType::kFloat32);  // from a data layer
  EXPECT_EQ(TypeOf(*net, "label"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(*net, "conv"), DataType::kBFloat16);  // and the ReLU in place on it
  EXPECT_EQ(TypeOf(*net, "pool"), DataType::kBFloat16);
  EXPECT_EQ(TypeOf(*net, "ip"), DataType::kBFloat16);
  // ip is read twice: the Split keeps its bottom's storage; so does the label's.
  EXPECT_EQ(TypeOf(*net, "ip_ip_0_split_0"), DataType::kBFloat16);
  EXPECT_EQ(TypeOf(*net, "label_data_1_split_0"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(*net, "loss"), DataType::kFloat32);  // a loss, and an output
  EXPECT_EQ(TypeOf(*net, "accuracy"), DataType::kFloat32);
  // What the layers see is float32 throughout.
  for (int i = 0; i < net->num_layers(); ++i) {
    for (const Blob* b : net->layer_bottoms(i)) EXPECT_EQ(b->dtype(), DataType::kFloat32);
    for (const Blob* t : net->layer_tops(i)) EXPECT_EQ(t->dtype(), DataType::kFloat32);
  }
  for (const Blob* p : net->learnable_params()) EXPECT_EQ(p->dtype(), DataType::kFloat32);

  const auto fp16 = Build(Parse(kNet), Amp::kFloat16);
  EXPECT_EQ(TypeOf(*fp16, "pool"), DataType::kFloat16);
  const auto off = Build(Parse(kNet), Amp::kOff);
  for (const BlobPtr& blob : off->blobs()) EXPECT_EQ(blob->dtype(), DataType::kFloat32);
}

TEST(Amp, LayerOverridesThePolicy) {
  NetParameter param = Parse(kNet);
  param.mutable_layer(3)->mutable_amp_param()->set_storage(AmpParameter::FLOAT);  // pool
  param.mutable_layer(5)->mutable_amp_param()->set_storage(AmpParameter::HALF);   // accuracy
  param.mutable_layer(0)->mutable_amp_param()->set_storage(AmpParameter::HALF);   // data
  const auto net = Build(param, Amp::kFloat16);
  EXPECT_EQ(TypeOf(*net, "pool"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(*net, "ip"), DataType::kFloat16);
  EXPECT_EQ(TypeOf(*net, "accuracy"), DataType::kFloat16);
  EXPECT_EQ(TypeOf(*net, "data"), DataType::kFloat16);
  // A loss top stays float32 whatever the layer says: the loss weight lives in its diff.
  param.mutable_layer(6)->mutable_amp_param()->set_storage(AmpParameter::HALF);
  EXPECT_EQ(TypeOf(*Build(param, Amp::kFloat16), "loss"), DataType::kFloat32);
  // Without --amp the override does nothing.
  EXPECT_EQ(TypeOf(*Build(param, Amp::kOff), "pool"), DataType::kFloat32);
  EXPECT_EQ(TypeOf(*Build(param, Amp::kOff), "accuracy"), DataType::kFloat32);
}

// Forward and Backward on the DummyData's draws after reseeding: the same inputs in every net.
double RunPass(Net* net) {
  SetRandomSeed(5);
  net->ClearParamDiffs();
  return net->ForwardBackward();
}

// ||a - b|| / ||b|| over a parameter's gradient.
double RelativeError(const Blob& a, const Blob& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.count(); ++i) {
    const double d = a.diff_at(i) - b.diff_at(i);
    num += d * d;
    den += b.diff_at(i) * b.diff_at(i);
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

TEST(Amp, ForwardAndBackwardFollowFloat32WithinTheRounding) {
  const NetParameter param = Parse(kNet);
  const auto reference = Build(param, Amp::kOff);
  for (Amp amp : {Amp::kBFloat16, Amp::kFloat16}) {
    SCOPED_TRACE(AmpName(amp));
    const auto net = Build(param, amp);
    NetParameter weights;
    reference->ToProto(&weights);
    net->CopyTrainedLayersFrom(weights);
    const double want = RunPass(reference.get());
    const double got = RunPass(net.get());
    const double tolerance = amp == Amp::kBFloat16 ? 2e-2 : 2e-3;
    EXPECT_NEAR(got, want, tolerance * std::fabs(want));
    EXPECT_NE(got, want) << "the half-precision net rounds somewhere";
    for (size_t p = 0; p < net->learnable_params().size(); ++p)
      EXPECT_LT(RelativeError(*net->learnable_params()[p], *reference->learnable_params()[p]),
                amp == Amp::kBFloat16 ? 3e-2 : 3e-3)
          << "param " << p << " " << net->param_display_names()[p];
  }
}

TEST(Amp, HalfStorageShrinksThePlannedActivations) {
  NetParameter param = Parse(kNet);
  // Larger activations, so that they, not the float32 loss and labels, dominate.
  param.mutable_layer(0)->mutable_dummy_data_param()->mutable_shape(0)->set_dim(0, 32);
  param.mutable_layer(0)->mutable_dummy_data_param()->mutable_shape(1)->set_dim(0, 32);
  param.mutable_layer(1)->mutable_convolution_param()->set_num_output(32);
  const auto full = Build(param, Amp::kOff, MemoryPlan::kTraining);
  const auto half = Build(param, Amp::kBFloat16, MemoryPlan::kTraining);
  EXPECT_LT(half->planned_bytes(), full->planned_bytes() * 3 / 4)
      << half->planned_bytes() << " vs " << full->planned_bytes();
  // And the planned bf16 net trains as the unplanned one.
  const auto unplanned = Build(param, Amp::kBFloat16);
  NetParameter weights;
  unplanned->ToProto(&weights);
  half->CopyTrainedLayersFrom(weights);
  EXPECT_EQ(RunPass(half.get()), RunPass(unplanned.get()));
  for (size_t p = 0; p < half->learnable_params().size(); ++p)
    EXPECT_EQ(RelativeError(*half->learnable_params()[p], *unplanned->learnable_params()[p]), 0);
}

TEST(Amp, LossScaleScalesTheGradientsNotTheLoss) {
  const NetParameter param = Parse(kNet);
  const auto plain = Build(param, Amp::kOff);
  const auto scaled = Build(param, Amp::kOff);
  NetParameter weights;
  plain->ToProto(&weights);
  scaled->CopyTrainedLayersFrom(weights);
  scaled->set_loss_scale(1024);
  EXPECT_EQ(scaled->loss_scale(), 1024);
  EXPECT_EQ(RunPass(scaled.get()), RunPass(plain.get()));
  // A power of two: exactly 1024 times each gradient.
  for (size_t p = 0; p < plain->learnable_params().size(); ++p) {
    const Blob& a = *scaled->learnable_params()[p];
    const Blob& b = *plain->learnable_params()[p];
    for (int64_t i = 0; i < a.count(); ++i) ASSERT_EQ(a.diff_at(i), 1024 * b.diff_at(i));
  }
}

TEST(Amp, WeightsAreSavedAsFloat32) {
  const auto net = Build(Parse(kNet), Amp::kFloat16);
  net->ForwardBackward();
  NetParameter saved;
  net->ToProto(&saved);
  int blobs = 0;
  for (const LayerParameter& layer : saved.layer())
    for (const BlobProto& blob : layer.blobs()) {
      ++blobs;
      EXPECT_GT(blob.data_size(), 0);
      EXPECT_FALSE(blob.has_half_data());
    }
  EXPECT_EQ(blobs, 4);
}

TEST(Amp, NamesRoundTrip) {
  for (Amp amp : {Amp::kOff, Amp::kFloat16, Amp::kBFloat16}) {
    Amp parsed = Amp::kOff;
    ASSERT_TRUE(AmpFromName(AmpName(amp), &parsed));
    EXPECT_EQ(parsed, amp);
  }
  Amp parsed = Amp::kOff;
  EXPECT_FALSE(AmpFromName("half", &parsed));
  EXPECT_EQ(AmpHalfType(Amp::kFloat16), DataType::kFloat16);
  EXPECT_EQ(AmpHalfType(Amp::kOff), DataType::kFloat32);
}

#ifdef CREMA_WITH_CUDA
TEST(Amp, GpuFollowsTheCpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const NetParameter param = Parse(kNet);
  for (Amp amp : {Amp::kBFloat16, Amp::kFloat16}) {
    SCOPED_TRACE(AmpName(amp));
    const auto cpu = Build(param, amp);
    NetOptions options;
    options.override_state = true;
    options.state.set_phase(TRAIN);
    options.verbose = false;
    options.amp = amp;
    options.device = Device::Cuda(0);
    Net gpu(param, options);
    NetParameter weights;
    cpu->ToProto(&weights);
    gpu.CopyTrainedLayersFrom(weights);
    const double want = RunPass(cpu.get());
    EXPECT_NEAR(RunPass(&gpu), want, 1e-2 * std::fabs(want));
    for (size_t p = 0; p < cpu->learnable_params().size(); ++p)
      EXPECT_LT(RelativeError(*gpu.learnable_params()[p], *cpu->learnable_params()[p]), 2e-2);
  }
}
#endif

}  // namespace
}  // namespace crema
